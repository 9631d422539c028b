//! What /proc/mdstat says of an md array after its size: the superblock version and the
//! personality's own words for its shape, as the kernel prints them (`md_seq_show` and each
//! personality's `status`): ` super 1.2 level 5, 512k chunk, algorithm 2`.

use uraid_layout::Level;
use uraid_md_format::MetadataVersion;

/// The text after `N blocks` in an array's /proc/mdstat entry, before its `[n/m]` slots.
pub fn shape_text(
    version: MetadataVersion,
    level: Level,
    layout: i32,
    chunk_sectors: u32,
    raid_disks: usize,
) -> String {
    // md names the superblock unless it is 0.90, the default of the old days.
    let mut out = match version {
        MetadataVersion::V0_90 => String::new(),
        v => format!(" super {v}"),
    };
    let chunk_k = chunk_sectors / 2;
    match level {
        Level::Linear => out.push_str(&format!(" {chunk_k}k rounding")),
        Level::Raid0 => out.push_str(&format!(" {chunk_k}k chunks")),
        Level::Raid1 => {}
        Level::Raid4 | Level::Raid5 | Level::Raid6 => {
            let n = match level {
                Level::Raid4 => 4,
                Level::Raid5 => 5,
                _ => 6,
            };
            out.push_str(&format!(" level {n}, {chunk_k}k chunk, algorithm {layout}"));
        }
        Level::Raid10 => {
            let near = (layout & 0xff) as usize;
            let far = ((layout >> 8) & 0xff) as usize;
            if near < raid_disks {
                out.push_str(&format!(" {chunk_k}K chunks"));
            }
            if near > 1 {
                out.push_str(&format!(" {near} near-copies"));
            }
            if far > 1 {
                let kind = if layout & 0x10000 != 0 { "offset" } else { "far" };
                out.push_str(&format!(" {far} {kind}-copies"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_level_reads_as_the_kernel_prints_it() {
        let v = MetadataVersion::V1_2;
        assert_eq!(shape_text(v, Level::Raid5, 2, 1024, 4), " super 1.2 level 5, 512k chunk, algorithm 2");
        assert_eq!(shape_text(v, Level::Raid6, 18, 128, 5), " super 1.2 level 6, 64k chunk, algorithm 18");
        assert_eq!(shape_text(v, Level::Raid1, 0, 0, 2), " super 1.2");
        assert_eq!(shape_text(v, Level::Raid0, 0, 1024, 3), " super 1.2 512k chunks");
        assert_eq!(shape_text(v, Level::Linear, 0, 0, 2), " super 1.2 0k rounding");
        assert_eq!(shape_text(v, Level::Raid10, 0x102, 1024, 4), " super 1.2 512K chunks 2 near-copies");
        assert_eq!(shape_text(v, Level::Raid10, 0x201, 128, 4), " super 1.2 64K chunks 2 far-copies");
        assert_eq!(shape_text(v, Level::Raid10, 0x10201, 128, 4), " super 1.2 64K chunks 2 offset-copies");
        // near copies on every member: no chunk size, as md says it.
        assert_eq!(shape_text(v, Level::Raid10, 0x102, 1024, 2), " super 1.2 2 near-copies");
        assert_eq!(shape_text(MetadataVersion::V0_90, Level::Raid5, 2, 128, 3), " level 5, 64k chunk, algorithm 2");
        assert_eq!(shape_text(MetadataVersion::V1_0, Level::Raid1, 0, 0, 2), " super 1.0");
    }
}
