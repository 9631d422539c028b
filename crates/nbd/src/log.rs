//! The server's log lines.

use std::fmt;

/// Every line the server prints goes through here, so that sending them elsewhere (syslog, a
/// file, a test's capture) is a change in one place.
pub(crate) fn log(line: fmt::Arguments<'_>) {
    eprintln!("uraid-nbd: {line}");
}
