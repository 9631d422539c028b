//! Growing a served raid5 onto a fifth member with writes going on (`uraid ctl NAME grow`):
//! the data written before and during the reshape reads back through the server and from the
//! grown array, parity checks out, and a server killed part-way continues the reshape when it
//! is started again. Refusals change nothing.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use uraid_device::{Member, MemberDevice};
use uraid_testkit::noise;

mod common;
use common::serve::Serve;
use common::{nbd_export, ok, text, uraid, with};

/// Member size: small, so the reshape takes seconds at the speed limit the tests set.
const MEMBER_BYTES: u64 = 12 << 20;
const BLOCK: usize = 64 << 10;

fn blank(dir: &Path, name: &str) -> String {
    let p = dir.join(name);
    std::fs::File::create(&p).unwrap().set_len(MEMBER_BYTES).unwrap();
    p.display().to_string()
}

/// A clean raid5 of four blank files, and a fifth blank file to grow onto.
fn raid5_of_four(dir: &Path) -> (Vec<String>, String) {
    let members: Vec<String> = (0..4).map(|i| blank(dir, &format!("d{i}.img"))).collect();
    ok(&with(&["create", "-l5", "-n4", "--chunk=64K", "--name=online", "--assume-clean"], &members));
    (members, blank(dir, "d4.img"))
}

/// A raid5 of four served at 1 MiB/s, filled through its export: its members, the device to
/// grow onto, both together, the server, and the writer that filled it.
struct Filled {
    members: Vec<String>,
    new: String,
    all: Vec<String>,
    serve: Serve,
    writer: Writer,
}

fn served_and_filled(dir: &Path) -> Filled {
    let (members, new) = raid5_of_four(dir);
    let mut all = members.clone();
    all.push(new.clone());
    let serve = Serve::start(dir, &members, &["--speed-limit-max=1M"]);
    let writer = Writer::fill(client(dir));
    Filled { members, new, all, serve, writer }
}

/// An NBD client of the server's export.
fn client(dir: &Path) -> Member {
    let uri = format!("nbd+unix:///?socket={}", dir.join("nbd.sock").display());
    Member::open(&PathBuf::from(uri), true).expect("connecting to the export")
}

/// The array as the client and the test expect it: written through `dev`, kept in `model`.
struct Writer {
    dev: Member,
    model: Vec<u8>,
    writes: u64,
}

impl Writer {
    /// Fill the whole array.
    fn fill(dev: Member) -> Writer {
        let size = dev.size() as usize;
        let model = noise(1, size);
        for at in (0..size).step_by(1 << 20) {
            dev.write_at(at as u64, &model[at..(at + (1 << 20)).min(size)]).unwrap();
        }
        dev.flush().unwrap();
        Writer { dev, model, writes: 0 }
    }

    /// Write one block somewhere (spread over the whole array, so on both sides of the reshape
    /// position), some not aligned to a chunk, then read another back and compare.
    fn write_one(&mut self) {
        self.writes += 1;
        let size = self.model.len();
        let n = self.writes;
        let len = if n.is_multiple_of(3) { BLOCK / 4 + 512 } else { BLOCK };
        let at = ((n * 7_919 * BLOCK as u64 + (n % 5) * 4096) as usize) % (size - len);
        let data = noise(1000 + n, len);
        self.dev.write_at(at as u64, &data).unwrap();
        self.model[at..at + len].copy_from_slice(&data);
        let back = ((n * 104_729 * 4096) as usize) % (size - BLOCK);
        let mut buf = vec![0u8; BLOCK];
        self.dev.read_at(back as u64, &mut buf).unwrap();
        assert!(buf == self.model[back..back + BLOCK], "read at {back} after {n} writes differs");
    }

    fn check_all(&self) {
        let mut buf = vec![0u8; self.model.len()];
        for at in (0..buf.len()).step_by(1 << 20) {
            let end = (at + (1 << 20)).min(buf.len());
            self.dev.read_at(at as u64, &mut buf[at..end]).unwrap();
        }
        assert!(buf == self.model, "the array read through the server differs from what was written");
    }
}

