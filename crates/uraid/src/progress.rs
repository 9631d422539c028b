//! Progress of a pass shown while `uraid` runs or waits for it in the foreground: an indicatif
//! bar on a terminal, nothing otherwise (scripts get the final line only). [`follow`] waits for
//! a background pass of the service; [`bytes_bar`] is for a pass the command drives itself.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

use crate::commands::CliResult;
use crate::mdstat::sync_progress;

/// Wait until no pass is running, and return the last status (JSON, as `control::status_json`
/// gives it). On a terminal, `poll` is called every 200 ms to draw a bar on stderr; otherwise
/// `wait` is called once and blocks.
pub fn follow(mut poll: impl FnMut() -> CliResult<Value>, wait: impl FnOnce() -> CliResult<Value>) -> CliResult<Value> {
    if !std::io::stderr().is_terminal() {
        return wait();
    }
    let bar = ProgressBar::new(1);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg:>8} [{bar:40}] {percent:>3}% {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} eta {eta}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    loop {
        let status = poll()?;
        match sync_progress(&status) {
            Some((action, done, total)) => {
                bar.set_message(action);
                bar.set_length(total.max(1));
                bar.set_position(done);
            }
            None => {
                bar.finish_and_clear();
                return Ok(status);
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A bar over `total` bytes labelled `message`, drawn on stderr when it is a terminal (`None`
/// otherwise); the caller moves it with `set_position` and clears it with `finish_and_clear`.
pub fn bytes_bar(total: u64, message: &'static str) -> Option<ProgressBar> {
    std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template(
                "{msg:>8} [{bar:40}] {percent:>3}% {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} eta {eta}",
            )
            .expect("a valid template")
            .progress_chars("=> "),
        );
        bar.set_message(message);
        bar
    })
}
