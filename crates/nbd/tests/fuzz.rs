//! Property-based fuzzing of the server over a raw socket.
//!
//! Each case is a byte string a client sends (then closes its side): random bytes, or a generated
//! handshake and request sequence with random bytes flipped and the end cut off. A reference
//! interpreter written here from the protocol rules (not from the server's code) predicts every
//! message the server must send in reply; the server's output must match it exactly, the server
//! must close the connection when the input ends, its thread must not panic, a second healthy
//! connection must keep working, and the export's contents must change only by the writes the
//! reference accepted.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use uraid_nbd::proto::*;
use uraid_nbd::testing::{MemExport, TestClient};
use uraid_nbd::{ExportCommand, Server, ServerConfig};

const SIZE: u64 = 64 << 10;
const MAX_PAYLOAD: u32 = 16 << 10;
const NAME: &str = "fz";
const DESCRIPTION: &str = "fuzzed";
const MAX_OPTION: u32 = 64 << 10;
/// Refused write payloads up to this size are skipped; larger ones end the connection.
const DISCARD_LIMIT: u64 = 32 << 20;
const EINVAL: u32 = 22;
const EPERM: u32 = 1;
const ENOSPC: u32 = 28;

// ---- Generation ------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum GenOption {
    List { data: bool },
    Info { go: bool, name: &'static str, infos: Vec<u16>, garbage: Option<Vec<u8>> },
    Structured { data: bool },
    StartTls,
    Abort,
    ExportName { name: &'static str },
    Other { option: u32, data: Vec<u8> },
    Big { extra: u32 },
}

#[derive(Debug, Clone)]
struct GenRequest {
    kind: u16,
    flags: u16,
    handle: u64,
    offset: u64,
    len: u32,
    seed: u8,
}

#[derive(Debug, Clone)]
struct Mutation {
    at: Index,
    xor: u8,
}

#[derive(Debug, Clone)]
struct Case {
    read_only: bool,
    bytes: Vec<u8>,
}

fn arb_name() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["", NAME, "other"])
}

fn arb_option() -> impl Strategy<Value = GenOption> {
    prop_oneof![
        2 => any::<bool>().prop_map(|data| GenOption::List { data }),
        4 => (
            // Mostly INFO: a GO here would end option haggling before the generated GO.
            prop::bool::weighted(0.15),
            arb_name(),
            prop::collection::vec(prop_oneof![4 => 0u16..4, 1 => any::<u16>()], 0..4),
            prop::option::weighted(0.2, prop::collection::vec(any::<u8>(), 0..12)),
        )
            .prop_map(|(go, name, infos, garbage)| GenOption::Info { go, name, infos, garbage }),
        2 => any::<bool>().prop_map(|data| GenOption::Structured { data }),
        1 => Just(GenOption::StartTls),
        1 => Just(GenOption::Abort),
        1 => arb_name().prop_map(|name| GenOption::ExportName { name }),
        1 => (any::<u32>(), prop::collection::vec(any::<u8>(), 0..8)).prop_map(|(option, data)| GenOption::Other { option, data }),
        1 => (1u32..2048).prop_map(|extra| GenOption::Big { extra }),
    ]
}

fn arb_request() -> impl Strategy<Value = GenRequest> {
    let kind = prop_oneof![
        24 => prop::sample::select(vec![CMD_READ, CMD_READ, CMD_WRITE, CMD_WRITE, CMD_FLUSH, CMD_TRIM, CMD_CACHE, CMD_WRITE_ZEROES]),
        1 => Just(CMD_DISC),
        1 => Just(CMD_BLOCK_STATUS),
        1 => any::<u16>(),
    ];
    let flags = prop_oneof![
        12 => Just(0u16),
        3 => Just(CMD_FLAG_FUA),
        1 => Just(CMD_FLAG_NO_HOLE),
        1 => Just(CMD_FLAG_DF),
        1 => Just(CMD_FLAG_FAST_ZERO),
        1 => any::<u16>(),
    ];
    let offset = prop_oneof![
        6 => (0..SIZE / 512).prop_map(|b| b * 512),
        2 => SIZE - 8192..SIZE + 8192,
        1 => any::<u64>(),
        1 => Just(u64::MAX),
    ];
    let len = prop_oneof![
        10 => (0u32..9).prop_map(|b| b * 512),
        2 => 0u32..5000,
        1 => Just(MAX_PAYLOAD),
        1 => Just(MAX_PAYLOAD + 1),
        1 => MAX_PAYLOAD + 1..40_000,
        1 => any::<u32>(),
    ];
    (kind, flags, any::<u64>(), offset, len, any::<u8>())
        .prop_map(|(kind, flags, handle, offset, len, seed)| GenRequest { kind, flags, handle, offset, len, seed })
}

