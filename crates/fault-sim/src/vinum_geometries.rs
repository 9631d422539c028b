//! Named gvinum volumes the simulation runs: one volume `v` of one to four plexes, written as
//! the `gvinum create` description `uraid vinum create` takes, over drives `g0`, `g1`, ... on
//! the simulated devices `d0`, `d1`, ... (drives are found by the names in their headers, not
//! by device, so the two differ on purpose).
//!
//! Names: `vinum-concat-N`, `vinum-striped-N`, `vinum-raid5-N` (one plex over N drives);
//! `vinum-mirror-K-concat|striped|mixed|raid5|odd` (K plexes, each on drives of its own; `mixed`
//! alternates concat and striped plexes; `raid5` alternates raid5 plexes of three drives and
//! concat plexes, a mirror of arrays the engine runs on two levels; `odd` has concat plexes whose subdisks end at odd
//! sectors, so that the plexes line up in whole sectors only); `vinum-shared-K-striped` (K striped plexes over the
//! same drives, each rotated by one drive, as seed 004's "4 shared drives": every drive holds a
//! subdisk of every plex, and a drive's death takes one from each). The seed picks the subdisk
//! sizes and the stripe size.

use crate::rng::SimRng;

/// The Vinum geometries a Vinum campaign covers.
pub const ALL: &[&str] = &[
    "vinum-concat-1",
    "vinum-concat-3",
    "vinum-striped-2",
    "vinum-striped-4",
    "vinum-raid5-3",
    "vinum-raid5-5",
    "vinum-mirror-2-concat",
    "vinum-mirror-2-striped",
    "vinum-mirror-2-mixed",
    "vinum-mirror-2-odd",
    "vinum-mirror-3-mixed",
    "vinum-mirror-2-raid5",
    "vinum-mirror-3-raid5",
    "vinum-mirror-4-striped",
    "vinum-shared-2-striped",
    "vinum-shared-4-striped",
];

/// Whether a geometry name is a Vinum volume's.
pub fn is_vinum(name: &str) -> bool {
    name.starts_with("vinum-")
}

/// The volume every Vinum geometry makes.
pub const VOLUME: &str = "v";

/// A Vinum volume built for one run.
#[derive(Debug, Clone)]
pub struct VinumBuilt {
    /// The `gvinum create` description, drive lines included (`drive gI device dI`).
    pub description: String,
    /// How many devices (one drive each).
    pub drives: usize,
    /// Bytes of subdisks on each drive, at most.
    pub data_bytes_per_drive: u64,
    /// The sizes the seed chose, for the trace.
    pub summary: String,
}

const KIB: u64 = 1024;

/// One plex: its organisation, and per subdisk its drive and length.
struct Plex {
    org: &'static str,
    subdisks: Vec<(usize, u64)>,
}

