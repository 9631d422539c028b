//! Named geometries: the levels and layouts the simulation runs, small enough for thousands of
//! seeds a minute.
//!
//! A name fixes the level, the member count and the layout (`raid5-4-ls`, `raid10-5-f2`,
//! `raid0-3-zones`, `linear-3`); the seed picks the member size (64–256 KiB) and the chunk
//! (4 or 8 KiB; raid0 also 12 KiB), so every geometry is run at several sizes.
//!
//! Name grammar: `linear-N`, `raid0-N[-zones|-zones-alt]`, `raid1-N`, `raid10-N-<n2|f2|o2|n3|...>`,
//! `raid4-N`, `raid5-N-<alg>`, `raid6-N-<alg>`, with `<alg>` one of `la ra ls rs pf pl` (md
//! layouts 0–5) and, for raid6, `ddfzr ddfnr ddfnc la6 ra6 ls6 rs6 pf6` (8–10, 16–20).

use uraid_engine::Geometry;
use uraid_layout::{
    Level, LinearLayout, ParityAlgorithm, ParityLayout, Raid0Layout, Raid0ZoneLayout, Raid10Format, Raid10Layout,
    Raid1Layout,
};

use crate::rng::SimRng;

/// The geometries the CI campaign and the long campaign cover.
pub const ALL: &[&str] = &[
    "linear-2",
    "linear-3",
    "raid0-2",
    "raid0-3",
    "raid0-3-zones",
    "raid0-4-zones-alt",
    "raid1-2",
    "raid1-3",
    "raid10-3-n2",
    "raid10-4-n2",
    "raid10-4-f2",
    "raid10-5-f2",
    "raid10-4-o2",
    "raid10-3-n3",
    "raid10-5-o3",
    "raid4-3",
    "raid4-4",
    "raid5-2-ls",
    "raid5-3-ls",
    "raid5-4-la",
    "raid5-4-ra",
    "raid5-4-ls",
    "raid5-4-rs",
    "raid5-4-pf",
    "raid5-4-pl",
    "raid5-6-la",
    "raid6-4-ls",
    "raid6-5-la",
    "raid6-5-ra",
    "raid6-5-ls",
    "raid6-5-rs",
    "raid6-5-pf",
    "raid6-5-pl",
    "raid6-5-ddfzr",
    "raid6-5-ddfnr",
    "raid6-5-ddfnc",
    "raid6-5-la6",
    "raid6-5-ra6",
    "raid6-5-ls6",
    "raid6-5-rs6",
    "raid6-5-pf6",
    "raid6-6-rs",
];

/// The level part of a geometry name: `raid5-4-ls` → `raid5`.
pub fn level_of(name: &str) -> &str {
    name.split('-').next().unwrap_or(name)
}

/// Every listed geometry of `level` (`linear`, `raid0`, `raid1`, `raid10`, `raid4`, `raid5`,
/// `raid6`), every Vinum volume for `vinum` (`crate::vinum_geometries::ALL`), or every RAIDframe
/// set for `raidframe` (`crate::raidframe_geometries::ALL`). The campaigns over all levels leave
/// the last two out: they cover md's arrays, seed by seed as before.
pub fn of_level(level: &str) -> Vec<&'static str> {
    if level == "vinum" {
        return crate::vinum_geometries::ALL.to_vec();
    }
    if level == "raidframe" {
        return crate::raidframe_geometries::ALL.to_vec();
    }
    ALL.iter().copied().filter(|n| level_of(n) == level).collect()
}

/// A geometry built for one run.
pub struct Built {
    pub geometry: Geometry,
    /// Bytes of member data per member device (the largest, where they differ).
    pub device_bytes: u64,
    /// What `mdadm --create` is told to make this geometry: md's level and layout numbers,
    /// the chunk in sectors, and each member's data size in sectors.
    pub md_level: i32,
    pub md_layout: i32,
    pub chunk_sectors: u32,
    pub member_sectors: Vec<u64>,
    /// The sizes the seed chose, for the trace.
    pub description: String,
}

fn parity_algorithm(level: Level, code: &str) -> Result<ParityAlgorithm, String> {
    let md = match code {
        "la" => 0,
        "ra" => 1,
        "ls" => 2,
        "rs" => 3,
        "pf" => 4,
        "pl" => 5,
        "ddfzr" => 8,
        "ddfnr" => 9,
        "ddfnc" => 10,
        "la6" => 16,
        "ra6" => 17,
        "ls6" => 18,
        "rs6" => 19,
        "pf6" => 20,
        other => return ParityAlgorithm::parse(level, other).map_err(|e| e.to_string()),
    };
    ParityAlgorithm::from_md(level, md).map_err(|e| e.to_string())
}

