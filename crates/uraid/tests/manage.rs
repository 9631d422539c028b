//! Managing arrays as an md user would: `uraid check|repair|resync` on stopped arrays, and
//! `uraid ctl` against a running `uraid serve --control`. Everything goes through the real
//! binary; a pass's result is judged by reading the members back, not by its own word.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Output};
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;
use uraid_testkit::sha256_hex;

mod common;
use common::serve::Serve;
use common::{ok, text, uraid_stdin, with};

fn uraid(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_uraid")).args(args).output().expect("run uraid")
}

/// A raid5 over four 8 MiB files, filled with data.
fn filled_raid5(dir: &Path) -> Vec<String> {
    let members = empty_raid5(dir, 8 << 20, false);
    let data: Vec<u8> = (0..20u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let o = uraid_stdin(&with(&["write", "--offset=0"], &members), &data);
    assert!(o.status.success(), "{}", text(&o));
    members
}

fn detail(members: &[String]) -> Value {
    serde_json::from_slice(&ok(&with(&["detail", "--json"], members)).stdout).unwrap()
}

/// Flip a byte of member `i`, `at` bytes into its data area.
fn corrupt(members: &[String], i: usize, at: u64) {
    let exam: Value = serde_json::from_slice(&ok(&["examine", "--json", &members[i]]).stdout).unwrap();
    let pos = exam[0]["data_offset_sectors"].as_u64().unwrap() * 512 + at;
    let mut bytes = std::fs::read(&members[i]).unwrap();
    bytes[pos as usize] ^= 0x77;
    std::fs::write(&members[i], bytes).unwrap();
}

fn hashes(paths: &[String]) -> Vec<String> {
    paths.iter().map(|p| sha256_hex(&std::fs::read(p).unwrap())).collect()
}

fn mismatch_cnt(o: &Output) -> u64 {
    let out = String::from_utf8_lossy(&o.stdout);
    out.lines()
        .find_map(|l| l.strip_prefix("mismatch_cnt "))
        .unwrap_or_else(|| panic!("no mismatch_cnt line\n{}", text(o)))
        .trim()
        .parse()
        .unwrap()
}

/// check counts a corrupted row and changes nothing; repair rewrites it; the next check is clean.
#[test]
fn offline_check_and_repair() {
    let tmp = tempfile::tempdir().unwrap();
    let members = filled_raid5(tmp.path());
    assert_eq!(mismatch_cnt(&ok(&with(&["check"], &members))), 0);
    corrupt(&members, 1, 123_456);
    let before = hashes(&members);
    assert_eq!(mismatch_cnt(&ok(&with(&["check"], &members))), 8);
    assert_eq!(hashes(&members), before, "check changed a member");
    assert_eq!(mismatch_cnt(&ok(&with(&["repair"], &members))), 8);
    assert_eq!(mismatch_cnt(&ok(&with(&["check"], &members))), 0);
    assert_eq!(detail(&members)["clean"], Value::Bool(true));
    // Where md cannot check, uraid refuses and changes nothing.
    let three = members[..3].to_vec();
    let before = hashes(&members);
    let o = uraid(&with(&["repair"], &three));
    assert!(!o.status.success() && text(&o).contains("degraded"), "{}", text(&o));
    assert_eq!(hashes(&members), before);
}

/// status shows what /proc/mdstat and md's sysfs show; check + wait report mismatch_cnt; repair
/// fixes; bad requests get a clear error and change nothing.
#[test]
fn ctl_status_check_repair_wait() {
    let tmp = tempfile::tempdir().unwrap();
    let members = filled_raid5(tmp.path());
    corrupt(&members, 2, 1_000_000);
    let serve = Serve::start(tmp.path(), &members, &[]);
    // Whoever can connect can fail members: the control socket is its owner's only.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&serve.control).unwrap().permissions().mode() & 0o777, 0o600);
    let s = serve.status();
    for field in ["level", "state", "degraded", "sync_action", "sync_completed", "mismatch_cnt", "members"] {
        assert!(!s[field].is_null(), "status --json lacks {field}: {s:#}");
    }
    assert_eq!(s["level"], "raid5");
    assert_eq!(s["sync_action"], "idle");
    assert_eq!(s["degraded"], 0);
    let m = &s["members"][1];
    assert_eq!(
        (m["path"].as_str(), m["role"].as_str(), m["state"].as_str()),
        (Some(members[1].as_str()), Some("active 1"), Some("in_sync"))
    );
    let text_status = String::from_utf8_lossy(&serve.ctl(&["status"]).stdout).into_owned();
    assert!(text_status.contains("raid5") && text_status.contains("[4/4] [UUUU]"), "{text_status}");

    assert!(serve.ctl(&["check"]).status.success());
    let waited: Value = serde_json::from_slice(&serve.ctl(&["wait", "--json"]).stdout).unwrap();
    assert_eq!(waited["sync_action"], "idle");
    assert_eq!(waited["mismatch_cnt"], 8, "{waited:#}");
    assert!(serve.ctl(&["repair"]).status.success());
    serve.ctl(&["wait"]);
    assert!(serve.ctl(&["check"]).status.success());
    let after: Value = serde_json::from_slice(&serve.ctl(&["wait", "--json"]).stdout).unwrap();
    assert_eq!(after["mismatch_cnt"], 0, "{after:#}");

    // A raw client with a bad request gets a JSON error, and the socket keeps working.
    let mut raw = UnixStream::connect(&serve.control).unwrap();
    writeln!(raw, "{{\"op\":\"format-everything\"}}").unwrap();
    let mut line = String::new();
    BufReader::new(&raw).read_line(&mut line).unwrap();
    let answer: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(answer["ok"], false);
    assert!(answer["error"].as_str().unwrap().contains("unknown op"));
    writeln!(raw, "not json").unwrap();
    assert_eq!(serve.status()["level"], "raid5");
    serve.stop(libc::SIGTERM);
    assert_eq!(mismatch_cnt(&ok(&with(&["check"], &members))), 0);
}

/// A read-only server refuses repair with a clear error; a control path that is not a socket is
/// never overwritten.
#[test]
fn ctl_refusals() {
    let tmp = tempfile::tempdir().unwrap();
    let members = filled_raid5(tmp.path());
    let before = hashes(&members);
    let serve = Serve::start(tmp.path(), &members, &["--read-only"]);
    let o = serve.ctl(&["repair"]);
    assert!(!o.status.success() && text(&o).contains("read-only"), "{}", text(&o));
    serve.stop(libc::SIGTERM);
    assert_eq!(hashes(&members), before);

    let not_socket = tmp.path().join("precious.txt");
    std::fs::write(&not_socket, "keep me").unwrap();
    let listen = format!("--listen=unix:{}", tmp.path().join("nbd2.sock").display());
    let o = uraid(&with(&["serve", listen.as_str(), "--control", not_socket.to_str().unwrap()], &members));
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("precious.txt exists and is not a socket"), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&not_socket).unwrap(), "keep me");

    // A control socket a running server answers on is in use: a second server is refused.
    let serve = Serve::start(tmp.path(), &members, &[]);
    let o = uraid(&with(&["serve", listen.as_str(), "--control", serve.control.to_str().unwrap()], &members));
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("in use by a running server"), "{}", text(&o));
    assert!(serve.ctl(&["status"]).status.success(), "the first server's control socket still answers");
    serve.stop(libc::SIGTERM);
    assert_eq!(hashes(&members), before);
}

