//! `uraid bench`: the JSON lines others compare against, and refusal of bad options. Speeds are
//! only required to be positive: a benchmark reports timing, it never asserts it.

use std::collections::BTreeSet;
use std::process::{Command, Output};

use serde_json::Value;
use uraid_parity::Kernel;

fn uraid(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_uraid")).args(args).output().expect("run uraid")
}

fn json_lines(o: &Output) -> Vec<Value> {
    assert!(o.status.success(), "uraid failed: {}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout.clone()).expect("UTF-8 output");
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}"))).collect()
}

#[test]
fn parity_json_lines_cover_every_kernel_op_and_layout() {
    let o = uraid(&[
        "bench",
        "parity",
        "--json",
        "--runs",
        "1",
        "--seconds",
        "0.01",
        "--working-set",
        "hot",
        "--chunk",
        "64K",
    ]);
    let rows = json_lines(&o);
    let kernels: BTreeSet<String> = Kernel::available_kernels().iter().map(|k| k.name().to_string()).collect();
    let mut seen = BTreeSet::new();
    let mut read = 0;
    for r in &rows {
        for field in [
            "op",
            "data_members",
            "parity_members",
            "chunk_bytes",
            "kernel",
            "working_set_bytes",
            "gbps",
            "gbps_min",
            "gbps_max",
            "runs",
        ] {
            assert!(r.get(field).is_some(), "{field} missing from {r}");
        }
        let gbps = r["gbps"].as_f64().unwrap();
        assert!(gbps > 0.0 && gbps.is_finite(), "{r}");
        assert!(r["gbps_min"].as_f64().unwrap() <= gbps && gbps <= r["gbps_max"].as_f64().unwrap(), "{r}");
        assert_eq!(r["runs"].as_array().unwrap().len(), 1, "{r}");
        let op = r["op"].as_str().unwrap();
        if op == "read" {
            assert_eq!(r["kernel"], "memory");
            assert!(r["working_set_bytes"].as_u64().unwrap() >= 1 << 30);
            read += 1;
            continue;
        }
        let (k, m) = (r["data_members"].as_u64().unwrap(), r["parity_members"].as_u64().unwrap());
        assert_eq!(r["chunk_bytes"], 65536);
        // hot: one stripe, data and parity
        assert_eq!(r["working_set_bytes"].as_u64().unwrap(), (k + m) * 65536, "{r}");
        let want_m = if op == "xor" || op == "recover1" { 1 } else { 2 };
        assert_eq!(m, want_m, "{r}");
        seen.insert((op.to_string(), k, r["kernel"].as_str().unwrap().to_string()));
    }
    assert_eq!(read, 1, "one memory read bandwidth line");
    for op in ["xor", "pq", "recover1", "recover2"] {
        for k in [4, 8] {
            for kernel in &kernels {
                assert!(
                    seen.contains(&(op.to_string(), k, kernel.clone())),
                    "no row for {op} {k} data members with {kernel}"
                );
            }
        }
    }
    assert_eq!(seen.len(), rows.len() - 1, "one row per op, layout and kernel");
}

#[test]
fn parity_streaming_pool_and_chosen_kernel() {
    let o = uraid(&[
        "bench",
        "parity",
        "--json",
        "--runs",
        "3",
        "--seconds",
        "0.01",
        "--op",
        "pq",
        "--layout",
        "4+2",
        "--chunk",
        "4K",
        "--working-set",
        "1M",
        "--kernel",
        "scalar",
        "--no-membw",
    ]);
    let rows = json_lines(&o);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0];
    assert_eq!((r["op"].as_str(), r["kernel"].as_str()), (Some("pq"), Some("scalar")));
    // at least 1 MiB of whole 6 x 4K stripes
    let ws = r["working_set_bytes"].as_u64().unwrap();
    assert!(ws >= 1 << 20 && ws.is_multiple_of(6 * 4096), "{r}");
    assert_eq!(r["runs"].as_array().unwrap().len(), 3);
}

#[test]
fn membw_reports_a_read_bandwidth() {
    let o = uraid(&["bench", "membw", "--json", "--bytes", "64M", "--runs", "1", "--seconds", "0.01"]);
    let rows = json_lines(&o);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["op"], "read");
    assert!(rows[0]["gbps"].as_f64().unwrap() > 0.0);
}

