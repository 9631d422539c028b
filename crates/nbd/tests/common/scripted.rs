//! A server's side of a conversation played from bytes fixed in advance, for the client's
//! parsers.

use std::io::{self, Read, Write};

/// A server's bytes to read from, and whatever the client writes thrown away.
pub struct Scripted<'a>(pub &'a [u8]);

impl Read for Scripted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for Scripted<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
