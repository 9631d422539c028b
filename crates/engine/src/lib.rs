//! uraid's array engine.
//!
//! Sans-I/O: it takes block requests and member completions and emits member I/Os, so one engine
//! runs over real files, block devices and simulated disks alike (see the design note in docs/).
//!
//! - [`geometry`]: a level's layout as byte runs on member slots;
//! - [`idmap`]: hash maps over the engine's integer ids, without SipHash's cost;
//! - [`iobuf`]: request and member data passed through without copying;
//! - [`metadata`]: a running array's on-disk metadata behind one format-neutral interface;
//! - [`bufpool`]: large data buffers (member reads, client writes) that stay mapped between uses;
//! - [`mod@array`]: the request state machine (degraded I/O, rmw/rcw, check/repair);
//! - [`ppl`]: md's partial parity log: entries for stripe writes, replay after a crash;
//! - [`read_balance`]: which copy of mirrored data a read goes to ([`ReadPolicy`]);
//! - [`nested`]: a mirror whose copies are arrays of their own, on two levels of [`Array`];
//! - [`Engine`]: either of the two, behind one interface for drivers;
//! - [`blocking`]: a minimal synchronous loop that runs the engine against a closure doing I/O.

pub mod array;
pub mod blocking;
pub mod bufpool;
mod engine;
mod error;
pub mod geometry;
pub mod idmap;
pub mod iobuf;
mod member_io;
pub mod metadata;
pub mod nested;
pub mod ppl;
pub mod read_balance;
mod read_latency;
mod slot;
mod slot_change;

pub use array::{Array, Completion, EngineEvent, ParityWriteChoice, Request, RequestId};
pub use bufpool::PoolBuf;
pub use engine::{Engine, RequestFlow};
pub use error::EngineError;
pub use geometry::{Geometry, SECTOR_BYTES};
pub use iobuf::IoBuf;
pub use member_io::{IoResult, MemberIo, MemberIoError, MemberOp};
pub use read_balance::{ReadPolicy, SplitTuning, UnknownReadPolicy};
pub use slot::SlotState;