/// Build geometry `name` with sizes drawn from `rng`.
pub fn build(name: &str, rng: &mut SimRng) -> Result<Built, String> {
    let parts: Vec<&str> = name.split('-').collect();
    let bad = || format!("unknown geometry {name:?} (examples: {})", ALL[..6].join(", "));
    if parts.len() < 2 {
        return Err(bad());
    }
    let n: usize = parts[1].parse().map_err(|_| bad())?;
    let rest = parts[2..].join("-");
    let comp_kib = rng.pick(&[64u64, 64, 96, 128, 128, 160, 192, 256]);
    let comp = comp_kib * 2; // sectors
    let layout_err = |e: uraid_layout::LayoutError| format!("{name}: {e}");
    let mut member_sectors = vec![comp; n];
    let (geometry, chunk, md_layout) = match parts[0] {
        "linear" if rest.is_empty() => {
            let sizes: Vec<u64> = (0..n as u64).map(|i| comp - (i * 24) % 64).collect();
            member_sectors = sizes.clone();
            (Geometry::Linear(LinearLayout::new(&sizes, 0).map_err(layout_err)?), 0, 0)
        }
        "raid0" => {
            let chunk = rng.pick(&[8u32, 8, 16, 24]);
            let c = u64::from(chunk);
            let (sizes, zones): (Vec<u64>, Raid0ZoneLayout) = match rest.as_str() {
                "" => (vec![comp; n], Raid0ZoneLayout::Unset),
                "zones" | "zones-alt" => {
                    let sizes = (0..n as u64).map(|i| comp - ((i * 3) % 4) * c).collect();
                    let z = if rest == "zones" { Raid0ZoneLayout::Original } else { Raid0ZoneLayout::Alternate };
                    (sizes, z)
                }
                _ => return Err(bad()),
            };
            member_sectors = sizes.clone();
            let md_layout = match zones {
                Raid0ZoneLayout::Unset => 0,
                z => z.to_md(),
            };
            (Geometry::Raid0(Raid0Layout::new(&sizes, chunk, zones).map_err(layout_err)?), chunk, md_layout)
        }
        "raid1" if rest.is_empty() => (Geometry::Raid1(Raid1Layout::new(n, comp).map_err(layout_err)?), 0, 0),
        "raid10" => {
            let chunk = rng.pick(&[8u32, 8, 16]);
            let format = Raid10Format::parse(&rest).map_err(layout_err)?;
            let md_layout = format.to_md() as i32;
            (Geometry::Raid10(Raid10Layout::new(n, chunk, format, comp).map_err(layout_err)?), chunk, md_layout)
        }
        "raid4" | "raid5" | "raid6" => {
            let level = Level::parse(parts[0]).map_err(layout_err)?;
            let alg = if level == Level::Raid4 {
                if !rest.is_empty() {
                    return Err(bad());
                }
                ParityAlgorithm::from_md(level, 0).map_err(layout_err)?
            } else {
                parity_algorithm(level, &rest)?
            };
            let chunk = rng.pick(&[8u32, 8, 16]);
            let md_layout = alg.to_md() as i32;
            (Geometry::Parity(ParityLayout::new(level, alg, n, chunk, comp).map_err(layout_err)?), chunk, md_layout)
        }
        _ => return Err(bad()),
    };
    let description = format!(
        "{name}: {n} members of {comp_kib} KiB, chunk {} KiB, array {} bytes, {} bytes of data per member",
        chunk / 2,
        geometry.array_bytes(),
        geometry.member_data_bytes()
    );
    let md_level = match parts[0] {
        "linear" => -1,
        other => other.trim_start_matches("raid").parse().map_err(|_| bad())?,
    };
    Ok(Built {
        geometry,
        device_bytes: comp * 512,
        md_level,
        md_layout,
        chunk_sectors: chunk,
        member_sectors,
        description,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_geometry_builds_at_every_size() {
        for name in ALL {
            for seed in 0..20 {
                let b = build(name, &mut SimRng::new(seed)).unwrap_or_else(|e| panic!("{e}"));
                assert!(b.geometry.array_bytes() > 0, "{name}");
                assert!(b.geometry.member_data_bytes() <= b.device_bytes, "{name}");
            }
        }
        for level in ["linear", "raid0", "raid1", "raid10", "raid4", "raid5", "raid6"] {
            assert!(!of_level(level).is_empty(), "{level}");
        }
    }
}
