//! The server end to end over real Unix (and one TCP loopback) sockets, driven by the test client.

mod common;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use uraid_nbd::proto::*;
use uraid_nbd::testing::{MemExport, TestClient};
use uraid_nbd::{EndReason, Errno, ExportCommand, ListenAddr, Server, ServerConfig};

const SIZE: usize = 1 << 20;

fn rw_export() -> std::sync::Arc<MemExport> {
    MemExport::builder(SIZE).data(pattern(SIZE, 0)).build()
}

fn read_to_eof(s: &mut UnixStream) -> Vec<u8> {
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    rest
}

#[test]
fn greeting_offers_fixed_newstyle_and_no_zeroes() {
    let srv = start(rw_export(), config());
    let c = srv.client();
    assert_eq!(c.handshake_flags, FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES);
}

#[test]
fn client_flags_are_checked() {
    let srv = start(rw_export(), config());
    // Unknown bit, and the old non-fixed newstyle: both closed right after the flags.
    for flags in [FLAG_C_FIXED_NEWSTYLE | 1 << 5, FLAG_C_NO_ZEROES, 0] {
        let mut c = TestClient::start(srv.connect(), flags).unwrap();
        assert!(read_to_eof(c.stream()).is_empty(), "flags {flags:#x}");
    }
}

#[test]
fn list_names_the_export() {
    let srv = start(rw_export(), config());
    let mut c = srv.client();
    let replies = c.option(OPT_LIST, &[]).unwrap();
    assert_eq!(replies.len(), 2);
    assert_eq!(replies[0].reply_type, REP_SERVER);
    assert_eq!(replies[0].data, rep_server(EXPORT_NAME, Some("test array")));
    assert_eq!(replies[1].reply_type, REP_ACK);
    let replies = c.option(OPT_LIST, b"x").unwrap();
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].reply_type, REP_ERR_INVALID);
    // Still in step: the handshake can go on.
    c.go(EXPORT_NAME, &[]).unwrap();
}

#[test]
fn info_reports_export_name_description_and_block_sizes() {
    let srv = start(rw_export(), config());
    let mut c = srv.client();
    let replies = c.info_or_go(OPT_INFO, EXPORT_NAME, &[INFO_NAME, INFO_DESCRIPTION, INFO_BLOCK_SIZE]).unwrap();
    let types: Vec<u32> = replies.iter().map(|r| r.reply_type).collect();
    assert_eq!(types, [REP_INFO, REP_INFO, REP_INFO, REP_INFO, REP_ACK]);
    let flags = FLAG_HAS_FLAGS
        | FLAG_SEND_FLUSH
        | FLAG_SEND_FUA
        | FLAG_SEND_TRIM
        | FLAG_SEND_WRITE_ZEROES
        | FLAG_SEND_CACHE
        | FLAG_CAN_MULTI_CONN;
    assert_eq!(replies[0].data, info_export(SIZE as u64, flags));
    assert_eq!(replies[1].data, info_string(INFO_NAME, EXPORT_NAME));
    assert_eq!(replies[2].data, info_string(INFO_DESCRIPTION, "test array"));
    assert_eq!(replies[3].data, info_block_size(1, 4096, 32 << 20));
    assert_eq!((c.size, c.transmission_flags), (SIZE as u64, flags));

    // Not asked for: only the export and the block sizes.
    let replies = c.info_or_go(OPT_INFO, "", &[]).unwrap();
    assert_eq!(replies.len(), 3);
    assert_eq!(replies[1].data, info_block_size(1, 4096, 32 << 20));

    let unknown = c.info_or_go(OPT_INFO, "nope", &[]).unwrap();
    assert_eq!(unknown.len(), 1);
    assert_eq!(unknown[0].reply_type, REP_ERR_UNKNOWN);
    for malformed in [&[0u8, 0, 0][..], &[0, 0, 0, 9, 0, 0], &[0, 0, 0, 0, 0, 2, 0, 1], &[0, 0, 0, 0, 0, 0, 7]] {
        let r = c.option(OPT_INFO, malformed).unwrap();
        assert_eq!(r.len(), 1, "{malformed:?}");
        assert_eq!(r[0].reply_type, REP_ERR_INVALID, "{malformed:?}");
    }
    // After all that, GO with the default name enters transmission.
    c.go("", &[INFO_BLOCK_SIZE]).unwrap();
    assert_eq!(c.read(0, 512).unwrap().data, pattern(SIZE, 0)[..512]);
}