fn reshape_running(status: &Value) -> bool {
    status["sync_action"] == "reshape"
}

/// Write through `w` until the reshape onto `to_devices` ends (bounded), checking the status as
/// it goes.
fn write_until_reshaped(serve: &Serve, w: &mut Writer, to_devices: u64) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut seen_line = false;
    loop {
        for _ in 0..8 {
            w.write_one();
        }
        let status = serve.status();
        if !reshape_running(&status) {
            break;
        }
        assert_eq!(status["reshape"]["to_devices"], to_devices, "{status:#}");
        if !seen_line {
            let text = String::from_utf8(serve.ctl(&["status"]).stdout).unwrap();
            assert!(text.contains("reshape = "), "{text}");
            seen_line = true;
        }
        assert!(Instant::now() < deadline, "the reshape did not end in time: {status:#}");
    }
}

fn mismatch_cnt(members: &[String]) -> u64 {
    let o = ok(&with(&["check"], members));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    out.lines()
        .find_map(|l| l.strip_prefix("mismatch_cnt "))
        .unwrap_or_else(|| panic!("no mismatch_cnt line\n{}", text(&o)))
        .trim()
        .parse()
        .unwrap()
}

/// What the stopped array of `members` reads, up to `len` bytes.
fn cat(members: &[String], len: usize) -> Vec<u8> {
    let mut out = ok(&with(&["cat"], members)).stdout;
    out.truncate(len);
    out
}

fn examine(path: &str) -> Value {
    serde_json::from_slice::<Value>(&ok(&["examine", "--json", path]).stdout).unwrap()[0].clone()
}

fn serve_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default()
}

/// A served array whose data offset cannot move (0.90, 1.0) grows in place while it is
/// written: its critical section backed up first (the answer says so), the writes kept, and
/// parity right once stopped.
#[test]
fn a_served_array_without_room_to_move_its_data_grows_in_place_while_it_is_written() {
    for metadata in ["0.90", "1.0"] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let members: Vec<String> = (0..4).map(|i| blank(dir, &format!("d{i}.img"))).collect();
        let flag = format!("--metadata={metadata}");
        ok(&with(&["create", "-l5", "-n4", "--chunk=64K", "--assume-clean", &flag], &members));
        let new = blank(dir, "d4.img");
        let serve = Serve::start(dir, &members, &["--speed-limit-max=4M"]);
        let mut w = Writer::fill(client(dir));
        let grow = serve.ctl(&["grow", "--raid-devices=5", "--add", &new]);
        let said = text(&grow);
        assert!(
            grow.status.success() && said.contains("started in place") && said.contains("critical section"),
            "{metadata}: {said}\n{}",
            serve_log(dir)
        );
        write_until_reshaped(&serve, &mut w, 5);
        w.check_all();
        let model = w.model.clone();
        drop(w);
        serve.stop(libc::SIGTERM);
        let mut all = members.clone();
        all.push(new);
        assert_eq!(examine(&all[4])["raid_devices"], 5, "{metadata}");
        assert_eq!(cat(&all, model.len()), model, "{metadata}: the grown array, read stopped, differs");
        assert_eq!(mismatch_cnt(&all), 0, "{metadata}");
    }
}

