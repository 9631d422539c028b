//! The verbs that print and change nothing: `-s`, `-S`, `-p`, `-g`, `-G`, in raidctl's words
//! (`rf_get_device_status`, `check_status`, `check_parity`, `get_component_label`,
//! `rf_output_configuration` in `raidctl.c`), and as JSON.
//!
//! Nothing runs in the background between uraid's commands, so reconstruction, parity rewrite
//! and copyback are always 100 % complete, as raidctl reports them when none is running.

use serde_json::{json, Value};
use uraid_device::OpenArray;

use super::super::raidframe_describe::{label_json, raidctl_label_text};
use super::super::{emit, err, CliResult};
use super::target::{parity_clean, unit, Target};

/// What `check_status` prints when nothing is running.
const PROGRESS: &str =
    "Reconstruction is 100% complete.\nParity Re-write is 100% complete.\nCopyback is 100% complete.\n";

fn parity_word(clean: bool) -> &'static str {
    if clean {
        "clean"
    } else {
        "DIRTY"
    }
}

/// Per column: its name in the file, and whether it is optimal (else failed, or spared when a
/// hot spare serves it).
fn columns(target: &Target, array: &OpenArray) -> Vec<(String, bool)> {
    let missing = array.missing_slots();
    let spared = spared_columns(array);
    target
        .shown
        .disks
        .iter()
        .enumerate()
        .map(|(c, name)| (name.clone(), !missing.contains(&c) && !spared.contains(&c)))
        .collect()
}

fn spared_columns(array: &OpenArray) -> Vec<usize> {
    array.raidframe().expect("a RAIDframe set").used_spares.iter().map(|&(_, c)| c).collect()
}

/// A column's status word: optimal, spared (a hot spare serves it) or failed.
fn column_status(array: &OpenArray, column: usize, optimal: bool) -> &'static str {
    if optimal {
        "optimal"
    } else if spared_columns(array).contains(&column) {
        "spared"
    } else {
        "failed"
    }
}

/// Per hot spare of the file: the column it serves, if a reconstruction put it there.
fn spare_columns(target: &Target, array: &OpenArray) -> Vec<Option<usize>> {
    let used = &array.raidframe().expect("a RAIDframe set").used_spares;
    (0..target.shown.spares.len()).map(|k| used.iter().find(|&&(s, _)| s == k).map(|&(_, c)| c)).collect()
}

/// `raidctl -s`.
pub fn status(target: &Target, json: bool) -> CliResult {
    let array = target.open(false)?;
    let set = array.raidframe().expect("a RAIDframe set");
    let labels = set.metadata().labels();
    let clean = parity_clean(&array);
    let columns = columns(target, &array);
    if json {
        let components: Vec<Value> = columns
            .iter()
            .enumerate()
            .map(|(c, (name, optimal))| {
                json!({
                    "column": c,
                    "name": name,
                    "status": column_status(&array, c, *optimal),
                    "label": labels[c].as_ref().filter(|_| *optimal).map(|l| label_json(name, l)),
                })
            })
            .collect();
        let spares: Vec<Value> = target
            .shown
            .spares
            .iter()
            .zip(spare_columns(target, &array))
            .map(|(s, serves)| match serves {
                Some(c) => json!({ "name": s, "status": "used_spare", "column": c,
                    "label": labels[c].as_ref().map(|l| label_json(s, l)) }),
                None => json!({ "name": s, "status": "spare" }),
            })
            .collect();
        let value = json!({
            "unit": unit(&array),
            "serial_number": set.serial_number() as u32,
            "components": components,
            "spares": spares,
            "parity": parity_word(clean),
            "reconstruction_percent": 100,
            "parity_rewrite_percent": 100,
            "copyback_percent": 100,
        });
        return emit(&format!("{}\n", serde_json::to_string_pretty(&value).expect("JSON")));
    }
    let mut text = String::from("Components:\n");
    for (c, (name, optimal)) in columns.iter().enumerate() {
        text.push_str(&format!("{name:>20}: {}\n", column_status(&array, c, *optimal)));
    }
    let serves = spare_columns(target, &array);
    if target.shown.spares.is_empty() {
        text.push_str("No spares.\n");
    } else {
        text.push_str("Spares:\n");
        for (s, serving) in target.shown.spares.iter().zip(&serves) {
            text.push_str(&format!("{s:>20}: {}\n", if serving.is_some() { "used_spare" } else { "spare" }));
        }
    }
    for (c, (name, optimal)) in columns.iter().enumerate() {
        match labels[c].as_ref().filter(|_| *optimal) {
            Some(label) => text.push_str(&raidctl_label_text(name, label)),
            None => {
                text.push_str(&format!("{name} status is: {}.  Skipping label.\n", column_status(&array, c, *optimal)))
            }
        }
    }
    for (s, serving) in target.shown.spares.iter().zip(&serves) {
        match serving.and_then(|c| labels[c].as_ref()) {
            Some(label) => text.push_str(&raidctl_label_text(s, label)),
            None => text.push_str(&format!("{s} status is: spare.  Skipping label.\n")),
        }
    }
    text.push_str(&format!("Parity status: {}\n{PROGRESS}", parity_word(clean)));
    emit(&text)
}

/// `raidctl -S`.
pub fn progress(target: &Target) -> CliResult {
    target.open(false)?;
    emit(PROGRESS)
}

/// `raidctl -p`: the parity status; DIRTY exits non-zero, as raidctl does.
pub fn parity(target: &Target, json: bool) -> CliResult {
    let array = target.open(false)?;
    let clean = parity_clean(&array);
    let device = format!("/dev/rraid{}d", unit(&array));
    if json {
        emit(&format!(
            "{}\n",
            serde_json::to_string_pretty(&json!({ "unit": unit(&array), "parity": parity_word(clean) })).expect("JSON")
        ))?;
    } else {
        emit(&format!("{device}: Parity status: {}\n", parity_word(clean)))?;
    }
    if !clean {
        return err(format!("{}: parity is DIRTY: rewrite it with -P or -i", target.name));
    }
    Ok(())
}

/// `raidctl -g COMPONENT`.
pub fn label(target: &Target, component: &str, json: bool) -> CliResult {
    let column = target.column_of(component)?;
    let array = target.open(false)?;
    let set = array.raidframe().expect("a RAIDframe set");
    let Some(label) = set.metadata().labels()[column].as_ref().filter(|_| !array.missing_slots().contains(&column))
    else {
        return err(format!("{component}: column {column} has failed: its label is not the set's"));
    };
    if json {
        emit(&format!("{}\n", serde_json::to_string_pretty(&label_json(component, label)).expect("JSON")))
    } else {
        emit(&raidctl_label_text(component, label))
    }
}

/// `raidctl -G`: the configuration as the driver holds it.
pub fn config(target: &Target) -> CliResult {
    let array = target.open(false)?;
    let mut config = target.shown.clone();
    // raidctl prints the queue as fifo with the configured depth, and no debug section.
    config.queue.queue_type = "fifo".into();
    config.debug.clear();
    emit(&config.to_text(Some(&format!("/dev/rraid{}d", unit(&array)))))
}
