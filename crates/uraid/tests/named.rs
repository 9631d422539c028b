//! Arrays run by name, as an md user runs them: `uraid assemble` starts one in the background,
//! `uraid status` lists it as /proc/mdstat does, NBD clients read it through its socket in the
//! runtime directory, `uraid ctl NAME` manages it, `uraid monitor` reports its events and
//! `uraid stop NAME` ends it clean. Everything goes through the real binary, each test with a
//! runtime directory of its own (`URAID_RUNTIME_DIR`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;
use uraid_testkit::sha256_hex;

mod common;
use common::{ok, text, uraid_stdin, with};

/// A runtime directory, and every array still running in it stopped when the test ends (a
/// failed assertion must not leave servers behind).
struct Runtime {
    dir: PathBuf,
}

impl Runtime {
    fn new(tmp: &Path) -> Runtime {
        Runtime { dir: tmp.join("run") }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_uraid"));
        c.args(args).env("URAID_RUNTIME_DIR", &self.dir);
        c
    }

    fn uraid(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run uraid")
    }

    fn ok(&self, args: &[&str]) -> Output {
        let o = self.uraid(args);
        assert!(o.status.success(), "uraid {args:?} failed\n{}", text(&o));
        o
    }

    fn refused(&self, args: &[&str], says: &str) -> Output {
        let o = self.uraid(args);
        assert!(!o.status.success(), "uraid {args:?} should have failed\n{}", text(&o));
        assert!(text(&o).contains(says), "uraid {args:?} does not say {says:?}\n{}", text(&o));
        o
    }

    fn array(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn status_json(&self) -> Vec<Value> {
        let o = self.ok(&["status", "--json"]);
        serde_json::from_slice::<Value>(&o.stdout).unwrap().as_array().unwrap().clone()
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if self.dir.exists() {
            let _ = self.uraid(&["stop", "all"]);
        }
    }
}

/// A raid5 over four 8 MiB files named `prefix0.img`..., md name `name`, filled with data.
fn raid5(dir: &Path, prefix: &str, name: &str) -> Vec<String> {
    let members: Vec<String> = (0..4)
        .map(|i| {
            let p = dir.join(format!("{prefix}{i}.img"));
            std::fs::File::create(&p).unwrap().set_len(8 << 20).unwrap();
            p.display().to_string()
        })
        .collect();
    let name_flag = format!("--name={name}");
    ok(&with(&["create", "--level=5", "--raid-devices=4", "--chunk=64K", &name_flag], &members));
    let data: Vec<u8> = (0..20u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
    let o = uraid_stdin(&with(&["write", "--offset=0"], &members), &data);
    assert!(o.status.success(), "{}", text(&o));
    members
}

fn hashes(paths: &[String]) -> Vec<String> {
    paths.iter().map(|p| sha256_hex(&std::fs::read(p).unwrap())).collect()
}

fn examine_state(member: &str) -> String {
    let v: Value = serde_json::from_slice(&ok(&["examine", "--json", member]).stdout).unwrap();
    v[0]["examine_state"].as_str().unwrap().to_string()
}

/// Wait until `path` holds a line containing `what`; its whole text is returned.
fn wait_for_line(path: &Path, what: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().any(|l| l.contains(what)) {
            return text;
        }
        assert!(Instant::now() < deadline, "{} never said {what:?}; it holds:\n{text}", path.display());
        sleep(Duration::from_millis(50));
    }
}

/// A `uraid monitor` running in the background, killed on drop.
struct Monitor(Child);

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The whole life of a named array: assembled in the background under its md name, listed by
/// status, read over NBD by nbdinfo and nbdcopy, a member failed by name and the failure
/// reported by a running monitor (given to its program, not printed), a one-shot monitor
/// reporting the array degraded, and a stop that leaves the members clean and the runtime
/// directory empty.
#[test]
fn an_array_assembled_by_name_serves_is_watched_and_stops_clean() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = Runtime::new(tmp.path());
    let members = raid5(tmp.path(), "d", "somehost:vol");
    let want = ok(&with(&["cat"], &members)).stdout;