#[test]
fn a_served_raid5_grows_onto_a_fifth_member_while_it_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (members, new) = raid5_of_four(dir);
    let serve = Serve::start(dir, &members, &["--speed-limit-max=4M"]);
    let mut w = Writer::fill(client(dir));
    let grow = serve.ctl(&["grow", "--raid-devices=5", "--add", &new]);
    assert!(grow.status.success(), "{}\n{}", text(&grow), serve_log(dir));
    assert!(text(&grow).contains("reshape from 4 to 5 devices started"), "{}", text(&grow));
    write_until_reshaped(&serve, &mut w, 5);
    assert!(w.writes >= 16, "only {} writes went on during the reshape", w.writes);
    // The writes marked the array dirty, and its end marks it clean again (nothing was cut
    // short): no resync follows.
    let waited: Value = serde_json::from_slice(&serve.ctl(&["wait", "--json"]).stdout).unwrap();
    assert_eq!(waited["members"].as_array().unwrap().len(), 5, "{waited:#}");
    assert_eq!(waited["sync_action"], "idle", "{waited:#}");
    // Served at its new size at once, four members' worth of data, to new connections.
    let size = waited["size_bytes"].as_u64().unwrap();
    assert!(size > w.model.len() as u64 * 4 / 3 - (1 << 20), "the grown array serves {size} bytes");
    assert_eq!(nbd_export(&dir.join("nbd.sock"))["export-size"].as_u64(), Some(size));
    w.check_all();
    // Refused while another grow could not be: nothing to add.
    let again = serve.ctl(&["grow", "--raid-devices=5", "--add", &blank(dir, "d5.img")]);
    assert!(!again.status.success(), "{}", text(&again));
    let w_model = w.model.clone();
    drop(w);
    serve.stop(libc::SIGTERM);
    let log = serve_log(dir);
    assert!(log.contains("reshape of online finished: 5 devices (from 4)"), "{log}");

    let mut all = members.clone();
    all.push(new.clone());
    let grown = examine(&new);
    assert_eq!(grown["raid_devices"], 5, "{grown:#}");
    assert!(grown.get("reshape").is_none_or(Value::is_null), "{grown:#}");
    assert_eq!(cat(&all, w_model.len()), w_model, "the grown array, read stopped, differs");
    assert_eq!(mismatch_cnt(&all), 0);
    // Started again, at the same size.
    let serve = Serve::start(dir, &all, &[]);
    assert_eq!(serve.status()["size_bytes"].as_u64(), Some(size));
    serve.stop(libc::SIGTERM);
}

/// A member whose reads fail while the served array is reshaped (cut short under it): the
/// reshape goes on degraded, as md's does, clients reading and writing throughout; the status
/// shows the slot faulty, the log names it, and the grown array is served degraded after.
#[test]
fn a_member_failing_while_a_served_array_grows_leaves_it_grown_and_degraded() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (members, new) = raid5_of_four(dir);
    let serve = Serve::start(dir, &members, &["--speed-limit-max=2M"]);
    let mut w = Writer::fill(client(dir));
    let grow = serve.ctl(&["grow", "--raid-devices=5", "--add", &new]);
    assert!(grow.status.success(), "{}\n{}", text(&grow), serve_log(dir));
    for _ in 0..8 {
        w.write_one();
    }
    std::fs::OpenOptions::new().write(true).open(&members[2]).unwrap().set_len(1 << 20).unwrap();
    write_until_reshaped(&serve, &mut w, 5);
    let waited: Value = serde_json::from_slice(&serve.ctl(&["wait", "--json"]).stdout).unwrap();
    let log = serve_log(dir);
    assert!(log.contains("d2.img failed during the reshape") && log.contains("goes on degraded"), "{log}");
    assert!(log.contains("reshape of online finished: 5 devices (from 4)"), "{log}");
    assert_eq!(waited["degraded"], 1, "{waited:#}");
    let states: Vec<&str> =
        waited["members"].as_array().unwrap().iter().map(|m| m["state"].as_str().unwrap_or("?")).collect();
    assert_eq!(
        states,
        ["in_sync", "in_sync", "missing", "in_sync", "in_sync"],
        "served from the four left: {waited:#}"
    );
    w.check_all();
    drop(w);
    serve.stop(libc::SIGTERM);
    let survivors: Vec<String> = [0, 1, 3].iter().map(|&i| members[i].clone()).chain([new]).collect();
    let grown = examine(&survivors[0]);
    assert_eq!(grown["raid_devices"], 5, "{grown:#}");
    assert!(grown.get("reshape").is_none_or(Value::is_null), "{grown:#}");
}