#[test]
fn unsupported_and_malformed_options_are_answered_and_skipped() {
    let srv = start(rw_export(), config());
    let mut c = srv.client();
    for (option, data, expected) in [
        (OPT_STARTTLS, &[][..], REP_ERR_UNSUP),
        (OPT_LIST_META_CONTEXT, &[0, 0, 0, 0, 0, 0, 0, 0][..], REP_ERR_UNSUP),
        (OPT_SET_META_CONTEXT, &[0, 0, 0, 0, 0, 0, 0, 0][..], REP_ERR_UNSUP),
        (OPT_EXTENDED_HEADERS, &[][..], REP_ERR_UNSUP),
        (OPT_PEEK_EXPORT, &[][..], REP_ERR_UNSUP),
        (0xdead_beef, &[1, 2, 3][..], REP_ERR_UNSUP),
        (OPT_STRUCTURED_REPLY, &[1][..], REP_ERR_INVALID),
    ] {
        let r = c.option(option, data).unwrap();
        assert_eq!((r.len(), r[0].reply_type), (1, expected), "{}", option_name(option));
        assert!(!r[0].data.is_empty(), "error replies carry a message");
    }
    // Too big to read: skipped with TOO_BIG, and the stream stays in step.
    let big = vec![7u8; uraid_nbd::MAX_OPTION_DATA + 1];
    let r = c.option(OPT_GO, &big).unwrap();
    assert_eq!(r[0].reply_type, REP_ERR_TOO_BIG);
    c.negotiate_structured().unwrap();
    c.go(EXPORT_NAME, &[]).unwrap();
    assert!(c.transmission_flags & FLAG_SEND_DF != 0);
}

#[test]
fn abort_is_acknowledged_then_closed() {
    let srv = start(rw_export(), config());
    let mut c = srv.client();
    let r = c.option(OPT_ABORT, b"ignored data").unwrap();
    assert_eq!(r[0].reply_type, REP_ACK);
    assert!(read_to_eof(c.stream()).is_empty());
}

#[test]
fn export_name_enters_transmission_with_or_without_zeroes() {
    let srv = start(rw_export(), config());
    for flags in [FLAG_C_FIXED_NEWSTYLE, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES] {
        let mut c = TestClient::start(srv.connect(), flags).unwrap();
        c.export_name(EXPORT_NAME).unwrap();
        assert_eq!(c.size, SIZE as u64);
        assert_eq!(c.write(4096, &[9; 512], 0).unwrap().error, 0);
        assert_eq!(c.read(4096, 512).unwrap().data, [9; 512]);
        assert!(c.disconnect().unwrap().is_empty());
    }
    // An unknown name can only be answered by closing.
    let mut c = srv.client();
    c.send_option(OPT_EXPORT_NAME, b"other").unwrap();
    assert!(read_to_eof(c.stream()).is_empty());
}

#[test]
fn simple_and_structured_replies() {
    for spliced in [false, true] {
        simple_and_structured_replies_with(
            MemExport::builder(SIZE).data(pattern(SIZE, 0)).spliced_reads(spliced).build(),
        );
    }
}

fn simple_and_structured_replies_with(export: std::sync::Arc<MemExport>) {
    let srv = start(export, config());
    let data = pattern(8192, 5);
    for structured in [false, true] {
        let mut c = srv.go(structured);
        assert_eq!(c.transmission_flags & FLAG_SEND_DF != 0, structured);
        let w = c.write(65536, &data, CMD_FLAG_FUA).unwrap();
        assert_eq!((w.error, w.chunks), (0, structured as usize));
        let r = c.read(65536, 8192).unwrap();
        assert_eq!(r.error, 0);
        assert_eq!(r.data, data);
        // One data chunk carrying DONE.
        assert_eq!(r.chunks, structured as usize);
        if structured {
            let df = c.request(CMD_FLAG_DF, CMD_READ, 65536, 8192, &[]).unwrap();
            assert_eq!((df.error, df.chunks, &df.data), (0, 1, &data));
        }
        for (kind, flags) in
            [(CMD_FLUSH, 0), (CMD_CACHE, 0), (CMD_TRIM, CMD_FLAG_FUA), (CMD_WRITE_ZEROES, CMD_FLAG_NO_HOLE)]
        {
            let r = c.request(flags, kind, 65536, 4096, &[]).unwrap();
            assert_eq!(r.error, 0, "{}", command_name(kind));
        }
        assert_eq!(c.read(65536, 4096).unwrap().data, [0; 4096]);
        // An error: structured replies explain it, simple ones only carry the code.
        let e = c.read(SIZE as u64, 1).unwrap();
        assert_eq!(e.error, Errno::Inval.code());
        assert_eq!(e.message.is_some(), structured);
        assert!(e.data.is_empty());
        assert!(c.disconnect().unwrap().is_empty());
    }
}