    let o = rt.ok(&with(&["assemble"], &members));
    let said = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(said.contains("uraid: array vol has been started with 4 drives."), "{said}");
    let nbd = rt.array("vol").join("nbd.sock");
    assert!(said.contains(&nbd.display().to_string()), "the NBD socket is not said: {said}");
    for file in ["nbd.sock", "control.sock", "pid", "log"] {
        assert!(rt.array("vol").join(file).exists(), "no {file} in the array's folder");
    }
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&rt.dir).unwrap().permissions().mode() & 0o777, 0o700);

    let status = String::from_utf8_lossy(&rt.ok(&["status"]).stdout).into_owned();
    assert!(status.starts_with("Personalities : [raid5] \n"), "{status}");
    assert!(status.contains("md_vol : active raid5 d0.img[0] d1.img[1] d2.img[2] d3.img[3]\n"), "{status}");
    assert!(status.contains(" [4/4] [UUUU]\n"), "{status}");
    assert!(status.ends_with("unused devices: <none>\n"), "{status}");
    assert_eq!(String::from_utf8_lossy(&rt.ok(&["stat"]).stdout), status, "stat is status");
    let listed = rt.status_json();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["name"], "vol");
    assert_eq!(listed[0]["status"]["level"], "raid5");
    assert_eq!(listed[0]["nbd_socket"], nbd.display().to_string());
    let pid: u32 = std::fs::read_to_string(rt.array("vol").join("pid")).unwrap().trim().parse().unwrap();
    assert_eq!(listed[0]["pid"], pid);

    // NBD clients read the array through the socket in the runtime directory.
    let uri = format!("nbd+unix:///?socket={}", nbd.display());
    let info = Command::new("nbdinfo").args(["--size", &uri]).output().expect("nbdinfo (libnbd-bin)");
    assert!(info.status.success(), "{}", text(&info));
    assert_eq!(String::from_utf8_lossy(&info.stdout).trim(), want.len().to_string());
    let copy = tmp.path().join("copy.raw");
    let o = Command::new("nbdcopy").args([uri.as_str(), copy.to_str().unwrap()]).output().expect("nbdcopy");
    assert!(o.status.success(), "{}", text(&o));
    assert!(std::fs::read(&copy).unwrap() == want, "what nbdcopy read differs from the array");

    // A monitor watching, its events given to its program (and so not printed, as mdadm prints
    // an event only when no program takes it).
    let events = tmp.path().join("events.txt");
    let program = tmp.path().join("on-event.sh");
    std::fs::write(&program, format!("#!/bin/sh\necho \"$@\" >> {}\n", events.display())).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let printed = tmp.path().join("monitor.out");
    let monitor = Monitor(
        rt.command(&["monitor", "--test", "--delay=0.1", "--program", program.to_str().unwrap()])
            .stdout(Stdio::from(std::fs::File::create(&printed).unwrap()))
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // --test: one TestMessage per array at the first look, so the failure comes after it.
    wait_for_line(&events, "TestMessage vol");
    let o = rt.ok(&["ctl", "vol", "fail", &members[1]]);
    assert!(text(&o).contains("marked faulty"), "{}", text(&o));
    let got = wait_for_line(&events, "Fail vol");
    assert!(got.lines().any(|l| l == format!("Fail vol {}", members[1])), "{got}");
    // The program ran after the line would have been printed.
    let shown = std::fs::read_to_string(&printed).unwrap();
    assert!(!shown.contains("Event:"), "printed beside the program: {shown}");

    let o = rt.ok(&["monitor", "--oneshot"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "Event: DegradedArray, array vol\n");
    let o = rt.ok(&["monitor", "--oneshot", "--json"]);
    let event: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((event["event"].as_str(), event["array"].as_str()), (Some("DegradedArray"), Some("vol")));
    let status = String::from_utf8_lossy(&rt.ok(&["status"]).stdout).into_owned();
    assert!(status.contains("d1.img[1](F)") && status.contains(" [4/3] [U_UU]\n"), "{status}");

    let o = rt.ok(&["stop", "vol"]);
    assert!(text(&o).contains("stopped vol") && text(&o).contains("marked clean"), "{}", text(&o));
    assert!(!rt.array("vol").exists(), "stop left the array's folder behind");
    wait_for_line(&events, "DeviceDisappeared vol");
    drop(monitor);
    for (i, m) in members.iter().enumerate().filter(|(i, _)| *i != 1) {
        assert_eq!(examine_state(m), "clean", "member {i} after the stop");
    }
    assert!(rt.status_json().is_empty());
    let survivors: Vec<String> = members.iter().enumerate().filter(|(i, _)| *i != 1).map(|(_, m)| m.clone()).collect();
    assert!(ok(&with(&["cat"], &survivors)).stdout == want, "the data changed");
}

/// A name is held by one array at a time, an array runs under one name, and names are
/// refused where they could be paths; `stop all` ends every array.
#[test]
fn names_are_held_once_and_every_array_stops_with_all() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = Runtime::new(tmp.path());
    let a = raid5(tmp.path(), "a", "a");
    let b = raid5(tmp.path(), "b", "b");
    let before_b = hashes(&b);
    rt.ok(&with(&["assemble", "--name", "same"], &a));
    rt.refused(&with(&["assemble", "--name", "same"], &b), "array same is already running (pid ");
    assert_eq!(hashes(&b), before_b, "a refused assemble changed its members");
    rt.refused(&with(&["assemble", "--name", "other"], &a), "is already running as same");
    rt.refused(&with(&["assemble", "--name", "x/y"], &b), "'/'");
    rt.refused(&with(&["assemble", "--name", "all"], &b), "reserved");
    rt.refused(&with(&["assemble", "--name", ".."], &b), "starts with '.'");
    assert_eq!(hashes(&b), before_b);

    // The name given wins over the md name; a name found under --scan by UUID works too.
    let uuid: Value = serde_json::from_slice(&ok(&["examine", "--json", &b[0]]).stdout).unwrap();
    let uuid = uuid[0]["array_uuid"].as_str().unwrap().to_string();
    let scan_dir = tmp.path().join("only-b");
    std::fs::create_dir(&scan_dir).unwrap();
    for m in &b {
        std::fs::rename(m, scan_dir.join(Path::new(m).file_name().unwrap())).unwrap();
    }
    let o = rt.ok(&["assemble", "--scan", scan_dir.to_str().unwrap(), "--uuid", &uuid]);
    assert!(text(&o).contains("array b has been started with 4 drives."), "{}", text(&o));
    let names: Vec<String> = rt.status_json().iter().map(|v| v["name"].as_str().unwrap().to_string()).collect();
    assert_eq!(names, ["b", "same"]);

    let o = rt.ok(&["stop", "all"]);
    assert!(text(&o).contains("stopped b") && text(&o).contains("stopped same"), "{}", text(&o));
    assert!(rt.status_json().is_empty());
    let o = rt.ok(&["stop", "--scan"]);
    assert!(text(&o).contains("no arrays are running"), "{}", text(&o));
}