fn encode_option(option: &GenOption, out: &mut Vec<u8>) {
    let (code, data): (u32, Vec<u8>) = match option {
        GenOption::List { data } => (OPT_LIST, if *data { vec![1, 2] } else { vec![] }),
        GenOption::Info { go, name, infos, garbage } => {
            let code = if *go { OPT_GO } else { OPT_INFO };
            match garbage {
                Some(g) => (code, g.clone()),
                None => {
                    let mut d = (name.len() as u32).to_be_bytes().to_vec();
                    d.extend_from_slice(name.as_bytes());
                    d.extend_from_slice(&(infos.len() as u16).to_be_bytes());
                    for i in infos {
                        d.extend_from_slice(&i.to_be_bytes());
                    }
                    (code, d)
                }
            }
        }
        GenOption::Structured { data } => (OPT_STRUCTURED_REPLY, if *data { vec![0] } else { vec![] }),
        GenOption::StartTls => (OPT_STARTTLS, vec![]),
        GenOption::Abort => (OPT_ABORT, vec![]),
        GenOption::ExportName { name } => (OPT_EXPORT_NAME, name.as_bytes().to_vec()),
        GenOption::Other { option, data } => (*option, data.clone()),
        GenOption::Big { extra } => (OPT_GO, vec![0x5a; (MAX_OPTION + extra) as usize]),
    };
    out.extend_from_slice(&IHAVEOPT.to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(&data);
}

fn encode_request(r: &GenRequest, out: &mut Vec<u8>) {
    out.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
    out.extend_from_slice(&r.flags.to_be_bytes());
    out.extend_from_slice(&r.kind.to_be_bytes());
    out.extend_from_slice(&r.handle.to_be_bytes());
    out.extend_from_slice(&r.offset.to_be_bytes());
    out.extend_from_slice(&r.len.to_be_bytes());
    if r.kind == CMD_WRITE {
        // A payload of the announced length when that is small, otherwise a short one, which
        // leaves the server reading the following bytes as data.
        let n = if r.len <= 8192 { r.len as usize } else { (r.len as usize).min(100) };
        out.extend((0..n).map(|i| (i as u8).wrapping_mul(7) ^ r.seed));
    }
}

fn arb_structured_case() -> impl Strategy<Value = Case> {
    (
        any::<bool>(),
        prop_oneof![8 => prop::sample::select(vec![FLAG_C_FIXED_NEWSTYLE, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES]), 1 => any::<u32>()],
        prop::collection::vec(arb_option(), 0..4),
        prop::option::weighted(0.85, (any::<bool>(), any::<bool>(), arb_name())),
        prop::collection::vec(arb_request(), 0..14),
        prop::collection::vec(any::<u8>(), 0..40),
        prop::option::weighted(0.35, prop::collection::vec((any::<Index>(), 1u8..=255).prop_map(|(at, xor)| Mutation { at, xor }), 1..4)),
        prop::option::weighted(0.15, any::<Index>()),
    )
        .prop_map(|(read_only, flags, options, enter, requests, junk, mutations, cut)| {
            let mut b = flags.to_be_bytes().to_vec();
            for o in &options {
                encode_option(o, &mut b);
            }
            if let Some((structured, go, name)) = enter {
                if structured {
                    encode_option(&GenOption::Structured { data: false }, &mut b);
                }
                let enter = if go {
                    GenOption::Info { go: true, name, infos: vec![INFO_BLOCK_SIZE], garbage: None }
                } else {
                    GenOption::ExportName { name }
                };
                encode_option(&enter, &mut b);
            }
            for r in &requests {
                encode_request(r, &mut b);
            }
            b.extend_from_slice(&junk);
            for m in mutations.into_iter().flatten() {
                if !b.is_empty() {
                    let i = m.at.index(b.len());
                    b[i] ^= m.xor;
                }
            }
            if let Some(cut) = cut {
                if !b.is_empty() {
                    b.truncate(cut.index(b.len()));
                }
            }
            Case { read_only, bytes: b }
        })
}

fn arb_case() -> impl Strategy<Value = Case> {
    prop_oneof![
        1 => (any::<bool>(), prop::collection::vec(any::<u8>(), 0..200)).prop_map(|(read_only, bytes)| Case { read_only, bytes }),
        // Valid flags, then random bytes where the first option should be.
        1 => (any::<bool>(), prop::collection::vec(any::<u8>(), 0..200)).prop_map(|(read_only, tail)| {
            let mut bytes = (FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes().to_vec();
            bytes.extend_from_slice(&IHAVEOPT.to_be_bytes());
            bytes.extend_from_slice(&tail);
            Case { read_only, bytes }
        }),
        6 => arb_structured_case(),
    ]
}

// ---- The reference interpreter ---------------------------------------------------------------

#[derive(Debug)]
struct ExpectedOptionReply {
    option: u32,
    reply_type: u32,
    /// Exact data, where the protocol fixes it (error messages are free text).
    data: Option<Vec<u8>>,
}

#[derive(Debug, Clone)]
struct ExpectedReply {
    handle: u64,
    error: u32,
    offset: u64,
    /// Length of the data of a successful read.
    read_len: Option<u32>,
}

#[derive(Debug, Default)]
struct Prediction {
    options: Vec<ExpectedOptionReply>,
    /// Entered transmission through NBD_OPT_EXPORT_NAME: (flags, with the 124 zeroes).
    export_name_reply: Option<(u16, bool)>,
    structured: bool,
    replies: Vec<ExpectedReply>,
    mutations: Vec<ExportCommand>,
}

struct Input<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    fn take(&mut self, n: u64) -> Option<&'a [u8]> {
        let n = usize::try_from(n).ok()?;
        if self.bytes.len() - self.pos < n {
            return None;
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Some(s)
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32::from_be_bytes(b.try_into().unwrap()))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|b| u64::from_be_bytes(b.try_into().unwrap()))
    }
}

