//! Arrays over many hosts, on paper: how long rebuilding a lost host takes and how exposed the
//! data is meanwhile, for md-style arrays whose members are NBD exports (every byte through the
//! one host that runs the array) against placements without such a host (classic groups, and
//! declustered parity spread over every host, as ZFS dRAID and Ceph's CRUSH place it).
//!
//! Pure calculations (`docs/many-hosts.md` explains them and their limits):
//!
//! - rebuild time: the bytes the busiest network link or disk must move, over its bandwidth;
//! - the window of vulnerability is that time; while it lasts, further host failures arrive at
//!   `hosts / MTTF` each (exponential lifetimes);
//! - data is lost when more hosts that share stripes are down at once than the placement
//!   tolerates: `P(loss | a host failed) ≈ C(g-1, t+1) · (W/MTTF)^(t+1)`, with `g` the hosts
//!   that share stripes with the failed one (itself included) and `t` the further failures
//!   tolerated; for `t = 1`, `∫₀^W (g-1)/M · (g-2)(W-s)/M ds`: a second failure at `s`, and a
//!   third before the first host is back. Checked against [`simulate_loss_given_failure`], a
//!   Monte Carlo of overlapping rebuilds;
//! - per year: `1 - exp(-failures per year × P(loss | a host failed))`.

use crate::SimRng;

/// Hours in a year (365.25 days).
pub const HOURS_PER_YEAR: f64 = 8766.0;

/// The hosts and what each can move.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hosts {
    pub count: u32,
    /// Array data each host holds, bytes.
    pub capacity_bytes: f64,
    /// Network bandwidth of each host, each way (full duplex), bytes per second.
    pub net_bytes_per_s: f64,
    /// Disk bandwidth of each host (reads and writes together), bytes per second.
    pub disk_bytes_per_s: f64,
    /// Mean time to failure of a host, hours (a host lost with its data).
    pub mttf_hours: f64,
}

/// Where the copies or parity of a stripe go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// One md raid10 (two near copies) over every host's NBD export, run on one more host:
    /// a lost host is copied from its partner through that host.
    HeadRaid10,
    /// One md raid6 over every host's NBD export, run on one more host: md's recovery reads
    /// every surviving member through that host.
    HeadRaid6,
    /// Raid6 groups of `width` hosts with no host in between: a replacement host reads the
    /// `width - 2` units per stripe that decode the lost one.
    GroupsRaid6 { width: u32 },
    /// Raid6 stripes of `width` units spread over every host, with spare space on every host
    /// (ZFS dRAID's distributed spare, Ceph's placement groups): every survivor rebuilds a
    /// share of the lost host's data at once.
    DeclusteredRaid6 { width: u32 },
}

impl Placement {
    pub fn name(&self) -> String {
        match self {
            Placement::HeadRaid10 => "md raid10 over NBD, one head".into(),
            Placement::HeadRaid6 => "md raid6 over NBD, one head".into(),
            Placement::GroupsRaid6 { width } => format!("raid6 groups of {width}"),
            Placement::DeclusteredRaid6 { width } => format!("declustered raid6, stripes of {width}"),
        }
    }

    /// Further host failures a stripe survives while one host is lost.
    pub fn tolerates(&self) -> u32 {
        match self {
            Placement::HeadRaid10 => 0,
            _ => 1,
        }
    }

    /// Hosts that share stripes with a given host, itself included.
    pub fn sharing(&self, hosts: u32) -> u32 {
        match *self {
            Placement::HeadRaid10 => 2,
            Placement::HeadRaid6 | Placement::DeclusteredRaid6 { .. } => hosts,
            Placement::GroupsRaid6 { width } => width.min(hosts),
        }
    }

    /// Whether the placement can be laid out on `hosts` hosts.
    pub fn fits(&self, hosts: u32) -> bool {
        match *self {
            Placement::HeadRaid10 => hosts >= 2 && hosts.is_multiple_of(2),
            Placement::HeadRaid6 => hosts >= 4,
            Placement::GroupsRaid6 { width } => width >= 4 && hosts >= width && hosts.is_multiple_of(width),
            Placement::DeclusteredRaid6 { width } => width >= 4 && hosts > width,
        }
    }
}

/// Seconds to rebuild the data of one lost host: the most bytes any one link or disk moves,
/// over its bandwidth.
pub fn rebuild_seconds(h: &Hosts, placement: Placement) -> f64 {
    let c = h.capacity_bytes;
    let (net, disk) = (h.net_bytes_per_s, h.disk_bytes_per_s);
    let survivors = f64::from(h.count - 1);
    match placement {
        // The partner's disk reads C, it crosses the head's link in and out, the new host's
        // disk writes C.
        Placement::HeadRaid10 => (c / net).max(c / disk),
        // The head takes in every survivor's C and sends C out to the new host.
        Placement::HeadRaid6 => (survivors * c / net).max(c / disk),
        // The new host takes in width - 2 units per unit rebuilt, and writes C.
        Placement::GroupsRaid6 { width } => (f64::from(width - 2) * c / net).max(c / disk),
        // Each survivor rebuilds C / survivors, taking in width - 2 units for each unit, and
        // its disk reads its share of what the others need and writes its share of C.
        Placement::DeclusteredRaid6 { width } => {
            let k = f64::from(width - 2);
            (k * c / survivors / net).max((k + 1.0) * c / survivors / disk)
        }
    }
}

