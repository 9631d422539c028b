//! The loop around a raw system call that moves bytes (`pread`, `pwrite`, `splice`, `read`),
//! shared by the member backends ([`crate::member`]) and the pipes of spliced reads
//! ([`crate::splice`]).

use std::io;

/// Repeat one system call until `len` bytes are moved: `step(done)` makes the call for what is
/// left after `done` bytes and returns what it returned (a count, or -1 with `errno` set).
/// Interrupted calls are retried, errors returned, and a call that moves nothing ends the loop
/// with `at_zero(done)`.
pub(crate) fn transfer_all(
    len: usize,
    mut step: impl FnMut(usize) -> isize,
    at_zero: impl Fn(usize) -> io::Error,
) -> io::Result<()> {
    let mut done = 0;
    while done < len {
        let rc = step(done);
        if rc < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if rc == 0 {
            return Err(at_zero(done));
        }
        done += rc as usize;
    }
    Ok(())
}