fn transmission_flags(read_only: bool, structured: bool) -> u16 {
    let mut f = FLAG_HAS_FLAGS | FLAG_SEND_FLUSH | FLAG_SEND_FUA | FLAG_SEND_CACHE | FLAG_CAN_MULTI_CONN;
    f |= if read_only { FLAG_READ_ONLY } else { FLAG_SEND_TRIM | FLAG_SEND_WRITE_ZEROES };
    if structured {
        f |= FLAG_SEND_DF;
    }
    f
}

fn known_name(name: &[u8]) -> bool {
    name.is_empty() || name == NAME.as_bytes()
}

/// Option data of NBD_OPT_INFO/GO: (name, information requests), or None when malformed.
fn parse_info(data: &[u8]) -> Option<(Vec<u8>, Vec<u16>)> {
    let mut i = Input { bytes: data, pos: 0 };
    let name_len = i.u32()?;
    let name = i.take(name_len.into())?.to_vec();
    let n = i.u16()?;
    let infos = (0..n).map(|_| i.u16()).collect::<Option<Vec<u16>>>()?;
    (i.pos == data.len()).then_some((name, infos))
}

fn info(kind: u16, payload: &[u8]) -> Option<Vec<u8>> {
    let mut d = kind.to_be_bytes().to_vec();
    d.extend_from_slice(payload);
    Some(d)
}