/// `assemble --config FILE` starts the arrays an mdadm.conf's ARRAY lines describe, named
/// after their devices, members found among the DEVICE lines' devices by UUID or name.
#[test]
fn a_configuration_file_names_and_finds_arrays() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = Runtime::new(tmp.path());
    let images = tmp.path().join("images");
    std::fs::create_dir(&images).unwrap();
    let a = raid5(&images, "a", "host:first");
    let b = raid5(&images, "b", "second");
    let uuid: Value = serde_json::from_slice(&ok(&["examine", "--json", &b[0]]).stdout).unwrap();
    let uuid = uuid[0]["array_uuid"].as_str().unwrap().to_string();
    let conf = tmp.path().join("mdadm.conf");
    std::fs::write(
        &conf,
        format!(
            "DEVICE {}/*.img
MAILADDR root
ARRAY /dev/md/one metadata=1.2
   name=first
ARRAY /dev/md/two UUID={uuid}
",
            images.display()
        ),
    )
    .unwrap();
    let o = rt.ok(&["assemble", "--config", conf.to_str().unwrap()]);
    assert!(text(&o).contains("array one has been started with 4 drives."), "{}", text(&o));
    assert!(text(&o).contains("array two has been started with 4 drives."), "{}", text(&o));
    let listed = rt.status_json();
    let members_of = |i: usize| -> Vec<String> {
        listed[i]["status"]["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["path"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!((listed[0]["name"].as_str(), members_of(0)), (Some("one"), a.clone()));
    assert_eq!((listed[1]["name"].as_str(), members_of(1)), (Some("two"), b.clone()));
    rt.ok(&["stop", "all"]);

    // One of them by UUID; an ARRAY line whose members are nowhere is an error naming its line.
    let o = rt.ok(&["assemble", "--config", conf.to_str().unwrap(), "--uuid", &uuid]);
    assert!(text(&o).contains("array two has been started") && !text(&o).contains("array one"), "{}", text(&o));
    rt.ok(&["stop", "two"]);
    let bad = tmp.path().join("bad.conf");
    std::fs::write(
        &bad,
        format!(
            "DEVICE {}/none-*
ARRAY /dev/md/gone UUID={uuid}
",
            images.display()
        ),
    )
    .unwrap();
    rt.refused(&["assemble", "--config", bad.to_str().unwrap()], "line 2: no members of /dev/md/gone found");
}

/// Bad input gets a clear error and a failed exit, and nothing is written to any member.
#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = Runtime::new(tmp.path());
    let members = raid5(tmp.path(), "d", "vol");
    let before = hashes(&members);

    rt.refused(&["assemble"], "required");
    let blank = tmp.path().join("blank.img");
    std::fs::File::create(&blank).unwrap().set_len(8 << 20).unwrap();
    rt.refused(&["assemble", blank.to_str().unwrap()], "no md superblock");
    rt.refused(&["assemble", "/no/such/member.img"], "/no/such/member.img");
    rt.refused(&["assemble", "--scan", tmp.path().join("nowhere").to_str().unwrap()], "nowhere");
    assert!(!rt.dir.exists(), "a refused assemble made the runtime directory");

    // Too few members: the server's own refusal comes back from its log, and its folder holds
    // nothing but that log.
    let o = rt.refused(&with(&["assemble"], &members[..2]), "did not start");
    assert!(text(&o).contains("too few members"), "{}", text(&o));
    let left: Vec<String> = std::fs::read_dir(rt.array("vol"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["log"]);

    rt.refused(&["ctl", "nosuch", "status"], "no array named nosuch is running");
    rt.refused(&["stop", "nosuch"], "no array named nosuch is running");
    rt.refused(&["stop", "bad/name"], "'/'");
    rt.refused(&["status", "nosuch"], "no array named nosuch is running");
    rt.refused(&["monitor", "--oneshot", "--delay=0"], "above 0");
    // A socket path that does not exist is still reported as a path.
    rt.refused(&["ctl", "/no/such.sock", "status"], "/no/such.sock");

    // A runtime directory that cannot be made.
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "not a folder").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_uraid"))
        .args(with(&["assemble"], &members))
        .env("URAID_RUNTIME_DIR", file.join("run"))
        .output()
        .unwrap();
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains(&file.join("run").display().to_string()), "{}", text(&o));
    assert!(text(&o).contains("URAID_RUNTIME_DIR"), "{}", text(&o));
    assert_eq!(hashes(&members), before, "a refused command changed a member");
}

