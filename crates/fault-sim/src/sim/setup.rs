//! Building a run: the first array from the seed and the geometry, its member devices, and the
//! plans of the workload and of the faults.

use std::collections::BTreeMap;

use std::time::Duration;

use uraid_device::array_policy::{ArrayPolicy, PolicyConfig, PolicyMutation, SpeedLimits};
use uraid_engine::ReadPolicy;
use uraid_md::assemble::AssemblyRules;

use crate::disk::SimDisk;
use crate::geometries;
use crate::member_device::device_id;
use crate::model::Model;
use crate::rng::SimRng;
use crate::{raidframe_geometries, vinum_geometries};

use super::md_members::{self, Consistency};
use super::{
    configure_reads, metadata, Config, Failure, Fault, FaultKind, Invariant, Mode, Mutation, Report, Scenario, Sim,
    Workload,
};
use super::{raidframe_members, vinum_members, SimFormat};

/// What a run's geometry name builds: an md array's geometry and sizes, a gvinum volume's
/// create description, or a RAIDframe set's shape.
enum Built {
    Md(geometries::Built),
    Vinum(vinum_geometries::VinumBuilt),
    Raidframe(raidframe_geometries::RaidframeBuilt),
}

impl Sim {
    pub fn new(cfg: Config) -> Result<Sim, Failure> {
        let setup = |cfg: &Config, detail: String| Failure {
            config: cfg.clone(),
            invariant: Invariant::Setup,
            detail,
            time: 0,
            event: 0,
            explained_by_write_hole: false,
        };
        let mut rng = SimRng::new(cfg.seed);
        // Drawn apart from the run's generator, so the other seeds draw as before, and from
        // the seed's bits, so it does not follow the geometry (a campaign picks it by seed).
        let plugged_bursts = SimRng::new(cfg.seed ^ 0x5eed_b0a5_7c0d_e5a1).below(3) == 0;
        let format = if vinum_geometries::is_vinum(&cfg.geometry) {
            SimFormat::Vinum
        } else if raidframe_geometries::is_raidframe(&cfg.geometry) {
            SimFormat::Raidframe
        } else {
            SimFormat::Md
        };
        if format != SimFormat::Md && cfg.scenario == Scenario::WriteHole {
            return Err(setup(
                &cfg,
                "the write-hole scenario runs md arrays, not Vinum volumes or RAIDframe sets".into(),
            ));
        }
        let built = match format {
            SimFormat::Vinum => {
                Built::Vinum(vinum_geometries::build(&cfg.geometry, &mut rng).map_err(|e| setup(&cfg, e))?)
            }
            SimFormat::Raidframe => {
                Built::Raidframe(raidframe_geometries::build(&cfg.geometry, &mut rng).map_err(|e| setup(&cfg, e))?)
            }
            SimFormat::Md => Built::Md(geometries::build(&cfg.geometry, &mut rng).map_err(|e| setup(&cfg, e))?),
        };
        let parity = matches!(&built, Built::Md(b) if b.geometry.is_parity());
        if cfg.scenario == Scenario::WriteHole && !parity {
            return Err(setup(
                &cfg,
                format!("the write-hole scenario needs a raid4/5/6 geometry, not {}", cfg.geometry),
            ));
        }
        let frng = rng.fork();
        let crng = rng.fork();
        // The log's own generator, so runs without it keep their sequence of events.
        let mut lrng = rng.fork();
        let (devices, disk_bytes, mut open, consistency, description) = match &built {
            Built::Md(built) => {
                let (devices, disk_bytes, open, consistency) =
                    Sim::md_start(&cfg, built, &mut lrng).map_err(|e| setup(&cfg, e))?;
                let name = match consistency {
                    Consistency::Resync => "resync",
                    Consistency::Bitmap { .. } => "bitmap",
                    Consistency::Log { .. } => "ppl",
                };
                (devices, disk_bytes, open, name, built.description.clone())
            }
            Built::Vinum(vb) => {
                let (devices, disk_bytes, open) = vinum_members::start(vb).map_err(|e| setup(&cfg, e))?;
                (devices, disk_bytes, open, "vinum", vb.summary.clone())
            }
            Built::Raidframe(rb) => {
                let (devices, disk_bytes, open) = raidframe_members::start(rb).map_err(|e| setup(&cfg, e))?;
                (devices, disk_bytes, open, "raidframe", rb.summary.clone())
            }
        };
        let n = devices.len();
        let ids: Vec<usize> = (0..n).collect();
        let geometry = open.engine().geometry().clone();
        // Parity anywhere: the array's own, or a raid5 plex's in a mirror of arrays.
        let parity = geometry.is_parity()
            || geometry.nested().is_some_and(|n| n.plexes().iter().any(uraid_engine::Geometry::is_parity));
        let redundant = geometry.max_degraded() > 0;
        if let Built::Md(built) = &built {
            if geometry.array_bytes() != built.geometry.array_bytes()
                || geometry.member_data_bytes() != built.geometry.member_data_bytes()
            {
                return Err(setup(
                    &cfg,
                    format!(
                        "md made a different array: {} bytes, {} per member, where {} and {} were asked",
                        geometry.array_bytes(),
                        geometry.member_data_bytes(),
                        built.geometry.array_bytes(),
                        built.geometry.member_data_bytes()
                    ),
                ));
            }
        }
        configure_reads(open.engine_mut(), cfg.read_policy());
        // The service's policy, with delays and steps scaled to members of a few hundred KiB
        // and a workload of milliseconds, and no throttling (time is virtual).
        let mut prng = rng.fork();
        let policy_config = PolicyConfig {
            clean_delay: Duration::from_micros(if cfg.mutation == Some(Mutation::CheckpointAhead) {
                50
            } else {
                prng.between(200, 20_000)
            }),
            bitmap_clear_delay: Duration::from_micros(prng.between(500, 50_000)),
            speed: SpeedLimits { min_bytes_per_sec: u64::MAX / 4, max_bytes_per_sec: u64::MAX / 4 },
            auto_resync: true,
            pass_step_bytes: 512 * prng.between(1, 128),
            // Several steps in flight, as the service runs them, or one.
            pass_depth: prng.between(1, 4) as usize,
            checkpoint_every: Duration::from_micros(prng.between(50, 5_000)),
            mutation: match cfg.mutation {
                Some(Mutation::DataBeforeBitmap) => PolicyMutation::DataBeforeBitmap,
                Some(Mutation::CheckpointAhead) => PolicyMutation::CheckpointAhead,
                _ => PolicyMutation::None,
            },
        };
        let policy = ArrayPolicy::new(&mut open, policy_config.clone(), Duration::ZERO);
        let ppl = open.ppl().cloned();
        let size = open.size();
        let mode = if cfg.scenario == Scenario::Standard && cfg.mutation.is_none() && rng.chance(1, 8) {
            Mode::Overload
        } else {
            Mode::Normal
        };
        let slow_chance = rng.pick(&[0u64, 0, 1, 2]);
        let cfg_sequential_reads = cfg.read_policy() != ReadPolicy::Md && geometry.is_mirrored();
        let mut sim = Sim {
            report: Report {
                seed: cfg.seed,
                geometry: cfg.geometry.clone(),
                description: format!("{description}, read policy {}", cfg.read_policy()),
                overload: mode == Mode::Overload,
                ppl: ppl.is_some(),
                consistency: consistency.into(),
                ..Report::default()
            },
            destage: cfg.mutation != Some(Mutation::LyingFlush),
            cfg,
            geometry,
            parity,
            redundant,
            mode,
            rng,
            frng,
            crng,
            devices,
            disk_bytes,
            ppl,
            latency: Vec::new(),
            cleared_while: Vec::new(),
            rebuilding: Default::default(),
            rebuilt_unrecorded: None,
            last_rid: 0,
            slow_chance,
            sequential_reads: cfg_sequential_reads,
            read_cursor: 0,
            plugged_bursts,
            write_cursor: 0,
            slot_dev: vec![None; n],
            targets: vec![None; n],
            joined: ids,
            waiting_spares: Vec::new(),
            open,
            format,
            meta: metadata::MetaRun::default(),
            model: Model::new(size),
            now: 0,
            seq: 0,
            queue: BTreeMap::new(),
            ios: BTreeMap::new(),
            meta_ios: BTreeMap::new(),
            reqs: BTreeMap::new(),
            inflight_writes: BTreeMap::new(),
            client_inflight: 0,
            w: Workload {
                target: 0,
                submitted: 0,
                max_inflight: 1,
                mean_gap: 1,
                next_arrival: 0,
                read: 0,
                write: 0,
                flush: 0,
                discard: 0,
            },
            plan: Vec::new(),
            events: 0,
            needs_resync: false,
            policy,
            policy_config,
            spares: false,
            spare_countdown: None,
            spare_devs: Default::default(),
            copyback_decided: false,
            verify: Vec::new(),
            internal: None,
            last_flush: None,
            ended: None,
        };
        for id in 0..n {
            sim.device_traits(id);
        }
        sim.refresh_slots();
        sim.plan_workload();
        sim.plan_faults();
        if format == SimFormat::Vinum {
            // gvinum has no hot spares: a volume runs on with what it has, and revives what a
            // crash or a write left stale when it is started again. (RAIDframe's spares are
            // reconstructed into a failed column while the set runs, as `raidctl -a; -F` does.)
            sim.spares = false;
        }
        Ok(sim)
    }