/// Build Vinum geometry `name` with sizes drawn from `rng`.
pub fn build(name: &str, rng: &mut SimRng) -> Result<VinumBuilt, String> {
    let bad = || format!("unknown Vinum geometry {name:?} (examples: {})", ALL[..4].join(", "));
    let parts: Vec<&str> = name.split('-').collect();
    if parts.len() < 3 || parts[0] != "vinum" {
        return Err(bad());
    }
    let n: usize = parts[2].parse().map_err(|_| bad())?;
    if n == 0 || n > 8 {
        return Err(bad());
    }
    let stripe = rng.pick(&[8 * KIB, 16 * KIB, 32 * KIB]);
    // Subdisks of whole stripes: 64-256 KiB.
    let sd = stripe * rng.between(64 * KIB / stripe, 256 * KIB / stripe);
    let one = |org: &'static str, first: usize, count: usize| Plex {
        org,
        subdisks: (0..count).map(|i| (first + i, sd)).collect(),
    };
    let (plexes, drives): (Vec<Plex>, usize) = match (parts[1], parts.get(3).copied(), parts.len()) {
        ("concat", None, 3) => (vec![one("concat", 0, n)], n),
        ("striped", None, 3) if n >= 2 => (vec![one("striped", 0, n)], n),
        ("raid5", None, 3) if n >= 3 => (vec![one("raid5", 0, n)], n),
        ("mirror", Some(kind), 4) if (2..=4).contains(&n) => {
            // Each plex on two drives of its own (three for a striped plex of a mixed volume,
            // whose concat plexes take two subdisks of one and a half times the size).
            let mut plexes = Vec::new();
            let mut next = 0;
            for p in 0..n {
                let org = match kind {
                    "concat" | "odd" => "concat",
                    "striped" => "striped",
                    "mixed" if p % 2 == 0 => "concat",
                    "mixed" => "striped",
                    "raid5" if p % 2 == 0 => "raid5",
                    "raid5" => "concat",
                    _ => return Err(bad()),
                };
                if kind == "odd" {
                    // Two subdisks of one and a half times the size, cut 3, 5, 7... sectors off
                    // the middle: no plex's boundary is another's, nor at a whole 4 KiB.
                    let (half, cut) = (sd * 3 / 2, (2 * p as u64 + 3) * 512);
                    plexes.push(Plex { org, subdisks: vec![(next, half - cut), (next + 1, half + cut)] });
                    next += 2;
                } else if kind == "mixed" && org == "concat" {
                    let half = sd * 3 / 2;
                    plexes.push(Plex { org, subdisks: vec![(next, half), (next + 1, half)] });
                    next += 2;
                } else if kind == "mixed" || org == "raid5" {
                    plexes.push(one(org, next, 3));
                    next += 3;
                } else {
                    plexes.push(one(org, next, 2));
                    next += 2;
                }
            }
            (plexes, next)
        }
        ("shared", Some("striped"), 4) if (2..=4).contains(&n) => {
            // n plexes over the same max(n, 3) drives, plex p starting at drive p.
            let width = n.max(3);
            let plexes = (0..n)
                .map(|p| Plex { org: "striped", subdisks: (0..width).map(|i| ((p + i) % width, sd)).collect() })
                .collect();
            (plexes, width)
        }
        _ => return Err(bad()),
    };
    let mut text = String::new();
    for d in 0..drives {
        text.push_str(&format!("drive g{d} device d{d}\n"));
    }
    text.push_str(&format!("volume {VOLUME}\n"));
    for plex in &plexes {
        match plex.org {
            "concat" => text.push_str("  plex org concat\n"),
            org => text.push_str(&format!("  plex org {org} {}k\n", stripe / KIB)),
        }
        for &(drive, len) in &plex.subdisks {
            if len % KIB == 0 {
                text.push_str(&format!("    sd length {}k drive g{drive}\n", len / KIB));
            } else {
                text.push_str(&format!("    sd length {}s drive g{drive}\n", len / 512));
            }
        }
    }
    let mut per_drive = vec![0u64; drives];
    for plex in &plexes {
        for &(drive, len) in &plex.subdisks {
            per_drive[drive] += len;
        }
    }
    let summary = format!(
        "{name}: {} plex(es) over {drives} drive(s), subdisks of {} KiB, stripes of {} KiB",
        plexes.len(),
        sd / KIB,
        stripe / KIB
    );
    Ok(VinumBuilt {
        description: text,
        drives,
        data_bytes_per_drive: per_drive.into_iter().max().unwrap_or(0),
        summary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_geometry_builds_a_description_gvinum_takes() {
        for name in ALL {
            for seed in 0..10 {
                let b = build(name, &mut SimRng::new(seed)).unwrap_or_else(|e| panic!("{e}"));
                let parsed = uraid_vinum_format::create_description::parse_create_description(&b.description)
                    .unwrap_or_else(|e| panic!("{name}: {e}\n{}", b.description));
                assert_eq!(parsed.drives.len(), b.drives, "{name}");
                assert_eq!(parsed.volumes.len(), 1, "{name}");
            }
        }
        assert!(build("vinum-raid5-2", &mut SimRng::new(1)).is_err(), "raid5 needs three subdisks");
        assert!(build("raid5-4-ls", &mut SimRng::new(1)).is_err());
    }
}
