//! The verbs that change labels and no data: `-f COMPONENT` (the column fails; the set runs
//! degraded from the next configuration on, as it would on NetBSD) and `-A` (autoconfiguration
//! and root at boot).

use uraid_raidframe::raidctl_session::{Autoconfig, LabelChange};

use super::super::{err, CliResult};
use super::session::Configured;
use super::target::{unit, Target};

/// `raidctl -f COMPONENT`: refused when the set could not run without it (RAID 0, or a
/// redundancy already used up), as the driver refuses it.
pub fn fail(target: &Target, component: &str) -> CliResult {
    let column = target.column_of(component)?;
    let mut array = target.open(true)?;
    if array.missing_slots().contains(&column) {
        return err(format!("{component}: column {column} has failed already"));
    }
    let missing = array.missing_slots();
    let alive = |c: usize| c != column && !missing.contains(&c);
    if !array.engine().geometry().is_readable(&alive) {
        return err(format!(
            "{component}: failing column {column} would leave {} without its data (no redundancy left): refused, nothing written",
            target.name
        ));
    }
    let configured = Configured::of(&array);
    array.flush()?;
    array.close()?;
    configured.unconfigure(LabelChange::Fail(column))?;
    eprintln!("uraid: {component} (column {column}) failed; the set runs without it until it is reconstructed");
    Ok(())
}

/// `raidctl -A yes|no|forceroot|softroot`, printing what raidctl prints.
pub fn autoconfig(target: &Target, word: &str) -> CliResult {
    let Some(setting) = Autoconfig::parse(word) else {
        return err(format!("-A {word}: say yes, no, forceroot (or root) or softroot"));
    };
    let array = target.open(true)?;
    let configured = Configured::of(&array);
    let raid = unit(&array);
    array.close()?;
    configured.unconfigure(LabelChange::Autoconfig(setting))?;
    let mut text = format!("raid{raid}: Autoconfigure: {}\n", if setting == Autoconfig::No { "No" } else { "Yes" });
    match setting {
        Autoconfig::ForceRoot => text.push_str(&format!("raid{raid}: Root: Force\n")),
        Autoconfig::SoftRoot => text.push_str(&format!("raid{raid}: Root: Soft\n")),
        Autoconfig::No | Autoconfig::Yes => {}
    }
    super::super::emit(&text)
}