/// The exposure of a placement: window, and chance of loss.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Exposure {
    pub rebuild_hours: f64,
    /// Chance that a host failure leads to data loss before its rebuild ends.
    pub loss_given_failure: f64,
    /// Chance of any data loss in a year.
    pub loss_per_year: f64,
    /// Bytes the head host's link carries in during the rebuild (0 without a head).
    pub head_bytes_in: f64,
}

/// `n` choose `k`, as a float.
fn choose(n: u32, k: u32) -> f64 {
    (0..k).map(|i| f64::from(n - i) / f64::from(i + 1)).product()
}

/// `P(loss | a host failed)` for `g` hosts sharing stripes, `t` further failures tolerated,
/// a window of `window_h` hours and a host MTTF of `mttf_h` hours: `t + 1` further failures
/// among the `g - 1` others while the first is still down, `C(g-1, t+1) · (W/M)^(t+1)` (the
/// first term; exact enough while `g · W / M` is small, as it is for hosts that live years).
pub fn loss_given_failure(g: u32, t: u32, window_h: f64, mttf_h: f64) -> f64 {
    if g < t + 2 {
        return 0.0;
    }
    let x = window_h / mttf_h;
    let p = choose(g - 1, t + 1) * x.powi((t + 1) as i32);
    p.min(1.0)
}

/// The exposure of `placement` on `h`.
pub fn exposure(h: &Hosts, placement: Placement) -> Exposure {
    let rebuild_hours = rebuild_seconds(h, placement) / 3600.0;
    let g = placement.sharing(h.count);
    let loss = loss_given_failure(g, placement.tolerates(), rebuild_hours, h.mttf_hours);
    let failures_per_year = f64::from(h.count) * HOURS_PER_YEAR / h.mttf_hours;
    let head_bytes_in = match placement {
        Placement::HeadRaid10 => h.capacity_bytes,
        Placement::HeadRaid6 => f64::from(h.count - 1) * h.capacity_bytes,
        _ => 0.0,
    };
    Exposure {
        rebuild_hours,
        loss_given_failure: loss,
        loss_per_year: 1.0 - (-failures_per_year * loss).exp(),
        head_bytes_in,
    }
}

/// Monte Carlo of the chain [`loss_given_failure`] approximates: one host of `g` fails at
/// time 0; every host down comes back `window_h` after it failed; the others fail at rate
/// `1 / mttf_h` each while up. The fraction of `trials` in which more than `t + 1` hosts are
/// down at once before every one is back.
pub fn simulate_loss_given_failure(g: u32, t: u32, window_h: f64, mttf_h: f64, trials: u64, seed: u64) -> f64 {
    let mut rng = SimRng::new(seed);
    let mut losses = 0u64;
    let mut back_at: Vec<f64> = Vec::new();
    for _ in 0..trials {
        back_at.clear();
        back_at.push(window_h);
        let mut now = 0.0;
        loop {
            let up = f64::from(g) - back_at.len() as f64;
            // Next failure among the hosts that are up (exponential), against the next return.
            let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            let next_failure = now - (1.0 - u).ln() * mttf_h / up.max(f64::MIN_POSITIVE);
            let next_back = back_at.iter().copied().fold(f64::INFINITY, f64::min);
            if up > 0.0 && next_failure < next_back {
                now = next_failure;
                back_at.push(now + window_h);
                if back_at.len() as u32 > t + 1 {
                    losses += 1;
                    break;
                }
            } else {
                now = next_back;
                back_at.retain(|&b| b > now);
                if back_at.is_empty() {
                    break;
                }
            }
        }
    }
    losses as f64 / trials as f64
}

/// One row of the table: a placement on a number of hosts.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub hosts: u32,
    pub placement: Placement,
    pub exposure: Exposure,
}