    /// md's members for a run: the consistency mechanism drawn from `lrng`, the devices with
    /// the array created on them as `mdadm --create` would, and the array assembled.
    fn md_start(
        cfg: &Config,
        built: &geometries::Built,
        lrng: &mut SimRng,
    ) -> Result<(Vec<SimDisk>, u64, uraid_device::OpenArray, Consistency), String> {
        let parity = built.geometry.is_parity();
        let redundant = built.geometry.max_degraded() > 0;
        let want_ppl = match cfg.ppl {
            Some(v) => v,
            None => cfg.scenario == Scenario::WriteHole || lrng.chance(1, 2),
        };
        let row = uraid_engine::ppl::ROW_BYTES;
        let consistency = if parity && want_ppl && built.geometry.chunk_bytes().is_multiple_of(row) {
            // Small areas too, so stripe writes get split and log writes queue.
            let rows = lrng.pick(&[2u64, 4, 8, 32, 256]);
            Consistency::Log { sectors: (4096 + rows * 8192) / 512 }
        } else if redundant && lrng.chance(1, 2) {
            // Bitmap chunks of a few KiB, so that members of 64-256 KiB have tens of them.
            Consistency::Bitmap { chunk: lrng.pick(&[4096u64, 8192, 16384]) }
        } else {
            Consistency::Resync
        };
        let n = built.member_sectors.len();
        let disk_bytes = md_members::device_bytes(built, consistency);
        let mut devices: Vec<SimDisk> = (0..n).map(|id| SimDisk::new(id, disk_bytes)).collect();
        md_members::create(built, consistency, &mut devices, lrng)?;
        let ids: Vec<usize> = (0..n).collect();
        let open = md_members::assemble(&mut devices, &ids, AssemblyRules::default(), &mut Vec::new())
            .map_err(|e| format!("assembling the new array: {e}"))?;
        Ok((devices, disk_bytes, open, consistency))
    }