fn predict(bytes: &[u8], read_only: bool) -> Prediction {
    let mut p = Prediction::default();
    let mut input = Input { bytes, pos: 0 };
    let Some(flags) = input.u32() else { return p };
    if flags & !3 != 0 || flags & 1 == 0 {
        return p;
    }
    let no_zeroes = flags & 2 != 0;
    let mut structured = false;
    loop {
        let Some(magic) = input.u64() else { return p };
        if magic != IHAVEOPT {
            return p;
        }
        let (Some(option), Some(len)) = (input.u32(), input.u32()) else { return p };
        let mut reply =
            |reply_type: u32, data: Option<Vec<u8>>| p.options.push(ExpectedOptionReply { option, reply_type, data });
        if len > MAX_OPTION {
            if input.take(len.into()).is_none() || option == OPT_EXPORT_NAME {
                return p;
            }
            reply(REP_ERR_TOO_BIG, None);
            continue;
        }
        let Some(data) = input.take(len.into()) else { return p };
        match option {
            OPT_EXPORT_NAME => {
                if !known_name(data) {
                    return p;
                }
                p.export_name_reply = Some((transmission_flags(read_only, structured), !no_zeroes));
                break;
            }
            OPT_ABORT => {
                reply(REP_ACK, Some(vec![]));
                return p;
            }
            OPT_LIST if data.is_empty() => {
                let mut d = (NAME.len() as u32).to_be_bytes().to_vec();
                d.extend_from_slice(NAME.as_bytes());
                d.extend_from_slice(DESCRIPTION.as_bytes());
                reply(REP_SERVER, Some(d));
                reply(REP_ACK, Some(vec![]));
            }
            OPT_LIST => reply(REP_ERR_INVALID, None),
            OPT_INFO | OPT_GO => match parse_info(data) {
                None => reply(REP_ERR_INVALID, None),
                Some((name, _)) if !known_name(&name) => reply(REP_ERR_UNKNOWN, None),
                Some((_, infos)) => {
                    let mut export = SIZE.to_be_bytes().to_vec();
                    export.extend_from_slice(&transmission_flags(read_only, structured).to_be_bytes());
                    reply(REP_INFO, info(INFO_EXPORT, &export));
                    if infos.contains(&INFO_NAME) {
                        reply(REP_INFO, info(INFO_NAME, NAME.as_bytes()));
                    }
                    if infos.contains(&INFO_DESCRIPTION) {
                        reply(REP_INFO, info(INFO_DESCRIPTION, DESCRIPTION.as_bytes()));
                    }
                    let sizes: Vec<u8> = [1u32, 4096, MAX_PAYLOAD].iter().flat_map(|v| v.to_be_bytes()).collect();
                    reply(REP_INFO, info(INFO_BLOCK_SIZE, &sizes));
                    reply(REP_ACK, Some(vec![]));
                    if option == OPT_GO {
                        break;
                    }
                }
            },
            OPT_STRUCTURED_REPLY if data.is_empty() => {
                structured = true;
                reply(REP_ACK, Some(vec![]));
            }
            OPT_STRUCTURED_REPLY => reply(REP_ERR_INVALID, None),
            // Malformed before unsupported: the server judges STARTTLS's data first (TLS is off
            // here, so an empty one is refused as unsupported below).
            OPT_STARTTLS if !data.is_empty() => reply(REP_ERR_INVALID, None),
            _ => reply(REP_ERR_UNSUP, None),
        }
    }

    p.structured = structured;
    loop {
        let Some(magic) = input.u32() else { return p };
        if magic != REQUEST_MAGIC {
            return p;
        }
        let (Some(flags), Some(kind), Some(handle), Some(offset), Some(len)) =
            (input.u16(), input.u16(), input.u64(), input.u64(), input.u32())
        else {
            return p;
        };
        if kind == CMD_DISC {
            return p;
        }
        let allowed = match kind {
            CMD_READ => CMD_FLAG_FUA | if structured { CMD_FLAG_DF } else { 0 },
            CMD_WRITE | CMD_FLUSH | CMD_TRIM | CMD_CACHE => CMD_FLAG_FUA,
            CMD_WRITE_ZEROES => CMD_FLAG_FUA | CMD_FLAG_NO_HOLE,
            _ => 0,
        };
        let writes = matches!(kind, CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES);
        let end = offset.checked_add(len.into());
        let error = if !matches!(kind, CMD_READ | CMD_WRITE | CMD_FLUSH | CMD_TRIM | CMD_CACHE | CMD_WRITE_ZEROES)
            || flags & !allowed != 0
        {
            EINVAL
        } else if read_only && writes {
            EPERM
        } else if matches!(kind, CMD_READ | CMD_WRITE) && len > MAX_PAYLOAD {
            EINVAL
        } else if kind != CMD_FLUSH && !matches!(end, Some(e) if e <= SIZE) {
            if matches!(kind, CMD_WRITE | CMD_WRITE_ZEROES) {
                ENOSPC
            } else {
                EINVAL
            }
        } else {
            0
        };
        let mut data = None;
        if kind == CMD_WRITE && len > 0 {
            if error != 0 && u64::from(len) > DISCARD_LIMIT {
                return p;
            }
            match input.take(len.into()) {
                Some(d) => data = Some(d.to_vec()),
                None => return p,
            }
        }
        if error == 0 && len > 0 {
            let fua = flags & CMD_FLAG_FUA != 0;
            match kind {
                CMD_WRITE => p.mutations.push(ExportCommand::Write { offset, data: data.unwrap().into(), fua }),
                CMD_TRIM => p.mutations.push(ExportCommand::Trim { offset, len, fua }),
                CMD_WRITE_ZEROES => p.mutations.push(ExportCommand::WriteZeroes {
                    offset,
                    len,
                    may_trim: flags & CMD_FLAG_NO_HOLE == 0,
                    fua,
                }),
                _ => {}
            }
        }
        p.replies.push(ExpectedReply {
            handle,
            error,
            offset,
            read_len: (kind == CMD_READ && error == 0).then_some(len),
        });
    }
}