/// An array left dirty by a crash is resynced by `uraid resync` and marked clean; until then a
/// server keeps it marked dirty, and a served array resyncs by itself (md does) and reports it.
#[test]
fn resync_after_a_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let members = filled_raid5(tmp.path());
    // Crash while dirty: a server with a write in its last half second, then SIGKILL. The
    // write goes through the control socket's sibling, the NBD socket, via a raw client.
    let serve = Serve::start(tmp.path(), &members, &["--member-threads=1"]);
    nbd_write(&tmp.path().join("nbd.sock"), 4096, &[0x42; 4096]);
    serve.stop(libc::SIGKILL);
    let d = detail(&members);
    assert_eq!(d["clean"], Value::Bool(false), "{d:#}");
    // Make the crash leave a real inconsistency for the resync to find.
    corrupt(&members, 0, 2_000_000);
    ok(&with(&["resync"], &members));
    let d = detail(&members);
    assert_eq!(d["clean"], Value::Bool(true), "{d:#}");
    assert_eq!(mismatch_cnt(&ok(&with(&["check"], &members))), 0);

    // The same through a server: it starts the resync by itself and marks clean when done.
    let serve = Serve::start(tmp.path(), &members, &[]);
    nbd_write(&tmp.path().join("nbd.sock"), 8192, &[0x43; 4096]);
    serve.stop(libc::SIGKILL);
    corrupt(&members, 3, 3_000_000);
    let serve = Serve::start(tmp.path(), &members, &[]);
    let waited: Value = serde_json::from_slice(&serve.ctl(&["wait", "--json"]).stdout).unwrap();
    assert!(waited["last_sync"].as_str().unwrap_or("").starts_with("resync completed"), "{waited:#}");
    serve.stop(libc::SIGTERM);
    assert_eq!(detail(&members)["clean"], Value::Bool(true));
    assert_eq!(mismatch_cnt(&ok(&with(&["check"], &members))), 0);
}