#[test]
fn a_server_killed_mid_reshape_continues_it_when_started_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let Filled { members, new, all, serve, writer: mut w } = served_and_filled(dir);
    let before = w.model.clone();
    let grow = serve.ctl(&["grow", "-n5", "-a", &new]);
    assert!(grow.status.success(), "{}\n{}", text(&grow), serve_log(dir));
    // Writes on both sides of the position, each made durable, then the server killed with
    // none in flight once the reshape has recorded a position past 0.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        w.write_one();
        w.dev.flush().unwrap();
        if w.writes >= 24 && examine(&new)["reshape"]["position_sectors"].as_u64().unwrap_or(0) > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "no reshape position was recorded\n{}", serve_log(dir));
    }
    let model = w.model.clone();
    assert_ne!(model, before);
    drop(w);
    serve.stop(libc::SIGKILL);
    let left = examine(&members[0]);
    assert!(left["reshape"]["position_sectors"].as_u64().unwrap() > 0, "{left:#}");

    // Started again (every member given, as assembly finds them): the reshape goes on in the
    // background, the data reads back as written, and more writes go on.
    let serve = Serve::start(dir, &all, &["--speed-limit-max=2M"]);
    let status = serve.status();
    assert!(reshape_running(&status), "{status:#}\n{}", serve_log(dir));
    // Killed after writes, the array was left dirty: the resync it owes shows while reshaping.
    assert_eq!(status["resync_needed"], true, "{status:#}");
    let mut w = Writer { dev: client(dir), model, writes: 1_000 };
    w.check_all();
    write_until_reshaped(&serve, &mut w, 5);
    serve.ctl(&["wait"]);
    w.check_all();
    let model = w.model.clone();
    drop(w);
    serve.stop(libc::SIGTERM);
    assert_eq!(cat(&all, model.len()), model, "the grown array, read stopped, differs");
    assert_eq!(mismatch_cnt(&all), 0);
    assert_eq!(examine(&members[0])["raid_devices"], 5);
}

#[test]
fn a_served_array_stopped_mid_reshape_records_the_position_and_continues() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let Filled { members, new, all, serve, writer: w } = served_and_filled(dir);
    let model = w.model.clone();
    drop(w);
    assert!(serve.ctl(&["grow", "-n5", "-a", &new]).status.success(), "{}", serve_log(dir));
    std::thread::sleep(Duration::from_millis(1500));
    serve.stop(libc::SIGTERM);
    let log = serve_log(dir);
    assert!(log.contains("reshape of online stopped at "), "{log}");
    let left = examine(&members[2]);
    let position = left["reshape"]["position_sectors"].as_u64().unwrap();
    assert!(position > 0, "{left:#}");
    // A clean stop: no resync owed.
    assert_eq!(left["examine_state"], "clean", "{left:#}");
    // Read stopped, through both shapes.
    assert_eq!(cat(&all, model.len()), model);
    let serve = Serve::start(dir, &all, &["--speed-limit-max=100M"]);
    serve.ctl(&["wait"]);
    serve.stop(libc::SIGTERM);
    assert_eq!(cat(&all, model.len()), model);
    assert!(examine(&new).get("reshape").is_none_or(Value::is_null));
    assert_eq!(mismatch_cnt(&all), 0);
}

/// A speed limit set on the running array (`ctl speed-limit`) holds the reshape a grow starts,
/// not the limit the server was started with.
#[test]
fn a_speed_limit_set_before_the_grow_holds_the_reshape() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (members, new) = raid5_of_four(dir);
    let serve = Serve::start(dir, &members, &["--speed-limit-max=100M"]);
    let set = serve.ctl(&["speed-limit", "--min=64K", "--max=512K"]);
    assert!(set.status.success(), "{}", text(&set));
    let began = Instant::now();
    let grow = serve.ctl(&["grow", "-n5", "-a", &new]);
    assert!(grow.status.success(), "{}\n{}", text(&grow), serve_log(dir));
    std::thread::sleep(Duration::from_millis(1500));
    let status = serve.status();
    assert!(reshape_running(&status), "{status:#}\n{}", serve_log(dir));
    assert_eq!(
        (status["speed_limit_min"].as_u64(), status["speed_limit_max"].as_u64()),
        (Some(64 << 10), Some(512 << 10)),
        "{status:#}"
    );
    let done = status["reshape"]["done_bytes"].as_u64().unwrap();
    let allowed = (began.elapsed().as_secs_f64() * f64::from(512 << 10)) as u64 + (2 << 20);
    assert!(done <= allowed, "{done} bytes reshaped, more than 512K/s allows: {status:#}");
    serve.stop(libc::SIGTERM);
}