// ---- Checking the server's output against the prediction -------------------------------------

fn fail(msg: String) -> TestCaseError {
    TestCaseError::fail(msg)
}

/// Reads `out` as the server's side of the conversation the prediction describes. Returns the
/// data of each successful read by handle.
fn check_output(out: &[u8], p: &Prediction) -> Result<HashMap<u64, Vec<u8>>, TestCaseError> {
    let mut o = Input { bytes: out, pos: 0 };
    let short = |what: &str| fail(format!("output ends before {what}: {p:?}"));
    let greeting = o.take(GREETING_LEN as u64).ok_or_else(|| short("the greeting"))?;
    prop_assert_eq!(greeting, &encode_greeting(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES)[..]);
    for expected in &p.options {
        let h = o.take(OPTION_REPLY_HEADER_LEN as u64).ok_or_else(|| short("an option reply"))?;
        let h = OptionReplyHeader::decode(h.try_into().unwrap()).map_err(|e| fail(e.to_string()))?;
        prop_assert_eq!(
            (h.option, h.reply_type),
            (expected.option, expected.reply_type),
            "option replies: {:?}",
            p.options
        );
        let data = o.take(h.len.into()).ok_or_else(|| short("option reply data"))?;
        if let Some(d) = &expected.data {
            prop_assert_eq!(data, &d[..]);
        }
    }
    if let Some((flags, zeroes)) = p.export_name_reply {
        let b = o.take(10).ok_or_else(|| short("the export name reply"))?;
        prop_assert_eq!(u64::from_be_bytes(b[..8].try_into().unwrap()), SIZE);
        prop_assert_eq!(u16::from_be_bytes([b[8], b[9]]), flags);
        if zeroes {
            prop_assert_eq!(o.take(124).ok_or_else(|| short("the zeroes"))?, &[0u8; 124][..]);
        }
    }
    let mut expected: Vec<ExpectedReply> = p.replies.clone();
    let mut reads = HashMap::new();
    while !expected.is_empty() {
        let magic = o.u32().ok_or_else(|| short("a reply"))?;
        let handle;
        let error;
        let mut data = None;
        if !p.structured {
            prop_assert_eq!(magic, SIMPLE_REPLY_MAGIC);
            error = o.u32().ok_or_else(|| short("a simple reply"))?;
            handle = o.u64().ok_or_else(|| short("a simple reply"))?;
            let e = expected.iter().find(|e| e.handle == handle).ok_or_else(|| fail(format!("reply to {handle}")))?;
            if let (Some(len), 0) = (e.read_len, error) {
                data = Some(o.take(len.into()).ok_or_else(|| short("read data"))?.to_vec());
            }
        } else {
            prop_assert_eq!(magic, STRUCTURED_REPLY_MAGIC);
            let (flags, kind) = (o.u16().ok_or_else(|| short("a chunk"))?, o.u16().ok_or_else(|| short("a chunk"))?);
            handle = o.u64().ok_or_else(|| short("a chunk"))?;
            let len = o.u32().ok_or_else(|| short("a chunk"))?;
            let payload = o.take(len.into()).ok_or_else(|| short("a chunk payload"))?;
            prop_assert_eq!(flags, REPLY_FLAG_DONE, "every reply is one chunk");
            let e = expected.iter().find(|e| e.handle == handle).ok_or_else(|| fail(format!("reply to {handle}")))?;
            match kind {
                REPLY_TYPE_NONE => {
                    prop_assert_eq!(len, 0);
                    prop_assert!(matches!(e.read_len, None | Some(0)), "a read answered without data");
                    error = 0;
                }
                REPLY_TYPE_OFFSET_DATA => {
                    prop_assert!(len >= 9);
                    prop_assert_eq!(u64::from_be_bytes(payload[..8].try_into().unwrap()), e.offset);
                    data = Some(payload[8..].to_vec());
                    error = 0;
                }
                REPLY_TYPE_ERROR => {
                    let (err, _msg) =
                        decode_error_chunk(payload).ok_or_else(|| fail("malformed error chunk".into()))?;
                    prop_assert!(6 + _msg.len() as u32 <= len);
                    error = err;
                }
                other => return Err(fail(format!("chunk type {other}"))),
            }
        }
        let i = expected
            .iter()
            .position(|e| e.handle == handle && e.error == error)
            .ok_or_else(|| fail(format!("reply to {handle} with error {error}, expected {expected:?}")))?;
        let e = expected.remove(i);
        if let Some(len) = e.read_len {
            let d = data.unwrap_or_default();
            prop_assert_eq!(d.len() as u64, u64::from(len));
            reads.insert(handle, d);
        }
    }
    prop_assert!(o.pos == out.len(), "{} unexpected bytes after the last reply", out.len() - o.pos);
    Ok(reads)
}