/// A runtime folder whose process is gone is recognised, cleaned and never trusted: after a
/// kill -9 the array is not listed, its sockets, pid and lock are removed (its log kept), and
/// it starts again under the same name.
#[test]
fn stale_entries_are_cleaned_not_trusted() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = Runtime::new(tmp.path());
    let members = raid5(tmp.path(), "d", "vol");
    rt.ok(&with(&["assemble"], &members));
    let folder = rt.array("vol");
    let pid: i32 = std::fs::read_to_string(folder.join("pid")).unwrap().trim().parse().unwrap();
    // SAFETY: kill(2) of the server this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(folder.join("control.sock")).is_ok() {
        assert!(Instant::now() < deadline, "the killed server still answers");
        sleep(Duration::from_millis(20));
    }
    assert!(folder.join("pid").exists() && folder.join("nbd.sock").exists(), "the kill left nothing to clean");

    assert!(rt.status_json().is_empty(), "a dead array is listed");
    for file in ["pid", "nbd.sock", "control.sock", "lock"] {
        assert!(!folder.join(file).exists(), "stale {file} left behind");
    }
    assert!(folder.join("log").exists(), "the log of the array that died was removed");
    rt.refused(&["ctl", "vol", "status"], "no array named vol is running");

    // A folder made up to look alive: a pid that is not running and a socket nobody listens on.
    let ghost = rt.array("ghost");
    std::fs::create_dir(&ghost).unwrap();
    std::fs::write(ghost.join("pid"), "999999999\n").unwrap();
    drop(std::os::unix::net::UnixListener::bind(ghost.join("control.sock")).unwrap());
    rt.refused(&["stop", "ghost"], "no array named ghost is running");
    assert!(!ghost.join("pid").exists() && !ghost.join("control.sock").exists());

    // The killed array starts again under its name (resyncing first if the kill left it
    // dirty) and stops clean.
    let o = rt.ok(&with(&["assemble"], &members));
    assert!(text(&o).contains("array vol has been started with 4 drives."), "{}", text(&o));
    rt.ok(&["ctl", "vol", "wait"]);
    rt.ok(&["stop", "vol"]);
    for m in &members {
        assert_eq!(examine_state(m), "clean");
    }
}

