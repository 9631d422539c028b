//! A minimal synchronous driver loop: run one request through the engine, performing each member
//! I/O with a caller-supplied closure, until the request completes.
//!
//! Real drivers keep many requests and member I/Os in flight; this loop exists for tools that do
//! one thing at a time (create's initial sync, `cat`) and for tests.

use crate::array::{Completion, Request};
use crate::engine::RequestFlow;
use crate::error::EngineError;
use crate::member_io::{IoResult, MemberIo};

/// Submit `request` and drive the engine until it completes, executing member I/Os with `exec`.
pub fn execute<E: RequestFlow + ?Sized>(
    array: &mut E,
    request: Request,
    exec: &mut dyn FnMut(&MemberIo) -> IoResult,
) -> Result<Completion, EngineError> {
    let id = array.submit(request)?;
    loop {
        while let Some((done, result)) = array.next_completion() {
            if done == id {
                return result;
            }
        }
        let io = array
            .next_io()
            .unwrap_or_else(|| panic!("engine stalled: request {id} unfinished and no member I/O to do"));
        let result = exec(&io);
        array.complete_io(io.id, result.handing_back(io.op));
    }
}