#[test]
fn commands_reach_the_export_with_their_flags() {
    let export = MemExport::builder(SIZE).record_history(true).build();
    let srv = start(export.clone(), config());
    let mut c = srv.go(true);
    c.write(0, &[1; 512], CMD_FLAG_FUA).unwrap();
    c.write(512, &[2; 512], 0).unwrap();
    c.request(0, CMD_WRITE_ZEROES, 1024, 512, &[]).unwrap();
    c.request(CMD_FLAG_NO_HOLE | CMD_FLAG_FUA, CMD_WRITE_ZEROES, 1536, 512, &[]).unwrap();
    c.request(CMD_FLAG_FUA, CMD_TRIM, 2048, 512, &[]).unwrap();
    c.request(CMD_FLAG_FUA, CMD_FLUSH, 0, 0, &[]).unwrap();
    c.request(0, CMD_CACHE, 0, 4096, &[]).unwrap();
    c.request(CMD_FLAG_FUA | CMD_FLAG_DF, CMD_READ, 0, 512, &[]).unwrap();
    assert_eq!(
        export.take_history(),
        [
            ExportCommand::Write { offset: 0, data: (vec![1; 512]).into(), fua: true },
            ExportCommand::Write { offset: 512, data: (vec![2; 512]).into(), fua: false },
            ExportCommand::WriteZeroes { offset: 1024, len: 512, may_trim: true, fua: false },
            ExportCommand::WriteZeroes { offset: 1536, len: 512, may_trim: false, fua: true },
            ExportCommand::Trim { offset: 2048, len: 512, fua: true },
            ExportCommand::Flush,
            ExportCommand::Cache { offset: 0, len: 4096 },
            ExportCommand::Read { offset: 0, len: 512 },
        ]
    );
}

#[test]
fn many_requests_in_flight_complete_out_of_order() {
    for spliced in [false, true] {
        let export = MemExport::builder(SIZE).max_delay(Duration::from_millis(5)).spliced_reads(spliced).build();
        many_requests_in_flight_complete_out_of_order_with(export);
    }
}

fn many_requests_in_flight_complete_out_of_order_with(export: std::sync::Arc<MemExport>) {
    let srv = start(export.clone(), config());
    for structured in [false, true] {
        let mut c = srv.go(structured);
        let n = 200u64;
        let mut sent = Vec::new();
        for i in 0..n {
            let block = pattern(4096, i as u8 + structured as u8);
            sent.push(c.send_request(0, CMD_WRITE, i * 4096, 4096, &block).unwrap());
        }
        let mut order = Vec::new();
        for _ in 0..n {
            let r = c.recv().unwrap();
            assert_eq!(r.error, 0);
            order.push(r.handle);
        }
        assert_eq!(order.iter().collect::<HashSet<_>>(), sent.iter().collect::<HashSet<_>>());
        assert_ne!(order, sent, "completions should not come back in submission order");
        // Reads pipelined the same way return each block's own data.
        let handles: Vec<u64> = (0..n).map(|i| c.send_request(0, CMD_READ, i * 4096, 4096, &[]).unwrap()).collect();
        for _ in 0..n {
            let r = c.recv().unwrap();
            let i = handles.iter().position(|&h| h == r.handle).unwrap();
            assert_eq!(r.data, pattern(4096, i as u8 + structured as u8), "block {i}");
        }
        assert!(c.disconnect().unwrap().is_empty());
    }
    assert!(export.max_pending() > 10, "only {} requests were ever in flight together", export.max_pending());
}