/// `assemble --foreground` serves in its own process, under the name, until `uraid stop`:
/// what a service manager runs. It tells the manager when the array answers (systemd's
/// `READY=1` on `$NOTIFY_SOCKET`).
#[test]
fn foreground_assemble_runs_until_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = Runtime::new(tmp.path());
    let members = raid5(tmp.path(), "d", "host:fg");
    let notify = tmp.path().join("notify");
    let manager = std::os::unix::net::UnixDatagram::bind(&notify).unwrap();
    manager.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut child = rt
        .command(&with(&["assemble", "--foreground"], &members))
        .env("NOTIFY_SOCKET", &notify)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut message = [0u8; 64];
    let n = manager.recv(&mut message).expect("no readiness notification");
    assert_eq!(&message[..n], b"READY=1");
    let control = rt.array("fg").join("control.sock");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(&control).is_err() {
        assert!(Instant::now() < deadline, "the foreground array never answered");
        assert!(child.try_wait().unwrap().is_none(), "the foreground array ended");
        sleep(Duration::from_millis(20));
    }
    let listed = rt.status_json();
    assert_eq!(listed[0]["name"], "fg");
    assert_eq!(listed[0]["pid"], child.id());
    rt.ok(&["stop", "fg"]);
    let exit = child.wait().unwrap();
    assert!(exit.success(), "{exit}");
    let mut said = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut said).unwrap();
    assert!(said.contains("members flushed and marked clean"), "{said}");
    assert!(!rt.array("fg").exists(), "the foreground array left its folder");
    for m in &members {
        assert_eq!(examine_state(m), "clean");
    }
}