/// One NBD write through a minimal fixed-newstyle client (export "", simple replies).
fn nbd_write(sock: &Path, offset: u64, data: &[u8]) {
    let mut s = UnixStream::connect(sock).unwrap_or_else(|e| {
        let log = std::fs::read_to_string(sock.with_file_name("serve.log")).unwrap_or_default();
        panic!("connecting to {}: {e}; the server said:\n{log}", sock.display())
    });
    let mut greet = [0u8; 18];
    std::io::Read::read_exact(&mut s, &mut greet).unwrap();
    s.write_all(&3u32.to_be_bytes()).unwrap(); // fixed newstyle + no zeroes
                                               // NBD_OPT_EXPORT_NAME with the default export.
    s.write_all(&0x4948_4156_454f_5054u64.to_be_bytes()).unwrap();
    s.write_all(&1u32.to_be_bytes()).unwrap();
    s.write_all(&0u32.to_be_bytes()).unwrap();
    let mut export = [0u8; 10];
    std::io::Read::read_exact(&mut s, &mut export).unwrap();
    let mut req = Vec::new();
    req.extend_from_slice(&0x2560_9513u32.to_be_bytes());
    req.extend_from_slice(&0u16.to_be_bytes());
    req.extend_from_slice(&1u16.to_be_bytes()); // WRITE
    req.extend_from_slice(&7u64.to_be_bytes());
    req.extend_from_slice(&offset.to_be_bytes());
    req.extend_from_slice(&(data.len() as u32).to_be_bytes());
    req.extend_from_slice(data);
    s.write_all(&req).unwrap();
    let mut reply = [0u8; 16];
    std::io::Read::read_exact(&mut s, &mut reply).unwrap();
    assert_eq!(&reply[4..8], &[0, 0, 0, 0], "NBD write failed");
}

fn cat(members: &[String]) -> Vec<u8> {
    ok(&with(&["cat"], members)).stdout
}

fn blank(dir: &Path, name: &str) -> String {
    let p = dir.join(name);
    std::fs::File::create(&p).unwrap().set_len(8 << 20).unwrap();
    p.display().to_string()
}

fn examine(path: &str) -> Value {
    serde_json::from_slice::<Value>(&ok(&["examine", "--json", path]).stdout).unwrap()[0].clone()
}