    /// md's assembly rules, or the departure a mutation plants.
    pub(super) fn assembly_rules(&self) -> AssemblyRules {
        AssemblyRules {
            // The write-hole scenario without the log shows the hole: it starts the array as
            // md's `start_dirty_degraded` does.
            start_dirty_degraded: self.cfg.scenario == Scenario::WriteHole,
            ignore_events: self.cfg.mutation == Some(Mutation::IgnoreEvents),
        }
    }

    /// A new, zeroed device (a spare).
    pub(super) fn new_device(&mut self) -> usize {
        let id = self.devices.len();
        self.devices.push(SimDisk::new(id, self.disk_bytes));
        self.device_traits(id);
        id
    }

    /// Which device holds each slot now, and where its I/O lands, as the array says.
    pub(super) fn refresh_slots(&mut self) {
        self.targets = self.open.member_targets();
        self.slot_dev = self.targets.iter().map(|t| t.as_ref().and_then(|t| device_id(t.dev.name()))).collect();
    }

    /// A device's latency and behaviour, drawn from the seed.
    fn device_traits(&mut self, id: usize) {
        let mut base = self.rng.between(20_000, 200_000);
        if self.slow_chance > 0 && self.rng.chance(self.slow_chance, 6) {
            base *= self.rng.between(10, 60);
        }
        if self.cfg.mutation == Some(Mutation::LyingFlush) {
            self.devices[id].lying_flush = true;
        }
        self.latency.push(base);
        self.cleared_while.push(None);
    }

    fn plan_workload(&mut self) {
        let r = &mut self.rng;
        let write_hole = self.cfg.scenario == Scenario::WriteHole;
        self.w.target = r.between(30, 160);
        self.w.max_inflight = if write_hole { r.pick(&[8, 16, 24]) } else { r.pick(&[1, 2, 4, 8, 16, 24]) };
        self.w.mean_gap = r.between(5_000, 400_000);
        let (read, flush, discard) = if write_hole {
            (10, 3, 0)
        } else if self.cfg.mutation == Some(Mutation::CheckpointAhead) {
            // Mostly reads, so that the array is often recorded clean while the rebuild runs:
            // a crash with writes in flight would make assembly start the rebuild over.
            (r.between(80, 90), r.between(2, 6), 0)
        } else if self.cfg.mutation == Some(Mutation::LyingFlush) {
            (r.between(10, 30), r.between(10, 20), r.between(0, 4))
        } else {
            (r.between(15, 50), r.between(2, 12), r.between(0, 6))
        };
        let scrub = if self.redundant { 2 } else { 0 };
        // A logged array takes no discards (the service writes zeroes instead).
        let discard = if self.ppl.is_some() { 0 } else { discard };
        self.w.read = read;
        self.w.write = 100 - read - flush - discard - scrub;
        self.w.flush = flush;
        self.w.discard = discard;
    }