/// Every placement that fits, on each host count of `counts`, the other parameters from `h`.
pub fn table(h: &Hosts, counts: &[u32], width: u32) -> Vec<Row> {
    let placements = [
        Placement::HeadRaid10,
        Placement::HeadRaid6,
        Placement::GroupsRaid6 { width },
        Placement::DeclusteredRaid6 { width },
    ];
    let mut rows = Vec::new();
    for &count in counts {
        let hosts = Hosts { count, ..*h };
        for placement in placements.into_iter().filter(|p| p.fits(count)) {
            rows.push(Row { hosts: count, placement, exposure: exposure(&hosts, placement) });
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    const TB: f64 = 1e12;
    const GBIT: f64 = 1e9 / 8.0;

    fn hosts(count: u32) -> Hosts {
        Hosts {
            count,
            capacity_bytes: 10.0 * TB,
            net_bytes_per_s: 10.0 * GBIT,
            disk_bytes_per_s: 1e9,
            mttf_hours: 50_000.0,
        }
    }

    #[test]
    fn a_head_carries_every_survivor_and_declustering_divides_by_them() {
        let h = hosts(16);
        // raid10 through a head: one host's data at the link's 1.25 GB/s, but the new host's
        // disk writes it at 1 GB/s.
        assert!((rebuild_seconds(&h, Placement::HeadRaid10) - 10_000.0).abs() < 1e-6);
        // raid6 through a head: 15 hosts' data into one link.
        assert!((rebuild_seconds(&h, Placement::HeadRaid6) - 15.0 * 8000.0).abs() < 1e-6);
        // Groups of 8: 6 units in per unit rebuilt, into one host.
        assert!((rebuild_seconds(&h, Placement::GroupsRaid6 { width: 8 }) - 6.0 * 8000.0).abs() < 1e-6);
        // Declustered over 16: the same bytes spread over 15 links, bounded by the disks.
        let d = rebuild_seconds(&h, Placement::DeclusteredRaid6 { width: 8 });
        assert!((d - 7.0 * 10.0 * TB / 15.0 / 1e9).abs() < 1e-6, "{d}");
        // More hosts, faster declustered rebuilds; a head's raid6 only slower.
        let wide = hosts(64);
        assert!(rebuild_seconds(&wide, Placement::DeclusteredRaid6 { width: 8 }) < d / 3.0);
        assert!(rebuild_seconds(&wide, Placement::HeadRaid6) > 4.0 * rebuild_seconds(&h, Placement::HeadRaid6));
    }

    #[test]
    fn bandwidth_moves_the_network_bound_rebuilds_only() {
        let slow = hosts(16);
        let fast = Hosts { net_bytes_per_s: 100.0 * GBIT, ..slow };
        let head = Placement::HeadRaid6;
        assert!((rebuild_seconds(&slow, head) / rebuild_seconds(&fast, head) - 10.0).abs() < 1e-9);
        // raid10 through a head at 100 Gbit/s is bounded by the new host's disk.
        assert!((rebuild_seconds(&fast, Placement::HeadRaid10) - 10.0 * TB / 1e9).abs() < 1e-6);
    }

    #[test]
    fn loss_needs_more_overlapping_failures_than_tolerated() {
        assert_eq!(loss_given_failure(2, 0, 10.0, 1000.0), 0.01);
        // raid6 of 8: two of the 7 others within the window.
        let p = loss_given_failure(8, 1, 10.0, 1000.0);
        assert!((p - 21.0 * 1e-4).abs() < 1e-12, "{p}");
        // Nothing to lose with too few hosts sharing stripes.
        assert_eq!(loss_given_failure(2, 1, 10.0, 1000.0), 0.0);
    }

    #[test]
    fn the_formula_matches_a_monte_carlo_of_overlapping_rebuilds() {
        for (g, t, w, m) in [(2u32, 0u32, 10.0, 1000.0), (8, 1, 10.0, 2000.0), (16, 1, 5.0, 4000.0)] {
            let formula = loss_given_failure(g, t, w, m);
            let sim = simulate_loss_given_failure(g, t, w, m, 400_000, 7);
            // The formula is the first term: within a fifth of the chain at these rates.
            assert!((sim / formula - 1.0).abs() < 0.2, "g={g} t={t}: formula {formula}, simulated {sim}");
        }
    }

    #[test]
    fn a_year_of_failures_compounds_the_per_failure_risk() {
        let h = hosts(16);
        let e = exposure(&h, Placement::GroupsRaid6 { width: 8 });
        let failures = 16.0 * HOURS_PER_YEAR / 50_000.0;
        assert!((e.loss_per_year - (1.0 - (-failures * e.loss_given_failure).exp())).abs() < 1e-15);
        assert!(e.loss_per_year > e.loss_given_failure);
        assert_eq!(e.head_bytes_in, 0.0);
        assert_eq!(exposure(&h, Placement::HeadRaid6).head_bytes_in, 15.0 * 10.0 * TB);
    }

    #[test]
    fn the_table_has_only_placements_that_fit() {
        let rows = table(&hosts(4), &[4, 6, 16], 8);
        assert!(rows.iter().all(|r| r.placement.fits(r.hosts)));
        assert!(!rows.iter().any(|r| r.hosts == 4 && matches!(r.placement, Placement::GroupsRaid6 { .. })));
        assert!(rows.iter().any(|r| r.hosts == 16 && matches!(r.placement, Placement::DeclusteredRaid6 { .. })));
        assert!(!rows.iter().any(|r| r.hosts == 6 && matches!(r.placement, Placement::GroupsRaid6 { .. })));
    }
}