/// fail, remove and add a member online: the new member is rebuilt while the array serves, the
/// data stays the same, and md's refusals hold (failing beyond redundancy, removing an active
/// member, adding a device that belongs to another array) without changing anything.
#[test]
fn ctl_fail_remove_add_rebuilds_online() {
    let tmp = tempfile::tempdir().unwrap();
    let members = filled_raid5(tmp.path());
    let want = cat(&members);
    let serve = Serve::start(tmp.path(), &members, &[]);
    let o = serve.ctl(&["remove", &members[1]]);
    assert!(!o.status.success() && text(&o).contains("fail it first"), "{}", text(&o));
    assert!(serve.ctl(&["fail", &members[1]]).status.success());
    let s = serve.status();
    assert_eq!(s["degraded"], 1);
    assert_eq!(s["members"][1]["state"], "faulty");
    let o = serve.ctl(&["fail", &members[2]]);
    assert!(!o.status.success() && text(&o).contains("--force"), "{}", text(&o));
    assert_eq!(serve.status()["degraded"], 1, "a refused fail changed the array");
    let o = serve.ctl(&["fail", "/no/such/member"]);
    assert!(!o.status.success() && text(&o).contains("not a member"), "{}", text(&o));

    // A device of another array is refused and left alone.
    let other_dir = tempfile::tempdir().unwrap();
    let other = filled_raid5(other_dir.path());
    let before = hashes(&other[..1]);
    let o = serve.ctl(&["add", &other[0]]);
    assert!(!o.status.success() && text(&o).contains("md superblock"), "{}", text(&o));
    assert_eq!(hashes(&other[..1]), before);

    assert!(serve.ctl(&["remove", &members[1]]).status.success());
    let new = blank(tmp.path(), "new.img");
    assert!(serve.ctl(&["add", &new]).status.success());
    let waited: Value = serde_json::from_slice(&serve.ctl(&["wait", "--json"]).stdout).unwrap();
    assert_eq!(waited["degraded"], 0, "{waited:#}");
    assert_eq!(waited["members"][1]["path"], new.as_str());
    assert_eq!(waited["members"][1]["state"], "in_sync");
    serve.stop(libc::SIGTERM);

    let now = vec![members[0].clone(), new.clone(), members[2].clone(), members[3].clone()];
    assert!(cat(&now) == want, "data changed by the rebuild");
    assert_eq!(mismatch_cnt(&ok(&with(&["check"], &now))), 0);
    // The rebuilt member alone carries slot 1: read without each other member in turn.
    for skip in [0, 2, 3] {
        let rest: Vec<String> = now.iter().enumerate().filter(|(i, _)| *i != skip).map(|(_, m)| m.clone()).collect();
        assert!(cat(&rest) == want, "reading without member {skip} differs: the rebuilt member is wrong");
    }
    // The failed member is stale now: given back, it is left out.
    let mut all = now.clone();
    all.push(members[1].clone());
    let d = detail(&all);
    assert_eq!(d["clean"], Value::Bool(true));
    assert!(cat(&all) == want);
}