    fn plan_faults(&mut self) {
        let ops = self.w.target;
        let max_deg = self.geometry.max_degraded() as u64;
        let mut faults: Vec<(u64, FaultKind)> = Vec::new();
        let r = &mut self.frng;
        // When, in percent of the workload's requests.
        let at = |r: &mut SimRng, lo: u64, hi: u64| r.between(ops * lo / 100, ops * hi / 100);
        match (self.cfg.scenario, self.cfg.mutation, self.mode) {
            (Scenario::WriteHole, _, _) => {
                faults.push((at(r, 2, 15), FaultKind::Death));
                faults.push((at(r, 20, 90), FaultKind::Crash));
            }
            (_, Some(Mutation::SilentCorruption), _) => {
                // Late, so that the workload rarely overwrites it before a check can see it.
                for _ in 0..r.between(1, 3) {
                    faults.push((at(r, 85, 100), FaultKind::Corrupt));
                }
            }
            (_, Some(Mutation::ExtraDeath), _) => {
                for _ in 0..=max_deg {
                    faults.push((at(r, 5, 60), FaultKind::Death));
                }
            }
            (_, Some(Mutation::LyingFlush), _) => faults.push((at(r, 60, 95), FaultKind::Crash)),
            (_, Some(Mutation::IgnoreEvents), _) => {
                // A member failed while it still works, writes it misses, then a crash: only
                // the event counts (and roles) tell assembly it is stale.
                faults.push((at(r, 5, 40), FaultKind::OperatorFail));
                faults.push((at(r, 50, 95), FaultKind::Crash));
            }
            (_, Some(Mutation::DataBeforeBitmap), _) => {
                for _ in 0..2 {
                    faults.push((at(r, 15, 95), FaultKind::Crash));
                }
            }
            (
                _,
                Some(
                    Mutation::VinumNoDirtyMark | Mutation::RaidframeNoDirtyRecord | Mutation::RaidframeMapSkipsRegions,
                ),
                _,
            ) => {
                for _ in 0..2 {
                    faults.push((at(r, 15, 95), FaultKind::Crash));
                }
            }
            (_, Some(Mutation::RaidframeCopybackLabelsFirst), _) => {
                // A component lost early, a spare rebuilt in its column, then the copyback
                // (which the run makes once the set is quiet), cut short inside the copy.
                faults.push((at(r, 2, 20), FaultKind::Death));
                self.spares = true;
            }
            (_, Some(Mutation::VinumSaveSkipsDrive), _) => {
                // A subdisk taken out (saved stale, on d0 only), the drive holding that save
                // lost, then a crash: the drives left say what they were created with.
                faults.push((at(r, 5, 30), FaultKind::OperatorFail));
                faults.push((at(r, 35, 60), FaultKind::Death));
                faults.push((at(r, 65, 95), FaultKind::Crash));
            }
            (_, Some(Mutation::CheckpointAhead), _) => {
                // A rebuild onto a spare, cut short by crashes while it runs.
                faults.push((at(r, 2, 20), FaultKind::Death));
                for _ in 0..2 {
                    faults.push((at(r, 25, 95), FaultKind::CrashInRebuild));
                }
                self.spares = true;
            }
            (_, None, Mode::Overload) => {
                for _ in 0..r.below(max_deg + 2) {
                    faults.push((at(r, 5, 90), FaultKind::Death));
                }
                for _ in 0..r.between(1, 6) {
                    faults.push((at(r, 0, 90), FaultKind::Latent));
                }
                for _ in 0..r.below(3) {
                    faults.push((at(r, 5, 90), FaultKind::WriteError));
                }
            }
            (_, None, Mode::Normal) => {
                if self.redundant {
                    for _ in 0..r.below(max_deg.min(2) + 1) {
                        faults.push((at(r, 5, 90), FaultKind::Death));
                    }
                    for _ in 0..r.below(4) {
                        faults.push((at(r, 0, 90), FaultKind::Latent));
                    }
                    if r.chance(1, 3) {
                        faults.push((at(r, 5, 90), FaultKind::WriteError));
                    }
                    if r.chance(1, 6) {
                        faults.push((at(r, 5, 90), FaultKind::OperatorFail));
                    }
                    self.spares = r.chance(2, 3);
                }
                let crashes = match r.below(6) {
                    0..=2 => 0,
                    3 | 4 => 1,
                    _ => 2,
                };
                for _ in 0..crashes {
                    faults.push((at(r, 10, 95), FaultKind::Crash));
                }
            }
        }
        faults.sort_by_key(|f| f.0);
        self.plan = faults
            .into_iter()
            .map(|(at_op, kind)| Fault { at_op, delay: self.frng.between(0, 40), at: None, kind, tries: 0 })
            .collect();
    }
}
