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
/// dirty meanwhile.
fn rewrite_all(array: &mut uraid_device::OpenArray) -> CliResult {
    let size = array.size();
    let g = array.engine().geometry();
    let step = g.stripe_data_bytes().unwrap_or_else(|| g.chunk_bytes()).max(512) * 64;
    array.mark_dirty()?;
    let bar = crate::progress::bytes_bar(size, "rewrite");
    let mut at = 0;
    while at < size {
        let len = step.min(size - at);
        array.sync(at, len, true).map_err(|e| CliError(format!("rewriting parity at byte {at}: {e}")))?;
        at += len;
        if let Some(b) = &bar {
            b.set_position(at);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    array.resync_done();
    Ok(())
}