#[test]
fn a_grow_the_array_cannot_do_is_refused_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (members, new) = raid5_of_four(dir);
    let serve = Serve::start(dir, &members, &[]);
    let events = examine(&members[0])["events"].clone();
    // Too few new devices for the count asked.
    let o = serve.ctl(&["grow", "-n6", "-a", &new]);
    assert!(!o.status.success());
    assert!(text(&o).contains("needs 2 new device(s)"), "{}", text(&o));
    // A count that adds nothing.
    let o = serve.ctl(&["grow", "-n4", "-a", &new]);
    assert!(!o.status.success());
    assert!(text(&o).contains("already has 4 devices: nothing to do"), "{}", text(&o));
    // Fewer: not with a device to add, nor without the word of the size it shrinks to (named
    // by the refusal), nor with another size.
    let o = serve.ctl(&["grow", "-n3", "-a", &new]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--add goes with more devices"), "{}", text(&o));
    let o = serve.ctl(&["grow", "-n3"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("will reduce the size of the array") && text(&o).contains("--array-size="),
        "{}",
        text(&o)
    );
    let o = serve.ctl(&["grow", "-n3", "--array-size=1M"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--array-size=1024K is not the size the array will have"), "{}", text(&o));
    let o = serve.ctl(&["grow", "-n5", "-a", &new, "--array-size=1M"]);
    assert!(!o.status.success());
    // A device of another array (it carries a superblock).
    let other: Vec<String> = (0..3).map(|i| blank(dir, &format!("o{i}.img"))).collect();
    ok(&with(&["create", "-l5", "-n3", "--assume-clean"], &other));
    let o = serve.ctl(&["grow", "-n5", "-a", &other[0]]);
    assert!(!o.status.success());
    assert!(text(&o).contains("carries an md superblock"), "{}", text(&o));
    // A member of this very array.
    let o = serve.ctl(&["grow", "-n5", "-a", &members[1]]);
    assert!(!o.status.success());
    assert!(text(&o).contains("already a device of this array"), "{}", text(&o));
    // A device that does not exist.
    let o = serve.ctl(&["grow", "-n5", "-a", &dir.join("nothing.img").display().to_string()]);
    assert!(!o.status.success());
    // Malformed requests on the control socket: a JSON error each, the socket still answering.
    for (body, says) in [
        (r#"{"op":"grow"}"#, "grow needs"),
        (r#"{"op":"grow","raid_devices":"five"}"#, "must be a whole number"),
        (r#"{"op":"grow","chunk_sectors":-8}"#, "out of range"),
        (r#"{"op":"grow","raid_devices":99999999999}"#, "out of range"),
        (r#"{"op":"grow","raid_devices":5,"add":"d4.img"}"#, "must be a list"),
        (r#"{"op":"grow","raid_devices":5,"add":[5]}"#, "device paths as strings"),
        (r#"{"op":"grow","raid_devices":5,"force":"yes"}"#, "true or false"),
        (r#"{"op":"grow","raid_devices":3,"array_size":-1}"#, "must not be negative"),
        (r#"{"op":"grow","raid_devices":3,"array_size":"big"}"#, "must be a whole number"),
        (r#"{"op":"fail","member":"d0.img","force":1}"#, "\"force\" must be true or false"),
        (r#"{"op":"grow","raid_devices":6,"force":true}"#, "--force goes with a raid1's number of devices only"),
        (r#"{"op":"takeover"}"#, "takeover needs \"level\""),
        (r#"{"op":"takeover","level":7}"#, "must be a level's name"),
        (r#"{"op":"takeover","level":"raid9"}"#, "raid9"),
        (r#"{"op":"takeover","level":"raid6","raid_devices":-1}"#, "must be a count of devices"),
        (r#"{"op":"takeover","level":"raid6","layout":6}"#, "must be a layout's name"),
        (r#"{"op":"takeover","level":"raid6","add":"d4.img"}"#, "must be a list"),
        (r#"{"op":"takeover","level":"raid6","force":"yes"}"#, "true or false"),
        (r#"{"op":"change"}"#, "needs one of"),
        (r#"{"op":"change","size":"max","bitmap":"none"}"#, "needs one of"),
        (r#"{"op":"change","size":"big"}"#, "must be \"max\" or a positive number"),
        (r#"{"op":"change","size":0}"#, "must be \"max\" or a positive number"),
        (r#"{"op":"change","size":"max","assume_clean":"yes"}"#, "true or false"),
        (r#"{"op":"change","bitmap":"none","bitmap_chunk":4096}"#, "goes with"),
        (r#"{"op":"change","bitmap":"file"}"#, "must be \"internal\" or \"none\""),
    ] {
        let mut raw = std::os::unix::net::UnixStream::connect(&serve.control).unwrap();
        writeln!(raw, "{body}").unwrap();
        let mut line = String::new();
        BufReader::new(&raw).read_line(&mut line).unwrap();
        let answer: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(answer["ok"], false, "{body}");
        assert!(answer["error"].as_str().unwrap().contains(says), "{body}: {answer}");
    }
    let status = serve.status();
    assert_eq!(status["members"].as_array().unwrap().len(), 4, "{status:#}");
    assert_eq!(status["sync_action"], "idle");
    serve.stop(libc::SIGTERM);
    assert_eq!(examine(&members[0])["raid_devices"], 4);
    assert_eq!(examine(&members[0])["events"], events);
    let blank_left = uraid(&["examine", &new]);
    assert!(!blank_left.status.success(), "the device to add was written: {}", text(&blank_left));
}

/// A served raid5 reshaped onto fewer members (mdadm's `--grow --array-size` then
/// `--raid-devices`, given together as on a stopped array): new connections are told the size
/// it shrinks to at once, a client connected before is refused past it, the data below it
/// reads back through the server while it is written, and the member left out becomes a spare,
/// as md leaves it.
#[test]
fn a_served_raid5_shrinks_onto_fewer_members_on_the_word_of_its_new_size() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let members: Vec<String> = (0..5).map(|i| blank(dir, &format!("d{i}.img"))).collect();
    ok(&with(&["create", "-l5", "-n5", "--chunk=64K", "--name=online", "--assume-clean"], &members));
    let serve = Serve::start(dir, &members, &["--speed-limit-max=4M"]);
    let mut w = Writer::fill(client(dir));
    let refused = serve.ctl(&["grow", "-n4"]);
    assert!(!refused.status.success(), "{}", text(&refused));
    let said = text(&refused);
    let size_k: u64 = said
        .split("--array-size=")
        .nth(1)
        .and_then(|rest| rest.split('K').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no size named: {said}"));
    let size = size_k * 1024;
    assert!(size < w.model.len() as u64 && size > w.model.len() as u64 * 2 / 3, "shrinks to {size}");
    let grow = serve.ctl(&["grow", "-n4", &format!("--array-size={size_k}K")]);
    assert!(grow.status.success(), "{}\n{}", text(&grow), serve_log(dir));
    assert!(text(&grow).contains("reshape from 5 to 4 devices started"), "{}", text(&grow));
    assert_eq!(nbd_export(&dir.join("nbd.sock"))["export-size"].as_u64(), Some(size), "told a new connection");
    let mut past = vec![0u8; 4096];
    assert!(w.dev.read_at(size, &mut past).is_err(), "a read past the new size was served");
    w.model.truncate(size as usize);
    write_until_reshaped(&serve, &mut w, 4);
    assert!(w.writes >= 16, "only {} writes went on during the reshape", w.writes);
    let waited: Value = serde_json::from_slice(&serve.ctl(&["wait", "--json"]).stdout).unwrap();
    assert_eq!(
        (waited["sync_action"].as_str(), waited["size_bytes"].as_u64()),
        (Some("idle"), Some(size)),
        "{waited:#}"
    );
    assert_eq!(nbd_export(&dir.join("nbd.sock"))["export-size"].as_u64(), Some(size));
    w.check_all();
    let model = w.model.clone();
    drop(w);
    serve.stop(libc::SIGTERM);
    assert!(serve_log(dir).contains("finished: 4 devices (from 5)"), "{}", serve_log(dir));
    let left = examine(&members[4]);
    assert_eq!(
        (left["raid_devices"].as_u64(), left["examine_device_role"].as_str()),
        (Some(4), Some("spare")),
        "{left:#}"
    );
    assert_eq!(cat(&members[..4], model.len()), model, "the shrunk array, read stopped, differs");
    assert_eq!(mismatch_cnt(&members[..4]), 0);
}

/// Refused grows of an array the reshape cannot take: the message names why, and nothing is
/// written (the members keep their superblocks, the device to add stays blank, no reshape runs).
fn refused_changing_nothing(dir: &Path, serve: &Serve, members: &[String], new: &str, why: &str) {
    let before = examine(&members[0]);
    let o = serve.ctl(&["grow", "-n5", "-a", new]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains(why), "{}\n{}", text(&o), serve_log(dir));
    let status = serve.status();
    assert!(!reshape_running(&status), "{status:#}");
    assert!(status["reshape"].is_null(), "{status:#}");
    let after = examine(&members[0]);
    assert_eq!((&after["raid_devices"], &after["events"]), (&before["raid_devices"], &before["events"]), "{after:#}");
    let blank_left = uraid(&["examine", new]);
    assert!(!blank_left.status.success(), "the device to add was written: {}", text(&blank_left));
}

#[test]
fn a_degraded_array_is_not_grown() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (members, new) = raid5_of_four(dir);
    let serve = Serve::start(dir, &members[..3], &[]);
    refused_changing_nothing(dir, &serve, &members, &new, "the array is degraded: rebuild it before growing it");
    serve.stop(libc::SIGTERM);
}

#[test]
fn an_array_running_a_pass_is_not_grown() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (members, new) = raid5_of_four(dir);
    let serve = Serve::start(dir, &members, &["--speed-limit-max=64K", "--speed-limit-min=64K"]);
    let check = serve.ctl(&["check"]);
    assert!(check.status.success(), "{}", text(&check));
    refused_changing_nothing(dir, &serve, &members, &new, "a check is running: wait for it to end");
    assert_eq!(serve.status()["sync_action"], "check");
    serve.stop(libc::SIGTERM);
}

#[test]
fn arrays_with_a_bitmap_or_a_partial_parity_log_are_not_grown() {
    for policy in ["--bitmap=internal", "--consistency-policy=ppl"] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let members: Vec<String> = (0..4).map(|i| blank(dir, &format!("d{i}.img"))).collect();
        ok(&with(&["create", "-l5", "-n4", "--chunk=64K", "--name=online", "--assume-clean", policy], &members));
        let new = blank(dir, "d4.img");
        let serve = Serve::start(dir, &members, &[]);
        refused_changing_nothing(dir, &serve, &members, &new, "write-intent bitmap or a partial parity log");
        serve.stop(libc::SIGTERM);
    }
}

#[test]
fn a_read_only_array_is_not_grown() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (members, new) = raid5_of_four(dir);
    let serve = Serve::start(dir, &members, &["--read-only"]);
    refused_changing_nothing(dir, &serve, &members, &new, "read-only");
    // Nor is its size or bitmap changed.
    let before = examine(&members[0]);
    for change in [["grow", "--size=max"], ["grow", "--bitmap=internal"]] {
        let o = serve.ctl(&change);
        assert!(!o.status.success() && text(&o).contains("read-only"), "{change:?}: {}", text(&o));
    }
    assert_eq!(examine(&members[0]), before, "a refused change wrote a superblock");
    serve.stop(libc::SIGTERM);
}
