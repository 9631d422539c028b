//! What `uraid examine` says of a gvinum drive and `uraid detail --volume` of a gvinum volume,
//! beside md's members and arrays: the drive's header and the subdisks it holds; the volume's
//! plexes and subdisks, and which of them serve.

use serde_json::{json, Value};
use uraid_device::vinum_drives::VinumDrive;
use uraid_device::OpenArray;
use uraid_vinum_format::drive_layout::DATA_START;
use uraid_vinum_format::header::HeaderLayout;
use uraid_vinum_format::Timeval;

use crate::report::ctime_text;

fn time(t: Timeval) -> String {
    if t.seconds == 0 {
        "never".to_string()
    } else {
        format!("{}.{:06}", ctime_text(t.seconds), t.microseconds)
    }
}

/// A gvinum drive as `uraid examine` prints it: its header, and the subdisks its
/// configuration places on it.
pub fn examine_drive(device: &str, size: u64, drive: &VinumDrive) -> (String, Value) {
    let h = &drive.header;
    let layout = match h.layout {
        HeaderLayout::Canonical => "canonical (VINUM-1, big-endian)",
        _ => "classic vinum (IN VINO); rewritten canonical at the next save",
    };
    let name = &h.label.name;
    let subdisks: Vec<_> = drive.config.subdisks.iter().filter(|s| &s.drive == name).collect();
    let mut text = format!(
        "{device}:\n          Format : gvinum drive, {layout}\n           Drive : {name}\n       Host name : {}\n   Date of birth : {}\n     Last update : {}\n      Media size : {size} bytes ({} after the metadata)\n        Subdisks : {}\n",
        h.label.sysname,
        time(h.label.date_of_birth),
        time(h.label.last_update),
        size.saturating_sub(DATA_START),
        subdisks.len(),
    );
    if drive.from_second_copy {
        text.push_str(
            "   Configuration : copy 2 (copy 1 cannot be read: a save cut short by a crash?)
",
        );
    }
    if h.label.last_update.marks_unclean() {
        text.push_str("           State : saved while writes were in flight (uraid's unclean mark): a mirror or raid5 volume on it is resynced when next run
");
    }
    for s in &subdisks {
        text.push_str(&format!(
            "                   {} at byte {}, {} bytes, {}{}\n",
            s.name,
            s.drive_offset,
            s.length,
            s.state,
            s.plex().map(|p| format!(", plex {p}")).unwrap_or_default()
        ));
    }
    let value = json!({
        "device": device,
        "format": "gvinum",
        "drive": name,
        "sysname": h.label.sysname,
        "date_of_birth": h.label.date_of_birth.seconds,
        "last_update": h.label.last_update.seconds,
        "canonical": h.layout == HeaderLayout::Canonical,
        "config_from_second_copy": drive.from_second_copy,
        "unclean_mark": h.label.last_update.marks_unclean(),
        "size": size,
        "subdisks": subdisks.iter().map(|s| json!({
            "name": s.name, "drive_offset": s.drive_offset, "length": s.length,
            "state": s.state.name(), "plex": s.plex(),
        })).collect::<Vec<_>>(),
    });
    (text, value)
}

/// A gvinum volume as `uraid detail --volume` prints it: what it is, its size and state, and
/// each subdisk with the device it is on and what the engine does with it.
pub fn detail_volume(array: &OpenArray) -> (String, Value) {
    let v = array.vinum().expect("a gvinum volume");
    let config = &v.plan.config;
    let state = config.volume(&v.volume).map_or("unknown".to_string(), |s| s.state.to_string());
    let states = array.engine().slot_states();
    let mut text = format!(
        "vinum volume {}:\n          Layout : {}\n      Array Size : {} bytes\n           State : {state}\n",
        v.volume,
        v.plan.layout.summary(),
        array.size(),
    );
    let mut plexes = Vec::new();
    for p in config.plexes_of(&v.volume) {
        let stripe = p.organization.stripe_size().map(|s| format!(", stripe {s} bytes")).unwrap_or_default();
        text.push_str(&format!("    Plex {} : {}{stripe}, {}\n", p.name, p.organization.name(), p.state));
        plexes.push(json!({"name": p.name, "organization": p.organization.name(),
            "stripe_size": p.organization.stripe_size(), "state": p.state.name()}));
    }
    text.push_str("\n    Slot  Subdisk              Drive        State    Device\n");
    let mut subdisks = Vec::new();
    for (slot, (sd, drive, _)) in v.plan.slots.iter().enumerate() {
        let sd_state = config.subdisk(&sd.subdisk).map_or("unknown".to_string(), |s| s.state.to_string());
        let device = drive.map(|d| v.drives[d].1.name().to_string());
        text.push_str(&format!(
            "    {slot:>4}  {:<20} {:<12} {:<8} {}\n",
            sd.subdisk,
            sd.drive,
            sd_state,
            device.as_deref().unwrap_or("(drive not found)")
        ));
        subdisks.push(json!({"slot": slot, "name": sd.subdisk, "plex": sd.plex, "drive": sd.drive,
            "drive_offset": sd.drive_offset, "used_bytes": sd.used_bytes, "state": sd_state,
            "engine_state": format!("{:?}", states[slot]), "device": device}));
    }
    let value = json!({"volume": v.volume, "layout": v.plan.layout.summary(), "size": array.size(),
        "state": state, "plexes": plexes, "subdisks": subdisks});
    (text, value)
}
