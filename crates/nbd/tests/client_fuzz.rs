//! Property-based fuzzing of the client's parsers: the reply reader and the handshake, fed
//! arbitrary bytes and well-formed server messages with bytes flipped and the end cut off.
//!
//! What must hold: nothing panics; a read request only ever completes with exactly the bytes it
//! asked for; well-formed replies (chunks in any order, data and holes mixed) reassemble to the
//! data the server meant; and the handshake accepts only constraints the specification allows.

use std::collections::HashMap;
mod common;

use common::scripted::Scripted;
use proptest::prelude::*;
use proptest::sample::Index;
use uraid_nbd::client::handshake::{handshake, ExportInfo};
use uraid_nbd::client::reply::{read_body, read_header, InFlight};
use uraid_nbd::proto::*;

/// A request the fuzzed replies may answer.
#[derive(Debug, Clone)]
struct Req {
    kind: u16,
    offset: u64,
    len: u32,
}

fn arb_req() -> impl Strategy<Value = Req> {
    prop_oneof![
        4 => (0u64..1 << 20, 1u32..3000).prop_map(|(offset, len)| Req { kind: CMD_READ, offset, len }),
        1 => (0u64..1 << 20, 1u32..3000).prop_map(|(offset, len)| Req { kind: CMD_WRITE, offset, len }),
        1 => Just(Req { kind: CMD_FLUSH, offset: 0, len: 0 }),
    ]
}

/// Reads replies until the input ends or breaks the protocol; returns the requests completed.
fn drain(bytes: &[u8], reqs: &[Req], structured: bool) -> Vec<(u64, Result<Vec<u8>, u32>)> {
    let mut table: HashMap<u64, InFlight> =
        reqs.iter().enumerate().map(|(i, r)| (i as u64 + 1, InFlight::new(r.kind, r.offset, r.len))).collect();
    let mut r = bytes;
    let mut done = Vec::new();
    while let Ok(h) = read_header(&mut r, structured) {
        let Some(mut req) = table.remove(&h.handle()) else { break };
        let kind = req.kind;
        let len = req.len;
        match read_body(&mut r, &h, &mut req) {
            Ok(true) => {
                let outcome = req.outcome().map_err(|e| e.errno);
                if let Ok(data) = &outcome {
                    let want = if kind == CMD_READ { len as usize } else { 0 };
                    assert_eq!(data.len(), want, "a completed request holds exactly its bytes");
                }
                done.push((h.handle(), outcome));
            }
            Ok(false) => {
                table.insert(h.handle(), req);
            }
            Err(_) => break,
        }
    }
    done
}

/// How the server answers one read: its data cut into pieces, each sent as data or (if zero)
/// possibly as a hole, in a shuffled order, perhaps with an error chunk.
#[derive(Debug, Clone)]
struct ReadAnswer {
    cuts: Vec<Index>,
    holes: Vec<bool>,
    order: Vec<Index>,
    error: bool,
    seed: u8,
}

fn arb_answer() -> impl Strategy<Value = ReadAnswer> {
    (
        prop::collection::vec(any::<Index>(), 0..6),
        prop::collection::vec(any::<bool>(), 8),
        prop::collection::vec(any::<Index>(), 8),
        prop::bool::weighted(0.15),
        any::<u8>(),
    )
        .prop_map(|(cuts, holes, order, error, seed)| ReadAnswer { cuts, holes, order, error, seed })
}

fn chunk(flags: u16, chunk_type: u16, handle: u64, payload: &[u8]) -> Vec<u8> {
    let mut b = ChunkHeader { flags, chunk_type, handle, len: payload.len() as u32 }.encode().to_vec();
    b.extend_from_slice(payload);
    b
}

/// The data a read answers with, and the reply stream for it.
fn structured_read(handle: u64, req: &Req, a: &ReadAnswer) -> (Vec<u8>, Vec<u8>) {
    let len = req.len as usize;
    let mut points: Vec<usize> = a.cuts.iter().map(|c| c.index(len)).filter(|&p| p > 0).collect();
    points.push(0);
    points.push(len);
    points.sort_unstable();
    points.dedup();
    let pieces: Vec<(usize, usize)> = points.windows(2).map(|w| (w[0], w[1])).collect();
    let mut data = vec![0u8; len];
    let mut chunks = Vec::new();
    for (i, &(s, e)) in pieces.iter().enumerate() {
        let hole = a.holes[i % a.holes.len()];
        let at = req.offset + s as u64;
        if hole {
            let mut p = at.to_be_bytes().to_vec();
            p.extend_from_slice(&((e - s) as u32).to_be_bytes());
            chunks.push(chunk(0, REPLY_TYPE_OFFSET_HOLE, handle, &p));
        } else {
            for (j, b) in data[s..e].iter_mut().enumerate() {
                *b = (s + j) as u8 ^ a.seed;
            }
            let mut p = at.to_be_bytes().to_vec();
            p.extend_from_slice(&data[s..e]);
            chunks.push(chunk(0, REPLY_TYPE_OFFSET_DATA, handle, &p));
        }
    }
    for (i, o) in a.order.iter().enumerate() {
        let n = chunks.len();
        chunks.swap(i % n, o.index(n));
    }
    if a.error {
        let mut p = 5u32.to_be_bytes().to_vec();
        p.extend_from_slice(&4u16.to_be_bytes());
        p.extend_from_slice(b"oops");
        chunks.push(chunk(0, REPLY_TYPE_ERROR, handle, &p));
    }
    chunks.push(chunk(REPLY_FLAG_DONE, REPLY_TYPE_NONE, handle, &[]));
    (data, chunks.concat())
}

