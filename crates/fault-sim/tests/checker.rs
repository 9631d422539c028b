//! The checker is not vacuous: faults the engine cannot survive, or that break the members'
//! promises behind its back, must be reported, with the right invariant. And a run is a pure
//! function of its seed.

use uraid_fault_sim::{geometries, run_one, Config, Invariant, Mutation, Scenario};

fn mutated(seed: u64, mutation: Mutation) -> Config {
    let g = geometries::ALL[(seed % geometries::ALL.len() as u64) as usize];
    let mut cfg = Config::new(seed, g);
    cfg.mutation = Some(mutation);
    cfg
}

/// Bytes changed on a member behind the engine's back are found by a read, a check or a
/// degraded read, unless a later write covered them first; a run that ends with a corrupted byte
/// still in place and passes would be a blind checker.
#[test]
fn silent_corruption_is_caught() {
    let (mut caught, mut overwritten) = (0, 0);
    for seed in 0..300 {
        let cfg = mutated(seed, Mutation::SilentCorruption);
        match run_one(&cfg) {
            Err(f) => {
                assert!(
                    matches!(
                        f.invariant,
                        Invariant::WrongData | Invariant::Inconsistent | Invariant::DegradedReadDiffers
                    ),
                    "silent corruption reported as something else:\n{f}"
                );
                caught += 1;
            }
            Ok(r) => {
                assert_eq!(
                    r.standing_corruptions, 0,
                    "{} seed {seed}: a corrupted byte stayed on a member and no check noticed it",
                    cfg.geometry
                );
                overwritten += 1;
            }
        }
    }
    println!("silent corruption: {caught} caught, {overwritten} overwritten by the workload before any check");
    assert!(caught >= 150, "only {caught} of 300 corruptions caught");
}

/// One member death more than the level survives, in a run that expects success: the requests
/// that then fail are reported (never silently accepted).
#[test]
fn extra_member_death_is_reported() {
    for seed in 0..150 {
        let cfg = mutated(seed, Mutation::ExtraDeath);
        match run_one(&cfg) {
            Err(f) => assert_eq!(f.invariant, Invariant::RequestFailed, "{f}"),
            Ok(r) => {
                panic!("{} seed {seed}: {} deaths beyond redundancy went unnoticed: {r:?}", cfg.geometry, r.deaths)
            }
        }
    }
}

/// Members that acknowledge flushes without making anything durable, then a crash: flushed
/// writes come back lost (or, on arrays with a partial parity log, parity comes back wrong).
#[test]
fn lying_flushes_lose_flushed_writes() {
    let mut caught = 0;
    for seed in 0..200 {
        let cfg = mutated(seed, Mutation::LyingFlush);
        if let Err(f) = run_one(&cfg) {
            // With a partial parity log, lost log-covered writes also show as parity that no
            // longer matches (the log is replayed on the strength of flushes that lied).
            assert!(
                matches!(f.invariant, Invariant::LostDurableWrite | Invariant::WrongData | Invariant::Inconsistent),
                "{f}"
            );
            caught += u32::from(f.invariant == Invariant::LostDurableWrite);
        }
    }
    println!("lying flushes: {caught} of 200 runs lost a flushed write");
    assert!(caught >= 100, "only {caught} of 200 runs with lying flushes were caught losing a flushed write");
}

/// The RAID-5/6 write hole, with the partial parity log turned off: a parity array that crashes
/// while degraded, assembled anyway, reads back corrupted blocks, always in stripes that had
/// unflushed writes. (With the log the scenario passes: `ci_write_hole` in the campaign tests.)
#[test]
fn write_hole_is_demonstrated() {
    let parity: Vec<&str> = geometries::ALL
        .iter()
        .copied()
        .filter(|g| matches!(geometries::level_of(g), "raid4" | "raid5" | "raid6"))
        .collect();
    let mut holes = 0;
    for seed in 0..120u64 {
        let mut cfg = Config::new(seed, parity[(seed % parity.len() as u64) as usize]);
        cfg.scenario = Scenario::WriteHole;
        cfg.ppl = Some(false);
        if let Err(f) = run_one(&cfg) {
            assert!(f.explained_by_write_hole, "a failure the write hole does not explain:\n{f}");
            assert!(f.to_string().contains("URAID_SIM_WRITE_HOLE=1"), "{f}");
            holes += 1;
        }
    }
    println!("write hole: {holes} of 120 degraded crashes corrupted data outside the writes in flight");
    assert!(holes >= 20, "the write hole showed in only {holes} of 120 runs");
}

