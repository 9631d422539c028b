//! Member I/O results coming back: each is judged (data, done, a read error, or lost because its
//! member failed or changed), a failed write or correction fails its member, and the result goes
//! to the request, read-ahead or log write that issued the I/O.

use super::emit::{IoKind, Outcome};
use super::requests::OpKind;
use super::{logging, readahead, Array, EngineEvent};
use crate::member_io::{IoId, IoResult, MemberOp};

impl Array {
    /// Report the outcome of member I/O `id`.
    pub fn complete_io(&mut self, id: IoId, result: IoResult) {
        let result = match result {
            IoResult::Written(data) => {
                for piece in data.into_pieces() {
                    self.parity_blocks.give_back(piece);
                }
                IoResult::Done
            }
            other => other,
        };
        let io = self.io_owner.remove(&id).expect("completion for an unknown member I/O");
        let slot = io.tag.slot;
        self.balance.completed(slot, io.offset, io.len, io.moves_head);
        if let (Some(timing), IoResult::Read(_)) = (io.timing, &result) {
            if self.generation[slot] == io.generation {
                self.balance.read_finished(slot, timing);
            }
        }
        let outcome = if self.generation[slot] != io.generation {
            Outcome::Lost
        } else {
            match result {
                IoResult::Read(_) if io.kind == IoKind::Reread => {
                    self.events.push(EngineEvent::ReadErrorCorrected { slot, offset: io.offset, len: io.len });
                    Outcome::Done
                }
                IoResult::Read(data) => Outcome::Data(data),
                IoResult::Done | IoResult::Written(_) => {
                    // Corrections go to in-sync members only, and a member that leaves that
                    // state takes a new generation (its I/Os are lost above), so this one can
                    // be read back.
                    if io.kind == IoKind::Correction && self.in_sync(slot) {
                        // Not done until read back: the owner hears of it then.
                        self.emit_io(io.rid, io.tag, io.offset, MemberOp::Read { len: io.len }, IoKind::Reread);
                        return;
                    }
                    Outcome::Done
                }
                IoResult::Failed(reason) => match io.kind {
                    // md's failfast: a member that does not answer, or cannot be reached, is
                    // failed at once where the array can do without it, and the read is served
                    // from the others; narrowing the error to rows and rewriting them would
                    // wait on the member for every row.
                    IoKind::Read if reason.member_unreachable() && self.can_lose(slot) => {
                        self.fail_slot(slot, &format!("not answering: {reason}"), true);
                        Outcome::Lost
                    }
                    IoKind::Read => Outcome::ReadError,
                    IoKind::Correction => {
                        self.fail_slot(
                            slot,
                            &format!("rewriting after a read error failed: {reason}"),
                            reason.member_unreachable(),
                        );
                        Outcome::Lost
                    }
                    IoKind::Reread => {
                        self.fail_slot(
                            slot,
                            &format!("reading back a rewritten read error failed: {reason}"),
                            reason.member_unreachable(),
                        );
                        Outcome::Lost
                    }
                    IoKind::Write | IoKind::Other => {
                        self.fail_slot(slot, &reason.to_string(), reason.member_unreachable());
                        Outcome::Lost
                    }
                },
            }
        };
        let rid = io.rid;
        let tag = io.tag;
        if rid == readahead::READAHEAD_RID {
            self.readahead_io_done(tag, outcome);
            self.log_maintenance();
            self.admit_waiting();
            return;
        }
        if rid == logging::LOG_RID {
            self.log_io_done(tag, outcome);
            self.log_maintenance();
            self.admit_waiting();
            return;
        }
        let mut op = self.ops.remove(&rid).expect("member I/O of a finished request");
        let done = match &mut op.kind {
            OpKind::Read(r) => self.read_io_done(rid, r, tag, outcome),
            OpKind::Write(w) => self.copy_write_io_done(w, tag, outcome),
            OpKind::ParityWrite(w) => self.parity_write_io_done(rid, w, tag, outcome),
            OpKind::Flush { pending, ok } => {
                *pending -= 1;
                if outcome.succeeded() && self.in_sync(slot) {
                    *ok += 1;
                }
                *pending == 0
            }
            OpKind::Sync(s) => self.sync_io_done(rid, s, tag, outcome),
            OpKind::Discard(d) => {
                d.pending -= 1;
                if outcome.succeeded() && self.in_sync(slot) {
                    d.parts[tag.part] += 1;
                }
                d.pending == 0
            }
            OpKind::Recover(r) => self.recover_io_done(rid, r, tag, outcome),
        };
        if done {
            self.finish(rid, op);
        } else {
            self.ops.insert(rid, op);
        }
        self.log_maintenance();
        self.admit_waiting();
    }
}
