//! `-i` (rewrite all parity, or mirror copies) and `-P` (rewrite only if not known clean),
//! through the engine: every stripe is read and its parity (or second copy) written from its
//! data, with a progress bar on a terminal, then the set is recorded clean, with the labels
//! NetBSD leaves after `raidctl -i` and `-u`. RAID 0 has nothing to rewrite; its labels are
//! recorded clean, as NetBSD's `-i` records them.

use uraid_raidframe::raidctl_session::LabelChange;
use uraid_raidframe_format::mapping::Level;

use super::super::{emit, err, CliError, CliResult};
use super::session::Configured;
use super::target::{unit, Target};

pub fn run(target: &Target, only_if_dirty: bool, verbose: bool) -> CliResult {
    let mut array = target.open(true)?;
    let configured = Configured::of(&array);
    let device = format!("/dev/rraid{}d", unit(&array));
    if only_if_dirty {
        if configured.parity_good() {
            // Nothing to do, and nothing is written.
            return emit(&format!("{device}: Parity status: clean\n"));
        }
        emit(&format!("{device}: Parity status: DIRTY\n{device}: Initiating re-write of parity\n"))?;
    } else {
        emit("Initiating re-write of parity\n")?;
    }
    let level = array.raidframe().expect("a RAIDframe set").plan.layout.raid_geometry().level;
    if level != Level::Raid0 {
        let missing = array.missing_slots();
        if !missing.is_empty() {
            return err(format!(
                "{}: column(s) {missing:?} failed: parity cannot be rewritten on a degraded set (reconstruct first); nothing written",
                target.name
            ));
        }
        if verbose {
            emit("Parity Re-write status:\n")?;
        }
        rewrite_all(&mut array)?;
        let clean = array.close()?;
        if !clean {
            return err(format!("{}: parity was rewritten but the set could not be recorded clean", target.name));
        }
    } else {
        array.close()?;
    }
    configured.unconfigure(LabelChange::ParityRewritten)?;
    if only_if_dirty {
        emit(&format!("{device}: Parity Re-write complete\n"))?;
    }
    Ok(())
}

/// Every stripe's redundancy written from its data, in steps of 64 stripes, the set recorded
/// dirty meanwhile. With a parity map the kernel trusts, only the regions it marks dirty
/// (`rf_paritymap_rewrite`: the others' parity is known good); without one, or with an untrusted
/// one, all of it.
fn rewrite_all(array: &mut uraid_device::OpenArray) -> CliResult {
    let size = array.size();
    let g = array.engine().geometry();
    let step = g.stripe_data_bytes().unwrap_or_else(|| g.chunk_bytes()).max(512) * 64;
    let ranges = ranges_to_rewrite(array, size);
    array.mark_dirty()?;
    let total = ranges.iter().map(|r| r.end - r.start).sum();
    let bar = crate::progress::bytes_bar(total, "rewrite");
    let mut done = 0;
    for range in ranges {
        let mut at = range.start;
        while at < range.end {
            let len = step.min(range.end - at);
            array.sync(at, len, true).map_err(|e| CliError(format!("rewriting parity at byte {at}: {e}")))?;
            at += len;
            done += len;
            if let Some(b) = &bar {
                b.set_position(done);
            }
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    array.resync_done();
    Ok(())
}

/// The logical ranges whose redundancy is to be rewritten: the parity map's dirty regions,
/// touching ones joined, or the whole set.
fn ranges_to_rewrite(array: &uraid_device::OpenArray, size: u64) -> Vec<std::ops::Range<u64>> {
    let Some(bits) = array.write_intent().filter(|b| !b.all_dirty) else {
        return std::iter::once(0..size).collect();
    };
    let mut ranges: Vec<std::ops::Range<u64>> = Vec::new();
    for region in (0..bits.chunks).filter(|&c| bits.is_dirty(c)) {
        let start = array.intent_region_start(region).min(size);
        let end = array.intent_region_start(region + 1).min(size);
        match ranges.last_mut() {
            Some(last) if last.end == start => last.end = end,
            _ if start < end => ranges.push(start..end),
            _ => {}
        }
    }
    ranges
}