/// A run is a function of its seed: the same seed gives the same I/O sequence, another seed
/// another one.
#[test]
fn same_seed_same_run() {
    for (seed, g) in
        [(3, "raid5-4-ls"), (11, "raid10-5-f2"), (29, "raid6-5-ddfnr"), (5, "raid1-3"), (8, "raid0-3-zones")]
    {
        let a = run_one(&Config::new(seed, g)).unwrap_or_else(|f| panic!("{f}"));
        let b = run_one(&Config::new(seed, g)).unwrap_or_else(|f| panic!("{f}"));
        assert_eq!(a.fingerprint, b.fingerprint, "{g} seed {seed} ran differently twice");
        assert_eq!((a.member_ios, a.ops, a.crashes, a.virtual_ns), (b.member_ios, b.ops, b.crashes, b.virtual_ns));
        let c = run_one(&Config::new(seed + 1000, g)).unwrap_or_else(|f| panic!("{f}"));
        assert_ne!(a.fingerprint, c.fingerprint, "{g}: seeds {seed} and {} ran alike", seed + 1000);
    }
}

/// A failure names its invariant and ends with the one-line command that replays it.
#[test]
fn failures_end_with_the_replay_command() {
    let cfg = mutated(1, Mutation::ExtraDeath);
    let f = run_one(&cfg).expect_err("a death beyond redundancy fails the run");
    let text = f.to_string();
    let last = text.lines().last().expect("a message");
    assert_eq!(
        last,
        format!(
            "replay: URAID_SIM_SEED=1 URAID_SIM_GEOMETRY={} URAID_SIM_MUTATION=extra-death cargo test -p uraid-fault-sim --test campaign replay -- --nocapture",
            cfg.geometry
        )
    );
    assert!(text.starts_with("uraid-sim: a request failed within the level's redundancy"), "{text}");
}

/// md's geometries with redundancy.
fn md_redundant() -> Vec<&'static str> {
    geometries::ALL.iter().copied().filter(|g| !g.starts_with("linear") && !g.starts_with("raid0")).collect()
}

/// Seeds the CI runs per level: each planted metadata bug must be caught within as many.
const CI_SEEDS: u64 = 2000;

/// `mutation` is caught within the CI's seeds of md's redundant geometries, as one of
/// `expected`.
fn assert_caught(mutation: Mutation, expected: &[Invariant]) {
    assert_caught_on(&md_redundant(), mutation, CI_SEEDS, expected);
}

/// Assembly that ignores event counts takes back a member the array had failed (and written on
/// without it): its stale data is read.
#[test]
fn assembly_ignoring_event_counts_is_caught() {
    assert_caught(
        Mutation::IgnoreEvents,
        &[Invariant::WrongData, Invariant::LostDurableWrite, Invariant::Inconsistent],
    );
}

/// Writes let out before their dirty mark and bitmap bits are durable: a crash leaves
/// inconsistent redundancy that the array, recorded clean, never resyncs.
#[test]
fn data_before_its_bitmap_bit_is_caught() {
    assert_caught(Mutation::DataBeforeBitmap, DATA_OR_REDUNDANCY);
}

/// A rebuild checkpoint recorded ahead of the data it covers: a crash then resumes the rebuild
/// past regions the new member never got.
#[test]
fn a_checkpoint_ahead_of_its_data_is_caught() {
    assert_caught(
        Mutation::CheckpointAhead,
        &[Invariant::Inconsistent, Invariant::WrongData, Invariant::DegradedReadDiffers],
    );
}