/// `uraid ctl SOCKET speed-limit` shows and changes md's speed_limit_min/max of a running array:
/// a rebuild held to 1 MiB/s speeds up as soon as the maximum is raised, status shows the limits
/// and the pass's speed, and bad values are refused with a clear error, changing nothing.
#[test]
fn ctl_speed_limit_changes_a_running_rebuild() {
    let tmp = tempfile::tempdir().unwrap();
    let members = filled_raid5(tmp.path());
    let want = cat(&members);
    let three = vec![members[0].clone(), members[2].clone(), members[3].clone()];

    // Limits that contradict each other are refused before anything is served.
    let listen = format!("--listen=unix:{}", tmp.path().join("refused.sock").display());
    let o = uraid(&with(&["serve", listen.as_str(), "--speed-limit-min=2M", "--speed-limit-max=1M"], &three));
    assert!(!o.status.success() && text(&o).contains("above the maximum"), "{}", text(&o));

    let serve = Serve::start(tmp.path(), &three, &["--speed-limit-max=1M"]);
    let limits = |args: &[&str]| {
        let mut all = vec!["speed-limit"];
        all.extend_from_slice(args);
        serve.ctl(&all)
    };
    let shown = limits(&[]);
    assert!(shown.status.success(), "{}", text(&shown));
    assert_eq!(String::from_utf8_lossy(&shown.stdout), "speed_limit_min 1000000\nspeed_limit_max 1048576\n");

    let new = blank(tmp.path(), "new.img");
    let started = Instant::now();
    assert!(serve.ctl(&["add", &new]).status.success());
    sleep(Duration::from_millis(1500));
    let s = serve.status();
    assert_eq!(s["sync_action"], "recover", "{s:#}");
    assert_eq!((s["speed_limit_min"].as_u64(), s["speed_limit_max"].as_u64()), (Some(1_000_000), Some(1 << 20)));
    let speed = s["sync_speed_bytes_per_sec"].as_u64().unwrap();
    assert!(speed > 0 && speed < 2 << 20, "held to 1 MiB/s, going at {speed} bytes/s: {s:#}");
    let done = s["sync_done_bytes"].as_u64().unwrap();
    assert!(done < 4 << 20, "{done} bytes rebuilt in 1.5 s at 1 MiB/s");
    let text_status = String::from_utf8_lossy(&serve.ctl(&["status"]).stdout).into_owned();
    assert!(text_status.contains("speed limits: min=976K/sec max=1024K/sec"), "{text_status}");

    // Bad values: a clear error, a failed exit, the limits as they were.
    for (args, says) in [
        (&["--min", "2M"][..], "above the maximum"),
        (&["--max", "0"][..], "at least 1 byte/s"),
        (&["--max", "12Q"][..], "unknown size suffix"),
        (&["--min", "lots"][..], "unknown size suffix 'lots'"),
    ] {
        let o = limits(args);
        assert!(!o.status.success() && text(&o).contains(says), "{args:?}: {}", text(&o));
    }
    let o = limits(&["--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v, serde_json::json!({"speed_limit_min": 1_000_000, "speed_limit_max": 1 << 20}));

    // Raised, the rebuild of the rest (about 6 MiB, 6 s more at the old limit) goes at once.
    let o = limits(&["--min", "2M", "--max", "1G"]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!("speed_limit_min {}\nspeed_limit_max {}\n", 2 << 20, 1 << 30)
    );
    let waited: Value = serde_json::from_slice(&serve.ctl(&["wait", "--json"]).stdout).unwrap();
    let took = started.elapsed();
    assert_eq!(waited["degraded"], 0, "{waited:#}");
    assert!(took < Duration::from_secs(6), "the rebuild kept to the old limit: {took:?}");
    assert_eq!(waited["speed_limit_max"], 1 << 30);
    serve.stop(libc::SIGTERM);

    let now = vec![members[0].clone(), new.clone(), members[2].clone(), members[3].clone()];
    assert!(cat(&now) == want, "data changed by the rebuild");
    assert_eq!(mismatch_cnt(&ok(&with(&["check"], &now))), 0);
}

/// A hot spare waits until a member fails, then takes its slot and is rebuilt by itself.
#[test]
fn hot_spare_takes_over_a_failed_member() {
    let tmp = tempfile::tempdir().unwrap();
    let members = filled_raid5(tmp.path());
    let want = cat(&members);
    let serve = Serve::start(tmp.path(), &members, &[]);
    let spare = blank(tmp.path(), "spare.img");
    let o = serve.ctl(&["add", &spare]);
    assert!(o.status.success() && text(&o).contains("spare"), "{}", text(&o));
    assert_eq!(serve.status()["degraded"], 0);
    assert_eq!(examine(&spare)["examine_device_role"], "spare", "{:#}", examine(&spare));
    assert!(serve.ctl(&["fail", &members[3]]).status.success());
    let waited: Value = serde_json::from_slice(&serve.ctl(&["wait", "--json"]).stdout).unwrap();
    assert_eq!(waited["degraded"], 0, "{waited:#}");
    assert_eq!(waited["members"][3]["path"], spare.as_str());
    serve.stop(libc::SIGTERM);
    let now = vec![members[0].clone(), members[1].clone(), members[2].clone(), spare];
    assert!(cat(&now) == want);
    assert_eq!(mismatch_cnt(&ok(&with(&["check"], &now))), 0);
}

/// A rebuild records its progress in the new member's superblock (md's recovery_offset); after
/// a stop it resumes there instead of starting over, and the kernel-style partial member is never
/// read as if it were whole.
#[test]
fn rebuild_checkpoints_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let members = filled_raid5(tmp.path());
    let want = cat(&members);
    let three = vec![members[0].clone(), members[2].clone(), members[3].clone()];
    let new = blank(tmp.path(), "new.img");
    // 1 MB/s: the 8 MiB member takes about 8 s; stop after about 3.
    let serve = Serve::start(tmp.path(), &three, &["--speed-limit-max=1M"]);
    assert!(serve.ctl(&["add", &new]).status.success());
    sleep(Duration::from_millis(3200));
    serve.stop(libc::SIGTERM);
    let e = examine(&new);
    let done =
        e["recovery_offset"].as_u64().unwrap_or_else(|| panic!("no recovery_offset on a half-rebuilt member: {e:#}"));
    assert!(done > 0, "no progress recorded: {e:#}");
    let now = vec![members[0].clone(), new.clone(), members[2].clone(), members[3].clone()];
    let d = detail(&now);
    assert!(d["members"].as_array().unwrap().iter().any(|m| m["state"] == "rebuilding"), "{d:#}");
    // Reads never use the half-built member.
    assert!(cat(&now) == want);
    // Resume offline, from the checkpoint.
    let o = ok(&with(&["add"], &now));
    assert!(text(&o).contains(&format!("from byte {}", done * 512)), "did not resume at the checkpoint\n{}", text(&o));
    assert_eq!(examine(&new)["recovery_offset"], Value::Null);
    assert_eq!(mismatch_cnt(&ok(&with(&["check"], &now))), 0);
    for skip in [0, 2, 3] {
        let rest: Vec<String> = now.iter().enumerate().filter(|(i, _)| *i != skip).map(|(_, m)| m.clone()).collect();
        assert!(cat(&rest) == want, "reading without member {skip} differs after the resumed rebuild");
    }
}

/// Offline: `uraid add --device` rebuilds a degraded stopped array in the foreground.
#[test]
fn offline_add_rebuilds_a_degraded_array() {
    let tmp = tempfile::tempdir().unwrap();
    let members = filled_raid5(tmp.path());
    let want = cat(&members);
    let three = vec![members[0].clone(), members[1].clone(), members[3].clone()];
    let new = blank(tmp.path(), "new.img");
    ok(&with(&["add", "--device", &new], &three));
    let now = vec![members[0].clone(), members[1].clone(), new.clone(), members[3].clone()];
    let d = detail(&now);
    assert_eq!(d["clean"], Value::Bool(true), "{d:#}");
    assert!(
        d["state"].as_str().unwrap_or("").starts_with("clean") && !d["state"].as_str().unwrap().contains("degraded"),
        "{d:#}"
    );
    assert!(cat(&now) == want);
    assert_eq!(mismatch_cnt(&ok(&with(&["check"], &now))), 0);
    // Too small a device is refused before anything is written.
    let small = tmp.path().join("small.img");
    std::fs::File::create(&small).unwrap().set_len(1 << 20).unwrap();
    let before = hashes(&now);
    let o = uraid(&with(&["add", "--device", small.to_str().unwrap()], &now));
    assert!(!o.status.success() && text(&o).contains("too small"), "{}", text(&o));
    assert_eq!(hashes(&now), before);
}

/// A fresh raid5 over four sparse files of `bytes` each, with a 1 MiB-chunk bitmap if asked.
fn empty_raid5(dir: &Path, bytes: u64, bitmap: bool) -> Vec<String> {
    let members: Vec<String> = (0..4)
        .map(|i| {
            let p = dir.join(format!("d{i}.img"));
            std::fs::File::create(&p).unwrap().set_len(bytes).unwrap();
            p.display().to_string()
        })
        .collect();
    let mut create = vec!["create", "--level=5", "--raid-devices=4", "--chunk=64K"];
    if bitmap {
        create.extend(["--bitmap=internal", "--bitmap-chunk=1M"]);
    }
    ok(&with(&create, &members));
    members
}

/// Bytes a resync after a crash covers, with and without a write-intent bitmap: the bitmap
/// limits it to the regions written just before the crash. Prints the figures it measured.
#[test]
fn bitmap_shortens_the_resync_after_a_crash() {
    let mut covered = Vec::new();
    for bitmap in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let members = empty_raid5(tmp.path(), 64 << 20, bitmap);
        let serve = Serve::start(tmp.path(), &members, &[]);
        nbd_write(&tmp.path().join("nbd.sock"), 5 << 20, &[0x11; 4096]);
        nbd_write(&tmp.path().join("nbd.sock"), 100 << 20, &[0x22; 8192]);
        serve.stop(libc::SIGKILL);
        assert_eq!(detail(&members)["clean"], Value::Bool(false));
        let serve = Serve::start(tmp.path(), &members, &[]);
        let waited: Value = serde_json::from_slice(&serve.ctl(&["wait", "--json"]).stdout).unwrap();
        serve.stop(libc::SIGTERM);
        let last = waited["last_sync"].as_str().unwrap_or_default().to_string();
        assert!(last.starts_with("resync completed"), "{last}");
        let bytes: u64 = last.split_whitespace().nth(2).unwrap().parse().unwrap();
        eprintln!("bitmap={bitmap}: {last}");
        covered.push(bytes);
        assert_eq!(detail(&members)["clean"], Value::Bool(true));
        assert_eq!(mismatch_cnt(&ok(&with(&["check"], &members))), 0);
    }
    assert!(covered[1] * 20 < covered[0], "the bitmap did not shorten the resync: {covered:?}");
}