#[test]
fn several_connections_share_the_export() {
    let srv = start(MemExport::builder(SIZE).build(), config());
    let clients: Vec<_> = (0..4).map(|i| (i, srv.go(i % 2 == 0))).collect();
    assert!(wait_for(Duration::from_secs(5), || srv.server.active_connections() == 4));
    let threads: Vec<_> = clients
        .into_iter()
        .map(|(i, mut c)| {
            thread::spawn(move || {
                let base = i as u64 * 65536;
                for round in 0..16u8 {
                    let data = pattern(4096, round ^ i as u8);
                    assert_eq!(c.write(base + round as u64 * 4096, &data, 0).unwrap().error, 0);
                    assert_eq!(c.read(base + round as u64 * 4096, 4096).unwrap().data, data);
                }
                assert!(c.disconnect().unwrap().is_empty());
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Each client wrote through its own connection; a fresh one sees it all.
    let mut c = srv.go(false);
    for i in 0..4u64 {
        assert_eq!(c.read(i * 65536 + 4096, 4096).unwrap().data, pattern(4096, 1 ^ i as u8));
    }
    drop(c);
    assert!(wait_for(Duration::from_secs(5), || srv.server.active_connections() == 0));
}

#[test]
fn disc_answers_everything_in_flight_before_closing() {
    let export = MemExport::builder(SIZE).max_delay(Duration::from_millis(20)).build();
    let srv = start(export.clone(), config());
    let mut c = srv.go(true);
    let mut handles = HashSet::new();
    for i in 0..50u64 {
        handles.insert(c.send_request(0, CMD_WRITE, i * 512, 512, &[i as u8; 512]).unwrap());
        handles.insert(c.send_request(0, CMD_READ, 100_000 + i * 512, 512, &[]).unwrap());
    }
    c.send_with_handle(RequestHeader { flags: 0, kind: CMD_DISC, handle: 999, offset: 0, len: 0 }, &[]).unwrap();
    for _ in 0..100 {
        assert!(handles.remove(&c.recv().unwrap().handle));
    }
    assert!(read_to_eof(c.stream()).is_empty());
    assert_eq!(export.contents()[49 * 512..50 * 512], [49; 512]);
}

#[test]
fn read_only_exports_refuse_writes_with_eperm() {
    let export = MemExport::builder(SIZE).data(pattern(SIZE, 3)).read_only(true).build();
    let srv = start(export.clone(), config());
    for structured in [false, true] {
        let mut c = srv.go(structured);
        let flags = c.transmission_flags;
        assert!(flags & FLAG_READ_ONLY != 0);
        assert_eq!(flags & (FLAG_SEND_TRIM | FLAG_SEND_WRITE_ZEROES), 0);
        // The refused write's payload is consumed: the next request parses normally.
        assert_eq!(c.write(0, &[0xee; 4096], 0).unwrap().error, Errno::Perm.code());
        assert_eq!(c.request(0, CMD_TRIM, 0, 4096, &[]).unwrap().error, Errno::Perm.code());
        assert_eq!(c.request(0, CMD_WRITE_ZEROES, 0, 4096, &[]).unwrap().error, Errno::Perm.code());
        assert_eq!(c.read(0, 4096).unwrap().data, pattern(SIZE, 3)[..4096]);
        assert_eq!(c.request(0, CMD_FLUSH, 0, 0, &[]).unwrap().error, 0);
        assert_eq!(c.request(0, CMD_CACHE, 0, 4096, &[]).unwrap().error, 0);
    }
    assert_eq!(export.contents(), pattern(SIZE, 3));
}

#[test]
fn requests_past_the_end_are_refused() {
    let export = rw_export();
    let srv = start(export.clone(), config());
    let end = SIZE as u64;
    for structured in [false, true] {
        let mut c = srv.go(structured);
        let cases = [
            (CMD_READ, end - 511, 512, Errno::Inval),
            (CMD_READ, u64::MAX - 10, 512, Errno::Inval),
            (CMD_TRIM, end, 1, Errno::Inval),
            (CMD_CACHE, end - 1, 2, Errno::Inval),
            (CMD_WRITE_ZEROES, end - 4096, 8192, Errno::NoSpc),
            (CMD_WRITE_ZEROES, u64::MAX, 1, Errno::NoSpc),
        ];
        for (kind, offset, len, errno) in cases {
            let r = c.request(0, kind, offset, len, &[]).unwrap();
            assert_eq!(r.error, errno.code(), "{} at {offset}", command_name(kind));
        }
        let r = c.write(end - 100, &[1; 512], 0).unwrap();
        assert_eq!(r.error, Errno::NoSpc.code());
        // Right up to the end is fine.
        assert_eq!(c.write(end - 512, &[1; 512], 0).unwrap().error, 0);
        assert_eq!(c.read(end - 512, 512).unwrap().data, [1; 512]);
    }
    assert_eq!(export.contents()[..SIZE - 512], pattern(SIZE, 0)[..SIZE - 512]);
}

#[test]
fn overlong_lengths() {
    let cfg = ServerConfig { max_payload: 64 << 10, ..config() };
    let srv = start(rw_export(), cfg);
    for structured in [false, true] {
        let mut c = srv.go(structured);
        let r = c.read(0, (64 << 10) + 1).unwrap();
        assert_eq!(r.error, Errno::Inval.code());
        assert!(r.data.is_empty());
        // Too long for max_payload but short enough to skip: refused, payload discarded.
        let big = vec![0x55; 1 << 20];
        assert_eq!(c.write(0, &big, 0).unwrap().error, Errno::Inval.code());
        // Trim, write-zeroes and cache carry no payload and are not held to the limit.
        assert_eq!(c.request(0, CMD_WRITE_ZEROES, 0, 1 << 20, &[]).unwrap().error, 0);
        assert_eq!(c.read(0, 64 << 10).unwrap().data, vec![0; 64 << 10]);
    }
    // A write announcing more than 32 MiB of data is not worth reading to skip: hard disconnect.
    let mut c = srv.go(true);
    c.send_request(0, CMD_WRITE, 0, (32 << 20) + 1, &[]).unwrap();
    assert!(read_to_eof(c.stream()).is_empty());
}

#[test]
fn unknown_commands_and_flags_get_einval() {
    let srv = start(rw_export(), config());
    for structured in [false, true] {
        let mut c = srv.go(structured);
        for (flags, kind) in [
            (0, 99),
            (0, CMD_BLOCK_STATUS),
            (0, CMD_RESIZE),
            (CMD_FLAG_FAST_ZERO, CMD_WRITE_ZEROES),
            (1 << 12, CMD_READ),
            (CMD_FLAG_NO_HOLE, CMD_TRIM),
            (CMD_FLAG_REQ_ONE, CMD_CACHE),
        ] {
            let r = c.request(flags, kind, 0, 512, &[]).unwrap();
            assert_eq!(r.error, Errno::Inval.code(), "{} flags {flags:#x}", command_name(kind));
        }
        let df = c.request(CMD_FLAG_DF, CMD_READ, 0, 512, &[]).unwrap();
        assert_eq!(df.error, if structured { 0 } else { Errno::Inval.code() });
        // A write with bad flags still has its payload skipped.
        assert_eq!(c.request(CMD_FLAG_DF, CMD_WRITE, 0, 512, &[0; 512]).unwrap().error, Errno::Inval.code());
        assert_eq!(c.read(0, 512).unwrap().error, 0);
    }
}

#[test]
fn zero_length_requests_succeed_without_reaching_the_export() {
    let export = rw_export();
    let srv = start(export.clone(), config());
    for structured in [false, true] {
        let mut c = srv.go(structured);
        let before = export.submitted();
        for kind in [CMD_READ, CMD_WRITE, CMD_TRIM, CMD_WRITE_ZEROES, CMD_CACHE] {
            let r = c.request(0, kind, SIZE as u64, 0, &[]).unwrap();
            assert_eq!((r.error, r.data.len()), (0, 0), "{}", command_name(kind));
        }
        assert_eq!(export.submitted(), before);
    }
}

#[test]
fn a_broken_connection_does_not_disturb_others() {
    let srv = start(rw_export(), config());
    let mut healthy = srv.go(true);
    let mut bad = srv.go(false);
    assert_eq!(bad.read(0, 512).unwrap().error, 0);
    bad.stream().write_all(&[0xff; 28]).unwrap();
    assert!(read_to_eof(bad.stream()).is_empty());
    // Mid-request disconnect: header of a write, half its data, then gone.
    let mut gone = srv.go(false);
    gone.send_request(0, CMD_WRITE, 0, 4096, &[1; 100]).unwrap();
    drop(gone);
    assert_eq!(healthy.read(0, 4096).unwrap().data, pattern(SIZE, 0)[..4096]);
    assert!(healthy.disconnect().unwrap().is_empty());
}

#[test]
fn export_errors_reach_the_client() {
    let export = rw_export();
    let srv = start(export.clone(), config());
    export.fail_range(Some((8192, 8193)));
    export.drop_range(Some((16384, 16385)));
    for structured in [false, true] {
        let mut c = srv.go(structured);
        let r = c.read(8192, 512).unwrap();
        assert_eq!(r.error, Errno::Io.code());
        assert!(r.data.is_empty());
        if structured {
            assert!(r.message.unwrap().contains("injected failure"));
        }
        assert_eq!(c.write(8000, &[0; 512], 0).unwrap().error, Errno::Io.code());
        // A completion the export forgets to call still gets an answer.
        let r = c.read(16384, 512).unwrap();
        assert_eq!(r.error, Errno::Io.code());
        assert_eq!(c.read(0, 512).unwrap().error, 0);
    }
}

#[test]
fn block_size_and_multi_conn_follow_the_export() {
    let export = MemExport::builder(SIZE).preferred_block_size(1000).multi_conn(false).build();
    let srv = start(export, ServerConfig { max_payload: 100, ..config() });
    let mut c = srv.client();
    let replies = c.info_or_go(OPT_GO, EXPORT_NAME, &[INFO_BLOCK_SIZE]).unwrap();
    // 1000 is not a power of two: advertised as 1024; max_payload is raised to match it.
    assert!(replies.iter().any(|r| r.data == info_block_size(1, 1024, 1024)));
    assert_eq!(c.transmission_flags & FLAG_CAN_MULTI_CONN, 0);
}

/// A device that changes shape while served (a takeover to another level) gives later
/// connections its new preferred block size, kept within the maximum payload.
#[test]
fn each_connection_is_told_the_block_size_of_its_moment() {
    let export = MemExport::builder(SIZE).preferred_block_size(4096).build();
    let srv = start(std::sync::Arc::clone(&export), ServerConfig { max_payload: 1 << 20, ..config() });
    let told = |c: &mut TestClient<_>| c.info_or_go(OPT_GO, EXPORT_NAME, &[INFO_BLOCK_SIZE]).unwrap();
    let mut before = srv.client();
    assert!(told(&mut before).iter().any(|r| r.data == info_block_size(1, 4096, 1 << 20)));
    export.set_preferred_block_size(65536);
    let mut after = srv.client();
    assert!(told(&mut after).iter().any(|r| r.data == info_block_size(1, 65536, 1 << 20)));
    // Above the maximum payload: lowered to the largest power of two within it.
    export.set_preferred_block_size(4 << 20);
    let mut larger = srv.client();
    assert!(told(&mut larger).iter().any(|r| r.data == info_block_size(1, 1 << 20, 1 << 20)));
}

#[test]
fn serve_connection_reports_what_happened() {
    for spliced in [false, true] {
        let server = Server::new(MemExport::builder(SIZE).spliced_reads(spliced).build(), config());
        let (client_end, server_end) = UnixStream::pair().unwrap();
        let s = server.clone();
        let t = thread::spawn(move || s.serve_connection(server_end, "pair".into()).unwrap());
        let mut c = TestClient::start_default(client_end).unwrap();
        c.negotiate_structured().unwrap();
        c.go(EXPORT_NAME, &[]).unwrap();
        c.write(0, &[1; 1000], 0).unwrap();
        c.read(0, 300).unwrap();
        c.read(SIZE as u64, 1).unwrap();
        assert!(c.disconnect().unwrap().is_empty());
        let stats = t.join().unwrap();
        assert_eq!(stats.reason, EndReason::Disconnect);
        assert_eq!((stats.requests, stats.bytes_read, stats.bytes_written), (3, 300, 1000), "spliced reads: {spliced}");
        assert_eq!(stats.export.as_deref(), Some(EXPORT_NAME));
        assert!(stats.structured_replies);
    }
    let server = Server::new(rw_export(), config());

    // A protocol error says what was wrong.
    let (client_end, server_end) = UnixStream::pair().unwrap();
    let s = server.clone();
    let t = thread::spawn(move || s.serve_connection(server_end, "pair".into()).unwrap());
    let mut c = TestClient::start_default(client_end).unwrap();
    c.stream().write_all(b"NOTMAGIC\0\0\0\x01\0\0\0\0").unwrap();
    let stats = t.join().unwrap();
    assert!(matches!(&stats.reason, EndReason::ProtocolError(m) if m.contains("magic")), "{:?}", stats.reason);
    assert_eq!(stats.export, None);
}

#[test]
fn stop_answers_requests_in_flight_then_closes_and_cleans_up() {
    let export = rw_export();
    let mut srv = start(export.clone(), config());
    let mut c = srv.go(true);
    let mut idle = srv.client(); // still in the handshake
    export.hold();
    let mut handles = HashSet::new();
    for i in 0..20u64 {
        handles.insert(c.send_request(0, CMD_WRITE, i * 4096, 4096, &[7; 4096]).unwrap());
        handles.insert(c.send_request(0, CMD_READ, i * 4096 + 100_000, 4096, &[]).unwrap());
    }
    assert!(wait_for(Duration::from_secs(5), || export.pending() == 40));
    srv.server.stop();
    // The handshake-phase client is closed at once.
    assert!(read_to_eof(idle.stream()).is_empty());
    // The run loop waits for the held requests.
    thread::sleep(Duration::from_millis(200));
    assert!(!srv.run_finished());
    assert!(wait_for(Duration::from_secs(5), || srv.server.active_connections() == 1));
    export.release();
    for _ in 0..40 {
        let r = c.recv().unwrap();
        assert_eq!(r.error, 0);
        assert!(handles.remove(&r.handle));
    }
    assert!(read_to_eof(c.stream()).is_empty());
    assert!(srv.wait_run(Duration::from_secs(10)));
    assert!(!srv.path.exists(), "the socket file is removed");
    assert_eq!(srv.server.active_connections(), 0);
    assert_eq!(export.contents()[..4096], [7; 4096]);
    assert!(UnixStream::connect(&srv.path).is_err());
}

#[test]
fn stop_gives_up_on_a_client_that_stops_reading() {
    // Spliced replies block in the export's own call on the socket's descriptor: the shutdown
    // must end that too.
    for spliced in [false, true] {
        let export = MemExport::builder(SIZE).max_delay(Duration::ZERO).spliced_reads(spliced).build();
        let cfg = ServerConfig { stalled_client_timeout: Duration::from_millis(300), ..config() };
        let mut srv = start(export, cfg);
        let mut c = srv.go(false);
        // Far more reply data than the socket buffers hold, never read.
        for _ in 0..64 {
            c.send_request(0, CMD_READ, 0, 1 << 20, &[]).unwrap();
        }
        thread::sleep(Duration::from_millis(200));
        let started = Instant::now();
        srv.server.stop();
        assert!(srv.wait_run(Duration::from_secs(10)), "run() did not return (spliced: {spliced})");
        assert!(started.elapsed() < Duration::from_secs(5), "spliced: {spliced}");
    }
}

#[test]
fn inflight_limits_hold_back_the_reader() {
    let export = rw_export();
    let cfg = ServerConfig { max_inflight_bytes: 8 << 10, max_inflight_requests: 4, ..config() };
    let srv = start(export.clone(), cfg);
    let mut c = srv.go(false);
    export.hold();
    // Small enough in total to sit in the socket buffer while the server holds back.
    let n = 12;
    for i in 0..n {
        c.send_request(0, CMD_WRITE, i * 4096, 4096, &[i as u8; 4096]).unwrap();
    }
    for i in 0..n {
        c.send_request(0, CMD_FLUSH, i, 0, &[]).unwrap();
    }
    thread::sleep(Duration::from_millis(200));
    // 8 KiB of room holds two 4 KiB writes.
    assert_eq!(export.pending(), 2);
    export.release();
    for _ in 0..2 * n {
        assert_eq!(c.recv().unwrap().error, 0);
    }
    assert!(export.max_pending() <= 4);
    assert_eq!(export.contents()[11 * 4096..12 * 4096], [11; 4096]);
}

/// Several connections share the server's room: with 16 KiB for the server and 64 KiB per
/// connection, three connections pipelining 4 KiB writes hold at most four of them in the
/// export at once (and at least one each, so none waits forever on the others).
#[test]
fn the_server_wide_limit_holds_back_every_connection() {
    let export = rw_export();
    let cfg = ServerConfig {
        max_inflight_bytes: 64 << 10,
        max_inflight_requests: 64,
        max_server_inflight_bytes: 16 << 10,
        ..config()
    };
    let srv = start(export.clone(), cfg);
    let mut clients: Vec<_> = (0..3).map(|_| srv.go(false)).collect();
    export.hold();
    let n = 8u64;
    for (k, c) in clients.iter_mut().enumerate() {
        for i in 0..n {
            let at = (k as u64 * n + i) * 4096;
            c.send_request(0, CMD_WRITE, at, 4096, &[(k as u8) << 4 | i as u8; 4096]).unwrap();
        }
    }
    thread::sleep(Duration::from_millis(300));
    // 16 KiB is four writes; a connection with none in flight gets one beyond that.
    let pending = export.pending();
    assert!((4..=6).contains(&pending), "{pending} writes in the export");
    export.release();
    for c in clients.iter_mut() {
        for _ in 0..n {
            assert_eq!(c.recv().unwrap().error, 0);
        }
    }
    assert!(export.max_pending() <= 6, "{}", export.max_pending());
    let contents = export.contents();
    for k in 0..3u64 {
        for i in 0..n {
            let at = ((k * n + i) * 4096) as usize;
            assert!(contents[at..at + 4096].iter().all(|&b| b == ((k as u8) << 4 | i as u8)));
        }
    }
}

/// An export that answers inside `submit`: the reader holds those replies and sends them when it
/// would wait. With room for only 4 requests in flight, it must send them before waiting for
/// room (they are what frees it), or a client that pipelines more than 4 would hang; a lone
/// request must be answered without the client sending anything more.
#[test]
fn replies_completed_inside_submit_are_sent_before_the_reader_waits() {
    let export = MemExport::builder(SIZE).data(pattern(SIZE, 0)).inline(true).build();
    let cfg = ServerConfig { max_inflight_bytes: 8 << 10, max_inflight_requests: 4, ..config() };
    let srv = start(export.clone(), cfg);
    let mut c = srv.go(false);
    c.stream().set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // One request on its own.
    assert_eq!(c.write(0, &[7; 4096], 0).unwrap().error, 0);
    assert_eq!(c.read(0, 4096).unwrap().data, [7; 4096]);
    // 300 writes pipelined, far past the in-flight limit, then all the replies (writes, so the
    // replies fit the socket buffers while the client is not reading).
    let n = 300u64;
    for i in 0..n {
        c.send_request(0, CMD_WRITE, (i % 200) * 4096, 4096, &[i as u8; 4096]).unwrap();
    }
    for _ in 0..n {
        let r = c.recv().expect("a reply (the server held some back?)");
        assert_eq!(r.error, 0);
    }
    assert_eq!(export.completed(), n + 2);
    assert!(c.read(100 * 4096, 4096).unwrap().data == [100u8; 4096], "block 100 holds the write of request 100");
    assert!(export.contents()[199 * 4096..200 * 4096] == [199u8; 4096]);
}

#[test]
fn tcp_loopback() {
    let export = rw_export();
    let listener = ListenAddr::Tcp("127.0.0.1:0".parse().unwrap()).bind().unwrap();
    let addr = match listener.local_addr().unwrap() {
        ListenAddr::Tcp(a) => a,
        other => panic!("{other}"),
    };
    let server = Server::new(export, config());
    let runner = server.clone();
    let run = thread::spawn(move || runner.run(listener));
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut c = TestClient::start_default(s).unwrap();
    c.negotiate_structured().unwrap();
    c.go(EXPORT_NAME, &[]).unwrap();
    assert_eq!(c.write(4096, &[3; 4096], 0).unwrap().error, 0);
    assert_eq!(c.read(4096, 4096).unwrap().data, [3; 4096]);
    // Stop with the connection idle in transmission: it is closed and run() returns.
    server.stop();
    let mut rest = Vec::new();
    c.stream().read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    run.join().unwrap().unwrap();
    assert!(TcpStream::connect(addr).is_err());
}
