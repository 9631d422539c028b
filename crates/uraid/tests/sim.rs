//! `uraid sim faults` on the real binary: a clean campaign exits 0 with its totals as one JSON
//! line, a planted mutation is caught (exit non-zero, with the replay command), bad arguments are
//! refused.
//!
//! `uraid sim seeds` on the real binary: every JSON line has the fields the project promises,
//! ids are stable and unique per policy, every figure is there under every policy, the run is
//! deterministic, and `--plots` writes the charts. Seed 004's figures (ids `lehey-vinum-`) are
//! all there, in their units, the same under every policy but where reads have a choice of copy.
//! It checks structure and determinism, never a speed: the simulated values are only required to
//! be positive and finite, and within what their unit allows.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Output};

use serde_json::Value;

fn uraid(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_uraid")).args(args).output().expect("run uraid")
}

fn json_lines(o: &Output) -> Vec<Value> {
    assert!(o.status.success(), "uraid failed: {}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout.clone()).expect("UTF-8 output");
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}"))).collect()
}

const SMALL: &[&str] = &["sim", "seeds", "--json", "--scale", "0.02", "--seed", "7"];

#[test]
fn seeds_json_has_every_field_stable_unique_ids_and_is_deterministic() {
    let first = uraid(SMALL);
    let rows = json_lines(&first);
    assert!(!rows.is_empty());
    let policies: BTreeSet<&str> = ["md", "round-robin", "shortest-queue", "split", "md-1998", "md-2006"].into();
    let seed_files: BTreeSet<&str> = [
        "000_d8827bf9b2d28a48.txt",
        "001_16bcdf9fbfe374c3.txt",
        "002_702c458d4dea2a7a.txt",
        "003_43b5c8654f6efe43.txt",
        "004_693d145518e9b74e.txt",
    ]
    .into();
    let mut ids_by_policy: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in &rows {
        for field in ["id", "seed_file", "metric", "unit", "seed_value", "policy", "sim_value", "ratio_to_single_disk"]
        {
            assert!(r.get(field).is_some(), "{field} missing from {r}");
        }
        let id = r["id"].as_str().unwrap();
        assert!(id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'), "id {id}");
        assert!(seed_files.contains(r["seed_file"].as_str().unwrap()), "{r}");
        let policy = r["policy"].as_str().unwrap();
        assert!(policies.contains(policy), "{r}");
        // The policy of the seed's system (the md of its era, Vinum's round-robin) is one of
        // the policies, and the same for every line of a seed.
        let era = r["seed_md_policy"].as_str().unwrap();
        assert!(policies.contains(era), "{r}");
        let expected = match r["seed_file"].as_str().unwrap() {
            "000_d8827bf9b2d28a48.txt" => "md-1998",
            "003_43b5c8654f6efe43.txt" => "md",
            "004_693d145518e9b74e.txt" => "round-robin",
            _ => "md-2006",
        };
        assert_eq!(era, expected, "{r}");
        let sim = r["sim_value"].as_f64().unwrap();
        assert!(sim > 0.0 && sim.is_finite(), "{r}");
        let fresh = ids_by_policy.entry(policy.to_string()).or_default().insert(id.to_string());
        assert!(fresh, "id {id} twice under {policy}");
    }
    // The same figures under every policy.
    let md = &ids_by_policy["md"];
    assert_eq!(ids_by_policy.len(), policies.len());
    for ids in ids_by_policy.values() {
        assert_eq!(ids, md);
    }
    // Ids the project documents, and ratios where the seed states a single disk.
    for id in [
        "molnar1998-raid1-4way-seeks",
        "baker2006-raid1-2readers",
        "bonnie2008-striped-block-read",
        "parkes2000-raid5-tar-seconds",
        "parkes2000-single-softdep-tar-seconds",
        "parkes2000-raid0-softdep-tar-seconds",
    ] {
        assert!(md.contains(id), "{id} missing");
    }
    let molnar = rows.iter().find(|r| r["id"] == "molnar1998-raid1-4way-seeks" && r["policy"] == "md").unwrap();
    assert_eq!(molnar["seed_value"].as_f64(), Some(175.6));
    assert!(molnar["ratio_to_single_disk"].as_f64().is_some_and(|v| v > 1.0), "{molnar}");
    // Deterministic: the same seed, the same bytes.
    let second = uraid(SMALL);
    assert_eq!(first.stdout, second.stdout, "two runs with one seed differ");
}

/// Every figure of seed 004 (Lehey's Vinum paper), by the id after `lehey-vinum-`.
const LEHEY_IDS: &[&str] = &[
    "single-disk-random-read",
    "single-disk-random-write",
    "striped-1k-random-read",
    "striped-1k-random-write",
    "striped-256k-random-read",
    "striped-256k-random-write",
    "striped-1k-random-read-uraid",
    "striped-1k-random-write-uraid",
    "striped-1k-random-read-uraid-over-vinum",
    "striped-1k-random-write-uraid-over-vinum",
    "mirror-8drives-read-over-striped",
    "mirror-8drives-write-over-striped",
    "mirror-4shared-read-over-striped",
    "mirror-4shared-write-over-striped",
    "transfer-1k-random-read",
    "transfer-16k-random-read",
    "transfer-128k-random-read",
    "processes-1-single-disk",
    "processes-1-striped",
    "processes-128-single-disk",
    "processes-128-striped",
    "saturation-processes-single-disk",
    "saturation-processes-striped",
    "raid5-256k-random-read",
    "raid5-256k-random-write",
    "raid5-256k-read-over-striped",
    "raid5-sequential-read-peak-stripe",
    "raid5-sequential-write-peak-stripe",
    "raid5-4k-random-read-uraid-over-vinum",
    "raid5-4k-random-write-uraid-over-vinum",
    "raid5-32k5-transfer-member-ios-vinum",
    "raid5-32k5-transfer-member-ios-uraid",
    "one-subdisk-share-256k",
    "raid5-write-over-raid1",
    "raid5-write-over-striped",
];

#[test]
fn seed_004s_figures_are_all_there_and_sane() {
    let rows = json_lines(&uraid(SMALL));
    let lehey: Vec<&Value> = rows.iter().filter(|r| r["id"].as_str().unwrap().starts_with("lehey-vinum-")).collect();
    let ids: BTreeSet<&str> = lehey.iter().map(|r| r["id"].as_str().unwrap()).collect();
    let expected: BTreeSet<String> = LEHEY_IDS.iter().map(|id| format!("lehey-vinum-{id}")).collect();
    assert_eq!(ids, expected.iter().map(String::as_str).collect(), "the seed 004 figures");
    assert_eq!(lehey.len(), LEHEY_IDS.len() * 6, "each once under each policy");
    for r in &lehey {
        let id = r["id"].as_str().unwrap();
        assert_eq!(r["seed_file"], "004_693d145518e9b74e.txt", "{r}");
        assert_eq!(r["profile"], "vinum-prescsi", "{r}");
        let sim = r["sim_value"].as_f64().unwrap();
        match r["unit"].as_str().unwrap() {
            "fraction" => assert!(sim > 0.0 && sim <= 1.0, "{r}"),
            "processes" => assert!([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0].contains(&sim), "{r}"),
            "I/Os" | "KiB" => assert!(sim >= 1.0 && sim.fract() == 0.0, "{r}"),
            "x" | "MB/s" => {}
            unit => panic!("unexpected unit {unit}: {r}"),
        }
        // A seed value gives a ratio to it; none gives none.
        match r["seed_value"].as_f64() {
            Some(seed) => {
                assert!(seed > 0.0, "{r}");
                let ratio = r["sim_to_seed"].as_f64().unwrap();
                assert!((ratio - sim / seed).abs() < 1e-9 * ratio.abs().max(1.0), "{r}");
            }
            None => assert!(r["sim_to_seed"].is_null(), "{r}"),
        }
        if let Some(x1) = r["ratio_to_single_disk"].as_f64() {
            assert!(x1 > 0.0 && x1.is_finite(), "{r}");
        }
        // Only the mirrors' reads have a choice of copy; every other figure is the same under
        // every policy.
        let sensitive = id.starts_with("lehey-vinum-mirror-") && id.contains("-read-");
        assert_eq!(r["policy_sensitive"].as_bool(), Some(sensitive), "{r}");
        if !sensitive {
            let md = lehey.iter().find(|o| o["id"] == r["id"] && o["policy"] == "md").unwrap();
            assert_eq!(md["sim_value"], r["sim_value"], "{id} differs between policies");
        }
    }
    // The seed's 32.5 kB transfer: Vinum's structure makes more member I/Os than uraid's.
    let ios = |who: &str| {
        let id = format!("lehey-vinum-raid5-32k5-transfer-member-ios-{who}");
        lehey.iter().find(|r| r["id"] == id.as_str()).unwrap()["sim_value"].as_f64().unwrap()
    };
    assert!(ios("vinum") > ios("uraid"), "Vinum {} vs uraid {}", ios("vinum"), ios("uraid"));
}

#[test]
fn plots_are_written_and_bad_scales_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let o = uraid(&["sim", "seeds", "--scale", "0.02", "--plots", d]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8(o.stdout).unwrap();
    assert!(table.contains("molnar1998-raid1-4way-seeks"));
    let mut files =
        vec!["mirrors-vs-seeks.svg".to_string(), "readers-vs-mbps.svg".into(), "lehey-vinum-one-subdisk.svg".into()];
    for profile in ["vinum-prescsi", "hdd-7200", "nvme"] {
        for sweep in ["stripe-size", "mirrors", "transfer-size", "processes", "raid5"] {
            files.push(format!("lehey-vinum-{sweep}-{profile}.svg"));
        }
    }
    for f in &files {
        let svg = std::fs::read_to_string(dir.path().join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(svg.starts_with("<svg") && svg.contains("<polyline"), "{f}");
    }
    let written = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(written, files.len(), "no other charts");
    let bad = uraid(&["sim", "seeds", "--scale", "0"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--scale"));
}

/// The last line of stdout as JSON, whatever the exit status.
fn last_json_line(o: &Output) -> Value {
    let text = String::from_utf8(o.stdout.clone()).expect("UTF-8 output");
    let last =
        text.lines().last().unwrap_or_else(|| panic!("no output; stderr: {}", String::from_utf8_lossy(&o.stderr)));
    serde_json::from_str(last).unwrap_or_else(|e| panic!("not a JSON line ({e}): {last}"))
}

#[test]
fn faults_campaign_reports_totals_and_catches_a_planted_mutation() {
    let clean = uraid(&["sim", "faults", "--seeds", "60", "--first", "5", "--json", "--threads", "2"]);
    assert!(clean.status.success(), "clean campaign failed: {}", String::from_utf8_lossy(&clean.stderr));
    let totals = last_json_line(&clean);
    for field in ["runs", "failures", "crashes", "crashes_in_metadata_writes", "mutation"] {
        assert!(totals.get(field).is_some(), "{field} missing from {totals}");
    }
    assert_eq!(totals["runs"], 60, "{totals}");
    assert_eq!(totals["failures"], 0, "{totals}");
    assert!(totals["crashes"].as_u64().unwrap() > 0, "60 seeds over every geometry crash some arrays: {totals}");
    assert!(totals["mutation"].is_null());
    assert!(totals["crashes_in_metadata_writes"].is_u64(), "a count: {totals}");
    assert!(totals["metadata_ios"].as_u64().unwrap() > 0, "the members' superblocks were written: {totals}");

    // A bug planted in the assembly of md's metadata is caught by the same verb.
    let caught =
        uraid(&["sim", "faults", "--level", "raid1", "--seeds", "300", "--mutation", "ignore-events", "--json"]);
    assert!(!caught.status.success(), "assembly ignoring event counts went unnoticed over 300 seeds");
    assert_eq!(last_json_line(&caught)["mutation"], "ignore-events");

    let caught = uraid(&["sim", "faults", "--seeds", "200", "--mutation", "lying-flush", "--json", "--threads", "2"]);
    assert!(!caught.status.success(), "a lying flush went unnoticed over 200 seeds");
    let totals = last_json_line(&caught);
    assert!(totals["failures"].as_u64().unwrap() >= 1, "{totals}");
    assert_eq!(totals["mutation"], "lying-flush");
    let stderr = String::from_utf8_lossy(&caught.stderr);
    assert!(stderr.contains("URAID_SIM_SEED="), "no replay command in: {stderr}");

    for bad in [&["sim", "faults", "--geometry", "raid7-3"][..], &["sim", "faults", "--mutation", "nonsense"]] {
        let o = uraid(bad);
        assert!(!o.status.success(), "{bad:?} accepted");
        assert!(String::from_utf8_lossy(&o.stderr).contains(bad[3]), "{bad:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
}

#[test]
fn hosts_gives_a_row_per_fitting_placement_and_refuses_bad_parameters() {
    let rows = json_lines(&uraid(&["sim", "hosts", "--json", "--hosts", "8,16"]));
    let names: BTreeSet<(u64, String)> =
        rows.iter().map(|r| (r["hosts"].as_u64().unwrap(), r["placement"].as_str().unwrap().to_string())).collect();
    // 8 hosts: no declustered row (a stripe of 8 needs more hosts than its width).
    assert_eq!(rows.len(), 3 + 4, "{names:?}");
    assert!(names.contains(&(16, "declustered raid6, stripes of 8".to_string())));
    for r in &rows {
        for field in ["rebuild_hours", "head_bytes_in", "loss_given_failure", "loss_per_year"] {
            let v = r[field].as_f64().unwrap_or_else(|| panic!("{field} in {r}"));
            assert!(v.is_finite() && v >= 0.0, "{field} in {r}");
        }
        assert!(r["loss_per_year"].as_f64().unwrap() <= 1.0);
    }
    // A faster network shortens the rebuild through the head.
    let slow = json_lines(&uraid(&["sim", "hosts", "--json", "--hosts", "16"]));
    let fast = json_lines(&uraid(&["sim", "hosts", "--json", "--hosts", "16", "--net-gbit", "100"]));
    let head = |rows: &[Value]| {
        rows.iter().find(|r| r["placement"] == "md raid6 over NBD, one head").unwrap()["rebuild_hours"]
            .as_f64()
            .unwrap()
    };
    assert!(head(&fast) < head(&slow) / 5.0);
    // Each refusal names the flag at fault.
    for (bad, says) in [
        (&["sim", "hosts", "--width", "3"][..], "--width=3"),
        (&["sim", "hosts", "--mttf-hours", "0"], "--mttf-hours=0"),
        (&["sim", "hosts", "--net-gbit=-1"], "--net-gbit=-1"),
        (&["sim", "hosts", "--capacity", "x"], "--capacity=x"),
        (&["sim", "hosts", "--disk", "0"], "--disk=0"),
        (&["sim", "hosts", "--hosts", "1,3"], "--hosts=1,3: no placement fits"),
    ] {
        let o = uraid(bad);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{bad:?} accepted");
        assert!(err.contains(says), "{bad:?}: {err}");
    }
}