#[test]
fn table_output_has_a_header_and_rows() {
    let o = uraid(&[
        "bench",
        "parity",
        "--runs",
        "1",
        "--seconds",
        "0.01",
        "--op",
        "xor",
        "--layout",
        "4+1",
        "--chunk",
        "4K",
        "--working-set",
        "hot",
        "--kernel",
        "scalar",
        "--no-membw",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("op") && lines[0].contains("GB/s"), "{text}");
    assert!(lines[1].starts_with("xor") && lines[1].contains("4+1") && lines[1].contains("scalar"), "{text}");
}

#[test]
fn bad_options_are_refused_with_a_message() {
    for (bad, says) in [
        (&["--layout", "4+9"][..], "parity members"),
        (&["--layout", "x"][..], "not a layout"),
        (&["--chunk", "3"][..], "multiple of 4K"),
        (&["--op", "raid7"][..], "unknown operation"),
        (&["--kernel", "sse9"][..], "unknown kernel"),
        (&["--working-set", "cold"][..], "hot or a size"),
        (&["--runs", "0"][..], "--runs"),
        (&["--seconds", "0"][..], "--seconds"),
        (&["--op", "pq", "--layout", "4+1"][..], "no DATA+2 layout for pq"),
    ] {
        let mut args = vec!["bench", "parity", "--json", "--no-membw"];
        args.extend_from_slice(bad);
        let o = uraid(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{bad:?} accepted");
        assert!(err.contains(says), "{bad:?}: {err}");
        assert!(o.stdout.is_empty(), "{bad:?} printed figures before refusing");
    }
}

/// `uraid bench engine` drives a real array: writes at queue depth leave a raid5 consistent
/// (`uraid check` finds 0 mismatches afterwards), reads and writes report positive figures, and
/// bad options are refused before any member is opened.
#[test]
fn engine_bench_drives_an_array_and_refuses_bad_options() {
    let dir = tempfile::tempdir().unwrap();
    let members: Vec<String> = (0..4)
        .map(|i| {
            let p = dir.path().join(format!("m{i}.img"));
            std::fs::File::create(&p).unwrap().set_len(8 << 20).unwrap();
            p.to_str().unwrap().to_string()
        })
        .collect();
    let with =
        |head: &[&str]| -> Vec<String> { head.iter().map(|s| s.to_string()).chain(members.iter().cloned()).collect() };
    let run = |a: Vec<String>| uraid(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let o = run(with(&["create", "--level=5", "--raid-devices=4", "--chunk=64K"]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for (pattern, bs) in [("randwrite", "4K"), ("write", "1M"), ("read", "1M"), ("randread", "4K")] {
        let o = run(with(&[
            "bench",
            "engine",
            "--json",
            "--pattern",
            pattern,
            "--bs",
            bs,
            "--iodepth",
            "8",
            "--seconds",
            "0.2",
        ]));
        let rows = json_lines(&o);
        assert_eq!(rows.len(), 1, "{rows:?}");
        let r = &rows[0];
        assert_eq!(r["level"], "raid5", "{r}");
        for field in ["mbps", "iops", "cpu_seconds_per_gib"] {
            let v = r[field].as_f64().unwrap_or_else(|| panic!("{field} missing from {r}"));
            assert!(v > 0.0 && v.is_finite(), "{field} in {r}");
        }
        assert!(r["bytes"].as_u64().unwrap() > 0, "{r}");
    }
    let o = run(with(&["check"]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("mismatch_cnt 0"), "{}", String::from_utf8_lossy(&o.stdout));

    let before: Vec<Vec<u8>> = members.iter().map(|m| std::fs::read(m).unwrap()).collect();
    for (bad, says) in [
        (&["--pattern", "sideways"][..], "--pattern=sideways"),
        (&["--bs", "1000"][..], "--bs=1000"),
        (&["--iodepth", "0"][..], "--iodepth=0"),
        (&["--seconds", "0"][..], "--seconds"),
    ] {
        let mut a = vec!["bench", "engine"];
        if bad[0] != "--pattern" {
            a.extend_from_slice(&["--pattern", "write"]);
        }
        a.extend_from_slice(bad);
        let o = run(with(&a));
        assert!(!o.status.success(), "{bad:?} accepted");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(says), "{bad:?}: {e}");
    }
    let after: Vec<Vec<u8>> = members.iter().map(|m| std::fs::read(m).unwrap()).collect();
    assert!(before == after, "a refused bench wrote to a member");
}