fn flip(mut bytes: Vec<u8>, flips: &[(Index, u8)], cut: Option<Index>) -> Vec<u8> {
    if !bytes.is_empty() {
        for (at, x) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= x;
        }
        if let Some(c) = cut {
            bytes.truncate(c.index(bytes.len()));
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..4096),
                                   reqs in prop::collection::vec(arb_req(), 1..6),
                                   structured in any::<bool>()) {
        drain(&bytes, &reqs, structured);
    }

    #[test]
    fn headers_with_arbitrary_fields_never_panic(
        reqs in prop::collection::vec(arb_req(), 1..6),
        chunks in prop::collection::vec((any::<u16>(), 0u16..8, 1u64..8, any::<u32>(), prop::collection::vec(any::<u8>(), 0..64)), 1..8),
    ) {
        // Real chunk types (and their error-bit forms) with random flags, handles and lengths.
        let bytes: Vec<u8> = chunks.iter().flat_map(|(flags, t, handle, len, tail)| {
            let chunk_type = if t & 4 != 0 { REPLY_TYPE_ERR_BIT | (t & 3) } else { t & 3 };
            let mut b = ChunkHeader { flags: *flags, chunk_type, handle: *handle, len: *len }.encode().to_vec();
            b.extend_from_slice(tail);
            b
        }).collect();
        drain(&bytes, &reqs, true);
    }

    #[test]
    fn well_formed_replies_reassemble_and_mutated_ones_stay_safe(
        reqs in prop::collection::vec(arb_req(), 1..5),
        answers in prop::collection::vec(arb_answer(), 5),
        flips in prop::collection::vec((any::<Index>(), 1u8..), 0..3),
        cut in prop::option::of(any::<Index>()),
    ) {
        let mut stream = Vec::new();
        let mut expected = HashMap::new();
        for (i, req) in reqs.iter().enumerate() {
            let handle = i as u64 + 1;
            if req.kind == CMD_READ {
                let (data, bytes) = structured_read(handle, req, &answers[i]);
                expected.insert(handle, if answers[i].error { Err(5) } else { Ok(data) });
                stream.extend(bytes);
            } else {
                stream.extend(SimpleReplyHeader { error: 0, handle }.encode());
                expected.insert(handle, Ok(Vec::new()));
            }
        }
        let done = drain(&stream, &reqs, true);
        prop_assert_eq!(done.len(), reqs.len());
        for (handle, outcome) in done {
            prop_assert_eq!(&outcome, &expected[&handle]);
        }
        let mutated = flip(stream, &flips, cut);
        drain(&mutated, &reqs, true);
    }

    #[test]
    fn handshake_over_arbitrary_and_mutated_bytes(
        size in any::<u64>(),
        flags in any::<u16>(),
        block in prop::option::of((0u32..18, 0u32..18, any::<u32>())),
        structured in any::<bool>(),
        flips in prop::collection::vec((any::<Index>(), 1u8..), 0..3),
        cut in prop::option::of(any::<Index>()),
        noise in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let mut server = encode_greeting(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_vec();
        let reply = |option, reply_type, data: &[u8]| {
            let mut b = OptionReplyHeader { option, reply_type, len: data.len() as u32 }.encode().to_vec();
            b.extend_from_slice(data);
            b
        };
        server.extend(reply(OPT_STRUCTURED_REPLY, if structured { REP_ACK } else { REP_ERR_UNSUP }, &[]));
        server.extend(reply(OPT_GO, REP_INFO, &info_export(size, flags)));
        if let Some((min, pref, max)) = block {
            server.extend(reply(OPT_GO, REP_INFO, &info_block_size(1 << min, 1 << pref, max)));
        }
        server.extend(reply(OPT_GO, REP_ACK, &[]));
        let clean = run_handshake(&server);
        let valid_block = block.is_none_or(|(min, pref, max)| min <= 16 && pref >= min.max(9) && max >= 1 << pref);
        match clean {
            Ok(info) => {
                prop_assert!(valid_block);
                prop_assert_eq!((info.size, info.flags, info.structured), (size, flags, structured));
                prop_assert!(info.min_block.is_power_of_two() && info.max_payload >= info.min_block);
                prop_assert!(info.max_payload % info.min_block == 0 && info.max_payload <= 1 << 25);
            }
            Err(_) => prop_assert!(!valid_block),
        }
        if let Ok(info) = run_handshake(&flip(server, &flips, cut)) {
            prop_assert!(info.min_block.is_power_of_two() && info.max_payload >= info.min_block);
        }
        let _ = run_handshake(&noise);
    }
}

fn run_handshake(bytes: &[u8]) -> Result<ExportInfo, String> {
    handshake(&mut Scripted(bytes), "disk").map_err(|e| e.to_string())
}