fn apply(data: &mut [u8], cmd: &ExportCommand) {
    match cmd {
        ExportCommand::Write { offset, data: d, .. } => {
            data[*offset as usize..*offset as usize + d.len()].copy_from_slice(d)
        }
        ExportCommand::Trim { offset, len, .. } | ExportCommand::WriteZeroes { offset, len, .. } => {
            data[*offset as usize..*offset as usize + *len as usize].fill(0)
        }
        _ => {}
    }
}

struct Target {
    export: Arc<MemExport>,
    server: Server,
    healthy: TestClient<UnixStream>,
    healthy_thread: thread::JoinHandle<()>,
}

impl Target {
    fn new(read_only: bool) -> Target {
        let initial: Vec<u8> = (0..SIZE).map(|i| (i * 7 + i / 251) as u8).collect();
        let export = MemExport::builder(SIZE as usize)
            .data(initial)
            .read_only(read_only)
            // One of the two targets answers reads as spliced replies, so that both ways a
            // read's data reaches the socket are fuzzed.
            .spliced_reads(!read_only)
            .record_history(true)
            .max_delay(Duration::from_micros(300))
            .build();
        let config = ServerConfig {
            export_name: NAME.into(),
            description: Some(DESCRIPTION.into()),
            max_payload: MAX_PAYLOAD,
            ..ServerConfig::default()
        };
        let server = Server::new(export.clone(), config);
        let (client, server_end) = UnixStream::pair().unwrap();
        client.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let s = server.clone();
        let healthy_thread = thread::spawn(move || {
            s.serve_connection(server_end, "healthy".into()).unwrap();
        });
        let mut healthy = TestClient::start_default(client).unwrap();
        if !read_only {
            healthy.negotiate_structured().unwrap();
        }
        healthy.go(NAME, &[INFO_BLOCK_SIZE]).unwrap();
        Target { export, server, healthy, healthy_thread }
    }

    /// Reads the whole export through the healthy connection.
    fn read_all(&mut self) -> Result<Vec<u8>, TestCaseError> {
        let mut all = Vec::new();
        for chunk in 0..SIZE / u64::from(MAX_PAYLOAD) {
            let r = self
                .healthy
                .read(chunk * u64::from(MAX_PAYLOAD), MAX_PAYLOAD)
                .map_err(|e| fail(format!("healthy connection: {e}")))?;
            prop_assert_eq!(r.error, 0);
            all.extend_from_slice(&r.data);
        }
        Ok(all)
    }