/// A member that left comes back (md's re-add): with a bitmap only the regions written while it
/// was away are rebuilt; without one it is rebuilt in full. Either way it ends identical to what
/// redundancy says it must hold.
#[test]
fn readd_rebuilds_only_what_the_bitmap_marks() {
    for bitmap in [true, false] {
        let tmp = tempfile::tempdir().unwrap();
        let members = empty_raid5(tmp.path(), 32 << 20, bitmap);
        let serve = Serve::start(tmp.path(), &members, &[]);
        let nbd = tmp.path().join("nbd.sock");
        nbd_write(&nbd, 0, &[0x31; 65536]);
        assert!(serve.ctl(&["fail", &members[1]]).status.success());
        assert!(serve.ctl(&["remove", &members[1]]).status.success());
        // Written while the member is away: only these regions differ on it.
        nbd_write(&nbd, 30 << 20, &[0x32; 8192]);
        nbd_write(&nbd, 4096, &[0x33; 4096]);
        let o = serve.ctl(&["add", &members[1]]);
        assert!(o.status.success(), "{}", text(&o));
        let waited: Value = serde_json::from_slice(&serve.ctl(&["wait", "--json"]).stdout).unwrap();
        assert_eq!(waited["degraded"], 0, "{waited:#}");
        let last = waited["last_sync"].as_str().unwrap_or_default().to_string();
        let rebuilt: u64 = last.split_whitespace().nth(2).unwrap().parse().unwrap();
        eprintln!("bitmap={bitmap}: {last}");
        if bitmap {
            assert!(rebuilt <= 4 << 20, "re-add rebuilt {rebuilt} bytes: {last}");
        } else {
            assert!(rebuilt >= 30 << 20, "a re-add without bitmap must rebuild everything: {last}");
        }
        serve.stop(libc::SIGTERM);
        let whole = cat(&members);
        assert_eq!(mismatch_cnt(&ok(&with(&["check"], &members))), 0);
        for skip in 0..4 {
            let rest: Vec<String> =
                members.iter().enumerate().filter(|(i, _)| *i != skip).map(|(_, m)| m.clone()).collect();
            assert!(cat(&rest) == whole, "bitmap={bitmap}: reading without member {skip} differs");
        }
        assert_eq!(&whole[4096..8192], &[0x33; 4096][..]);
    }
}

/// `uraid mount` refuses a mount point that is not a file, and a failed assembly leaves no
/// mount-point file behind and no member changed.
#[test]
fn mount_refusals_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let members = filled_raid5(tmp.path());
    let before = hashes(&members);
    let dir = tmp.path().display().to_string();
    let o = uraid(&with(&["mount"], &[members.clone(), vec![dir]].concat()));
    assert!(!o.status.success() && text(&o).contains("not a regular file"), "{}", text(&o));
    let file = tmp.path().join("array.img");
    let o = uraid(&["mount", "/nonexistent/member.img", file.to_str().unwrap()]);
    assert!(!o.status.success() && text(&o).contains("/nonexistent/member.img"), "{}", text(&o));
    assert!(!file.exists(), "a failed mount left its mount-point file behind");
    assert_eq!(hashes(&members), before);
}
