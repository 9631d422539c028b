//! Where the time of Parkes' tar extraction goes in the model (seed 003): per configuration,
//! the elapsed time, the CPU spent as think time, the synchronous writes and their time, the
//! disks' and the bus's occupancy; then the same runs with the bus made free, the CPU made
//! free, and both; for the arrays, the same runs under RAIDframe's driver without its openings
//! limit, without its choice of parity write, and without both (the engine alone).
//! `cargo run --release -p uraid-perf-model --example parkes`.

use uraid_engine::ParityWriteChoice;
use uraid_perf_model::bus::BusParams;
use uraid_perf_model::profiles::{self, Profile};
use uraid_perf_model::runner::{Raidframe, RunResult, Target};
use uraid_perf_model::seeds::{parkes_configs, parkes_tar, Options};

fn main() {
    let opts = Options::default();
    let base = profiles::st41200n_1542c();
    let free_bus = Profile { bus: BusParams { name: "free", bytes_per_s: 1e15, command_overhead: 0 }, ..base.clone() };
    println!("(seconds; sync_wait_s = elapsed - think: the process waits on one synchronous write at a time)");
    println!("config  variant                elapsed_s  think_s  sync_ops  disk_reqs  disk_busy_s(each)        bus_busy_s  sync_wait_s  per_sync_ms");
    for c in parkes_configs() {
        let name = c.name;
        for (variant, profile, cpu, soft) in [
            ("as modelled", &base, c.cpu_s, false),
            ("bus free", &free_bus, c.cpu_s, false),
            ("cpu free", &base, 0.0, false),
            ("bus+cpu free", &free_bus, 0.0, false),
            ("softdep", &base, c.softdep_cpu_s, true),
            ("softdep cpu free", &base, 0.0, true),
        ] {
            let (secs, r) = parkes_tar(&opts, profile, &c.target, cpu, soft);
            report(name, variant, secs, &r);
        }
        // The same driver without each of its mechanisms, and without both (md's engine alone).
        let Target::Raidframe(rf) = c.target else { continue };
        let md = ParityWriteChoice::FewestReads;
        for (what, driver) in [
            ("no openings limit", Raidframe { openings: usize::MAX, ..rf }),
            ("md's parity writes", Raidframe { parity_writes: md, ..rf }),
            ("neither", Raidframe { openings: usize::MAX, parity_writes: md, ..rf }),
        ] {
            if driver == rf {
                continue;
            }
            let target = Target::Raidframe(driver);
            for (variant, cpu, soft) in [
                (what, c.cpu_s, false),
                ("  .. cpu free", 0.0, false),
                ("  .. softdep", c.softdep_cpu_s, true),
                ("  .. softdep cpu free", 0.0, true),
            ] {
                let (secs, r) = parkes_tar(&opts, &base, &target, cpu, soft);
                report(name, variant, secs, &r);
            }
        }
    }
}

fn report(name: &str, variant: &str, secs: f64, r: &RunResult) {
    let busy: Vec<String> = r.disk_busy.iter().map(|b| format!("{:.0}", *b as f64 / 1e9)).collect();
    let bus: f64 = r.bus_busy.iter().sum::<u64>() as f64 / 1e9;
    let wait = (r.elapsed - r.think) as f64 / 1e9;
    println!(
        "{name:7} {variant:21} {secs:10.0} {:8.0} {:9} {:10} {:24} {bus:10.0} {wait:12.0} {:12.1}",
        r.think as f64 / 1e9,
        r.ops(),
        r.disk_requests,
        busy.join("/"),
        wait * 1e3 / r.ops() as f64,
    );
}