/// The first seed below `limit`, spread over `geometries`, whose run with `mutation` fails,
/// with what broke.
fn first_caught_on(geometries: &[&str], mutation: Mutation, limit: u64) -> Option<(u64, String, Invariant)> {
    (0..limit).find_map(|seed| {
        let g = geometries[(seed % geometries.len() as u64) as usize];
        let mut cfg = Config::new(seed, g);
        cfg.mutation = Some(mutation);
        run_one(&cfg).err().map(|f| (seed, g.to_string(), f.invariant))
    })
}

/// The Vinum geometries with redundancy.
fn vinum_redundant() -> Vec<&'static str> {
    uraid_fault_sim::vinum_geometries::ALL
        .iter()
        .copied()
        .filter(|g| !g.starts_with("vinum-concat") && !g.starts_with("vinum-striped"))
        .collect()
}

/// What a planted metadata bug breaks: data lost or read wrong, or redundancy left disagreeing.
const DATA_OR_REDUNDANCY: &[Invariant] =
    &[Invariant::Inconsistent, Invariant::WrongData, Invariant::DegradedReadDiffers, Invariant::LostDurableWrite];

/// `mutation` is caught within `limit` seeds spread over `geometries`, as one of `expected`.
fn assert_caught_on(geometries: &[&str], mutation: Mutation, limit: u64, expected: &[Invariant]) {
    let caught = first_caught_on(geometries, mutation, limit);
    println!("{}: first caught by {caught:?}", mutation.name());
    let (seed, g, invariant) =
        caught.unwrap_or_else(|| panic!("{} went unnoticed over {limit} seeds", mutation.name()));
    assert!(expected.contains(&invariant), "{}: caught as {invariant:?} (seed {seed} on {g})", mutation.name());
}

/// Vinum saves that forget the unclean mark: a volume crashed while writes were in flight is
/// taken as clean, and its plexes (or a raid5 plex's parity) are never made to agree.
#[test]
fn a_vinum_save_without_its_dirty_mark_is_caught() {
    assert_caught_on(&vinum_redundant(), Mutation::VinumNoDirtyMark, 200, DATA_OR_REDUNDANCY);
}

/// Vinum saves that reach one drive only: once that drive is lost, the others' configuration
/// (as created) says a subdisk taken out since is up, and its stale data is read.
#[test]
fn a_vinum_save_that_skips_drives_is_caught() {
    assert_caught_on(
        &vinum_redundant(),
        Mutation::VinumSaveSkipsDrive,
        400,
        &[Invariant::WrongData, Invariant::LostDurableWrite, Invariant::Inconsistent],
    );
}

/// The planted RAIDframe bugs, each caught within 300 seeds as lost or inconsistent data:
/// - `raidframe-no-dirty-record`: label updates never say dirty (clean flag kept, parity map
///   kept clear), so a set crashed with writes in flight is taken as clean and its mirrors or
///   parity are never made to agree again;
/// - `raidframe-map-skips-regions`: parity map updates never mark a region (the labels still go
///   dirty), so a write goes out before its region is marked and the resync after a crash,
///   limited to the regions the map marks, passes over the stripes it left inconsistent;
/// - `raidframe-copyback-labels-first`: a copyback writes the labels that give the column back
///   to its component before copying the spare's data there, and a crash inside the copy leaves
///   the component serving bytes it never got.
#[test]
fn planted_raidframe_bugs_are_caught() {
    for mutation in
        [Mutation::RaidframeNoDirtyRecord, Mutation::RaidframeMapSkipsRegions, Mutation::RaidframeCopybackLabelsFirst]
    {
        assert_caught_on(uraid_fault_sim::raidframe_geometries::ALL, mutation, 300, DATA_OR_REDUNDANCY);
    }
}