    fn run(&mut self, case: &Case) -> Result<(), TestCaseError> {
        let before = self.export.contents();
        let prediction = predict(&case.bytes, self.export_read_only());
        let (client, server_end) = UnixStream::pair().unwrap();
        client.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let s = self.server.clone();
        let serving = thread::spawn(move || s.serve_connection(server_end, "fuzz".into()));
        let mut writer = client.try_clone().unwrap();
        let bytes = case.bytes.clone();
        let sending = thread::spawn(move || {
            // The server may close before taking everything; that is not an error here.
            let _ = writer.write_all(&bytes);
            let _ = writer.shutdown(Shutdown::Write);
        });
        let mut out = Vec::new();
        let mut reader = &client;
        let read = reader.read_to_end(&mut out);
        sending.join().unwrap();
        let stats = serving.join().map_err(|_| fail("the connection thread panicked".into()))?;
        stats.map_err(|e| fail(format!("serve_connection failed: {e}")))?;
        match read {
            Ok(_) => {}
            // A reset can only come after the server closed with input unread; what it sent
            // before is still what was received.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => return Err(fail(format!("reading the server's output: {e}"))),
        }
        let reads = check_output(&out, &prediction)?;

        // The export saw exactly the mutations the reference accepted (in any order).
        let history = self.export.take_history();
        let mut mutations: Vec<ExportCommand> = history
            .iter()
            .filter(|c| !matches!(c, ExportCommand::Read { .. } | ExportCommand::Flush | ExportCommand::Cache { .. }))
            .cloned()
            .collect();
        prop_assert_eq!(mutations.len(), prediction.mutations.len(), "{:?} vs {:?}", mutations, prediction.mutations);
        for m in &prediction.mutations {
            let i = mutations.iter().position(|x| x == m).ok_or_else(|| fail(format!("missing mutation {m:?}")))?;
            mutations.remove(i);
        }
        let mut expected = before.clone();
        for cmd in &history {
            apply(&mut expected, cmd);
        }
        let after = self.export.contents();
        prop_assert!(after == expected, "export contents changed other than by the accepted writes");
        if prediction.mutations.is_empty() {
            prop_assert!(after == before);
            for r in &prediction.replies {
                if let (Some(len), Some(d)) = (r.read_len, reads.get(&r.handle)) {
                    prop_assert_eq!(&d[..], &before[r.offset as usize..r.offset as usize + len as usize]);
                }
            }
        }
        // The healthy connection still works and sees the same data.
        let seen = self.read_all()?;
        prop_assert!(seen == after, "the healthy connection reads different data");
        Ok(())
    }

    fn export_read_only(&self) -> bool {
        uraid_nbd::Export::read_only(&*self.export)
    }

    fn finish(self) {
        assert!(self.healthy.disconnect().unwrap().is_empty());
        self.healthy_thread.join().unwrap();
    }
}

#[test]
fn fuzz_handshake_and_requests() {
    // The runner takes an `Fn`, so the targets' mutable state goes through RefCell.
    let targets = [RefCell::new(Target::new(false)), RefCell::new(Target::new(true))];
    let cases = std::env::var("NBD_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(400);
    let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    let result = runner.run(&arb_case(), |case| targets[case.read_only as usize].borrow_mut().run(&case));
    if let Err(e) = result {
        panic!("{e}");
    }
    for t in targets {
        t.into_inner().finish();
    }
}

#[test]
fn reference_interpreter_sanity() {
    // A plain valid session: the reference must predict replies for it, or the fuzz test would
    // only ever exercise early exits.
    let mut b = FLAG_C_FIXED_NEWSTYLE.to_be_bytes().to_vec();
    encode_option(&GenOption::Structured { data: false }, &mut b);
    encode_option(&GenOption::Info { go: true, name: NAME, infos: vec![INFO_NAME], garbage: None }, &mut b);
    encode_request(&GenRequest { kind: CMD_WRITE, flags: 0, handle: 1, offset: 0, len: 512, seed: 1 }, &mut b);
    encode_request(&GenRequest { kind: CMD_READ, flags: CMD_FLAG_DF, handle: 2, offset: 0, len: 512, seed: 0 }, &mut b);
    encode_request(&GenRequest { kind: CMD_READ, flags: 0, handle: 3, offset: SIZE, len: 1, seed: 0 }, &mut b);
    let p = predict(&b, false);
    let types: Vec<u32> = p.options.iter().map(|o| o.reply_type).collect();
    assert_eq!(types, [REP_ACK, REP_INFO, REP_INFO, REP_INFO, REP_ACK]);
    assert!(p.structured);
    assert_eq!(p.replies.iter().map(|r| (r.handle, r.error)).collect::<Vec<_>>(), [(1, 0), (2, 0), (3, EINVAL)]);
    assert_eq!(p.mutations.len(), 1);
    let mut t = Target::new(false);
    t.run(&Case { read_only: false, bytes: b }).unwrap();
    t.finish();
}
