//! `uraid create`: write md superblocks onto existing members, then make redundancy consistent.
//!
//! The device list is mdadm's: raid slots in order, then `--spare-devices` hot spares; the word
//! `missing` leaves a slot empty, so the array starts degraded (refused when the level could not
//! run without it). What mdadm would have md do first is done here: the copies or parity that
//! are there are made consistent, except where nothing is left to compare (raid4/5 missing a
//! member, raid6 missing two), which md does not resync either.
//!
//! Order matters for safety: every check (sizes, existing superblocks, level/layout/chunk
//! validity, the layout itself) happens before the first byte is written. Superblocks go out
//! marked "resync needed"; the initial sync then makes mirrors and parity consistent, and only
//! then is the array marked clean. An interrupted create therefore leaves an array that md (or
//! uraid) knows it must resync, never one that claims a consistency it does not have.
//!
//! The initial sync reads everything but writes only what disagrees, so members that are already
//! zero (fresh `truncate -s` files) stay sparse.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use rand::RngCore;
use uraid_device::probe::md_magic_offsets;
use uraid_device::service::SpeedLimits;
use uraid_device::{probe, Member, MemberDevice, OpenArray};
use uraid_layout::{Level, ParityAlgorithm, Raid10Format};
use uraid_md::assemble::{self, AssemblyRules, Candidate};
use uraid_md_format::create::{plan_members, stored_name, ConsistencyPolicy, CreateSpec, NewMember};
use uraid_md_format::uuid::format_md;
use uraid_md_format::MetadataVersion;

use super::{err, CliError, CliResult};
use crate::report::{chunk_text, layout_name, level_name};
use crate::size::{mdadm_size, parse_size};
use crate::CreateArgs;

/// mdadm 4.2's default chunk.
const DEFAULT_CHUNK_BYTES: u64 = 512 * 1024;

pub fn run(args: &CreateArgs) -> CliResult {
    let level = Level::parse(&args.level)?;
    let raid_disks = args.raid_devices;
    if raid_disks == 0 {
        return err("--raid-devices must be at least 1");
    }
    let spares = args.spare_devices;
    if spares > 0 && matches!(level, Level::Linear | Level::Raid0) {
        return err(format!("raid level {} is incompatible with spare-devices setting", level.name()));
    }
    // mdadm's checks and words: every slot and spare is listed, `missing` included.
    let wanted = raid_disks as usize + spares as usize;
    if args.members.len() > wanted {
        return err(format!(
            "You have listed more devices ({}) than are in the array({wanted}): --raid-devices={raid_disks} plus --spare-devices={spares}",
            args.members.len()
        ));
    }
    if args.members.len() < wanted {
        return err(format!(
            "You haven't given enough devices (real or missing) to create this array: {} given, --raid-devices={raid_disks} plus --spare-devices={spares} is {wanted}",
            args.members.len()
        ));
    }
    let min = match level {
        Level::Raid4 | Level::Raid5 => 2,
        Level::Raid6 => 4,
        Level::Raid10 => 2,
        _ => 1,
    };
    if raid_disks < min {
        return err(format!("{} needs at least {min} members, {raid_disks} given", level.name()));
    }
    let version = MetadataVersion::parse(&args.metadata)?;
    let policy = consistency_policy(args, level, version)?;
    let chunk_sectors = chunk_sectors(level, args.chunk.as_deref())?;
    let bitmap = policy == ConsistencyPolicy::Bitmap;
    let bitmap_chunk = match &args.bitmap_chunk {
        Some(_) if !bitmap => return err("--bitmap-chunk needs --bitmap=internal"),
        // mdadm: a bare number is KiB.
        Some(c) => Some(parse_size(c, 1024).map_err(CliError)?),
        None => None,
    };

    // Open everything and look for existing superblocks before deciding anything. `missing`
    // (any case, as mdadm) is a word, not a file.
    let is_missing = |p: &PathBuf| p.to_str().is_some_and(|w| w.eq_ignore_ascii_case("missing"));
    let present: Vec<&PathBuf> = args.members.iter().filter(|p| !is_missing(p)).collect();
    let mut devs: Vec<Member> = Vec::new();
    for path in &present {
        devs.push(super::open_member(path, true)?);
    }
    check_distinct(&present)?;
    for dev in &devs {
        match probe(dev as &dyn MemberDevice) {
            Ok(Some(p)) if !args.force => {
                let i = p.superblock.info();
                return err(format!(
                    "{}: already holds an md {} superblock (array {}, {}); use --force to overwrite it",
                    dev.name(),
                    i.version,
                    format_md(&i.array_uuid),
                    level_name(i.level)
                ));
            }
            Err(e) if !args.force => {
                return err(format!("{e}; use --force to overwrite it"));
            }
            _ => {}
        }
    }
    let mut old_superblocks: Vec<Vec<u64>> = Vec::new();
    for d in &devs {
        old_superblocks.push(md_magic_offsets(d).map_err(|e| CliError(format!("{}: {e}", d.name())))?);
    }
    let sizes: Vec<u64> = devs.iter().map(|d| d.size()).collect();
    let layout = layout_number(level, args.layout.as_deref(), &sizes, version)?;
    let component_sectors = match &args.size {
        Some(s) => {
            let bytes = parse_size(s, 1024).map_err(CliError)?;
            if bytes % 512 != 0 || bytes == 0 {
                return err(format!("--size={s} is not a positive multiple of 512 bytes"));
            }
            Some(bytes / 512)
        }
        None => None,
    };
    let homehost = match &args.homehost {
        Some(h) => h.clone(),
        None => std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default(),
    };
    if version == MetadataVersion::V0_90 && args.name.is_some() {
        // mdadm ignores it too: 0.90 keeps no name.
        eprintln!("uraid: 0.90 metadata has no array name; --name is ignored");
    }
    let name = stored_name(&homehost, args.name.as_deref().unwrap_or("0"));
    let mut rng = rand::thread_rng();
    let mut array_uuid = [0u8; 16];
    rng.fill_bytes(&mut array_uuid);
    let mut sizes_left = sizes.iter();
    let entries: Vec<NewMember> = args
        .members
        .iter()
        .map(|p| {
            if is_missing(p) {
                NewMember::Missing
            } else {
                let mut uuid = [0u8; 16];
                rng.fill_bytes(&mut uuid);
                NewMember::Device { bytes: *sizes_left.next().expect("a size per device"), uuid }
            }
        })
        .collect();
    let ctime = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let spec = CreateSpec {
        version,
        level: level.to_md(),
        layout,
        chunk_sectors,
        raid_disks,
        array_uuid,
        name,
        ctime,
        component_sectors,
        bitmap,
        data_offset: None,
        bitmap_chunk,
    };
    let made = plan_members(&spec, policy, &entries)
        .map_err(|e| CliError(with_member_names(&e.to_string(), &args.members)))?;

    // The layout must accept this shape before anything is written. An array with no
    // redundancy left (raid4/5 missing one member, raid6 two) has nothing to sync, as in md.
    let needs_sync = !made.starts_in_sync && !args.assume_clean;
    let mut superblocks = made.superblocks.clone();
    for sb in &mut superblocks {
        sb.set_clean(!needs_sync);
    }
    let candidates: Vec<Candidate> = superblocks
        .iter()
        .zip(&devs)
        .map(|(sb, d)| Candidate { name: d.name().to_string(), info: sb.info() })
        .collect();
    let assembled = assemble::plan(&candidates)?;

    // Write: old superblocks wiped (as mdadm's create does, so a leftover of another version
    // can never be mistaken for a member later), metadata areas next, superblocks last.
    for (i, dev) in devs.iter().enumerate() {
        for &at in &old_superblocks[i] {
            dev.write_at(at, &[0u8; 4096][..4096.min((dev.size() - at) as usize)])
                .map_err(|e| CliError(format!("{}: wiping old superblock at byte {at}: {e}", dev.name())))?;
        }
        // mdadm's bitmap image (header plus every chunk dirty, so an interrupted create is
        // resynced in full by md too) or its PPL area (zeroed, an empty header first).
        for area in made.areas_for(i) {
            write_changed(dev, area.offset, &area.bytes)
                .map_err(|e| CliError(format!("{}: writing {} at byte {}: {e}", dev.name(), area.what, area.offset)))?;
        }
        let info = superblocks[i].info();
        let offset = info.super_offset * 512;
        dev.write_at(offset, &superblocks[i].to_bytes())
            .map_err(|e| CliError(format!("{}: writing superblock at byte {offset}: {e}", dev.name())))?;
        dev.flush().map_err(|e| CliError(format!("{}: flush: {e}", dev.name())))?;
    }
    drop(devs);

    // A degraded array that still owes a sync (raid1/raid10 with missing copies, raid6 missing
    // one member) is dirty and degraded until the sync below has made it consistent: md would
    // refuse to start a parity array so, and mdadm has md rebuild a good raid6 member instead.
    // Here the sync itself is what makes it consistent, so it may start it; an interrupted
    // create leaves it dirty, and assembly refuses it as md does.
    let rules =
        AssemblyRules { start_dirty_degraded: needs_sync && !made.missing_slots.is_empty(), ..Default::default() };
    let mut reopened: Vec<Box<dyn MemberDevice>> = Vec::new();
    for path in &present {
        reopened.push(Box::new(super::open_member(path, true)?));
    }
    let mut array = OpenArray::assemble_with(reopened, true, rules)?;
    if needs_sync {
        initial_sync(&mut array)?;
    }
    array.mark_clean_now()?;
    let size = array.size();
    let md = array.md().expect("an md array was created");
    let info = &md.members[md.plan.reference].info;
    println!("uraid: created {} array {}", level.name(), format_md(&assembled.array_uuid));
    println!("     Raid Level : {}", level.name());
    println!("     Array Size : {}", mdadm_size(size));
    println!("   Raid Devices : {raid_disks}");
    println!("       Metadata : {version}");
    if let Some(l) = layout_name(info.level, info.layout, info.feature_map) {
        println!("         Layout : {l}");
    }
    if chunk_sectors > 0 {
        println!("     Chunk Size : {}", chunk_text(chunk_sectors));
    }
    println!("    Data Offset : {} sectors", info.data_offset);
    if info.component_sectors > 0 {
        println!("  Used Dev Size : {} sectors", info.component_sectors);
    }
    if version != MetadataVersion::V0_90 {
        println!("           Name : {}", info.name);
    }
    println!("         Bitmap : {}", if bitmap { "internal" } else { "none" });
    println!("Consistency Policy : {}", policy.name());
    if !made.missing_slots.is_empty() {
        let list: Vec<String> = made.missing_slots.iter().map(|s| s.to_string()).collect();
        println!("          State : degraded, slot(s) {} missing", list.join(", "));
    }
    if spares > 0 {
        println!("  Spare Devices : {spares}");
    }
    for (i, m) in args.members.iter().enumerate() {
        let what = if i >= raid_disks as usize { " (spare)" } else { "" };
        println!("       member {i} : {}{what}", m.display());
    }
    // md starts the new array and, finding a slot empty and a spare at hand, rebuilds the
    // spare into it at once: so does create.
    let mut taken = Vec::new();
    while let Some(slot) = array.activate_spare()? {
        taken.push(slot);
        eprintln!("uraid: spare {} takes slot {slot}; rebuilding", array.slot_device_name(slot).unwrap_or("?"));
    }
    if !taken.is_empty() {
        super::add::rebuild(array, SpeedLimits::default(), &[])?;
    }
    Ok(())
}

/// `--consistency-policy`, checked against `--bitmap`, the level and the metadata as mdadm does
/// (PPL also for raid4 and raid6, which uraid runs but md does not).
fn consistency_policy(args: &CreateArgs, level: Level, version: MetadataVersion) -> CliResult<ConsistencyPolicy> {
    let bitmap = match args.bitmap.as_str() {
        "internal" => true,
        "none" => false,
        other => return err(format!("--bitmap={other}: only 'internal' and 'none' are supported")),
    };
    let redundant = !matches!(level, Level::Linear | Level::Raid0);
    let Some(text) = args.consistency_policy.as_deref() else {
        if bitmap && !redundant {
            return err(format!("--bitmap=internal needs a redundant level; {} has no redundancy", level.name()));
        }
        return Ok(if bitmap { ConsistencyPolicy::Bitmap } else { ConsistencyPolicy::Resync });
    };
    let Some(policy) = ConsistencyPolicy::parse(text) else {
        return err(format!("--consistency-policy={text}: expected resync, bitmap or ppl"));
    };
    if !redundant {
        return err(format!("--consistency-policy is not meaningful with {}: it has no redundancy", level.name()));
    }
    if bitmap && policy != ConsistencyPolicy::Bitmap {
        return err(format!("--bitmap=internal is not compatible with --consistency-policy={text}"));
    }
    if policy == ConsistencyPolicy::Ppl {
        if !matches!(level, Level::Raid4 | Level::Raid5 | Level::Raid6) {
            return err(format!(
                "--consistency-policy=ppl needs raid4, raid5 or raid6 (a partial parity log protects parity), not {}",
                level.name()
            ));
        }
        if version == MetadataVersion::V0_90 {
            return err("--consistency-policy=ppl needs 1.x metadata: 0.90 has no room for a partial parity log");
        }
    }
    Ok(policy)
}

/// Write `bytes` at `at`, skipping the 4 KiB blocks that already hold them (so zeroed areas of
/// fresh sparse members stay unallocated).
fn write_changed(dev: &Member, at: u64, bytes: &[u8]) -> std::io::Result<()> {
    const BLOCK: usize = 4096;
    let mut old = vec![0u8; bytes.len()];
    dev.read_at(at, &mut old)?;
    let mut i = 0;
    while i < bytes.len() {
        let end = (i + BLOCK).min(bytes.len());
        if old[i..end] != bytes[i..end] {
            // Extend the run over following blocks that differ too: one write per run.
            let mut run_end = end;
            while run_end < bytes.len() {
                let next = (run_end + BLOCK).min(bytes.len());
                if old[run_end..next] == bytes[run_end..next] {
                    break;
                }
                run_end = next;
            }
            dev.write_at(at + i as u64, &bytes[i..run_end])?;
            i = run_end;
        } else {
            i = end;
        }
    }
    Ok(())
}

/// Read every stripe (or copy), write what disagrees, with progress on a terminal.
fn initial_sync(array: &mut OpenArray) -> CliResult {
    let size = array.size();
    let step: u64 = match array.engine().geometry().stripe_data_bytes() {
        Some(w) => w * (4u64 << 20).div_ceil(w).max(1),
        None => 4 << 20,
    };
    let show = std::io::stderr().is_terminal();
    let start = Instant::now();
    let mut pos = 0;
    let mut fixed = 0;
    while pos < size {
        let n = step.min(size - pos);
        fixed += array.sync(pos, n, true)?;
        pos += n;
        if show {
            let pct = pos as f64 * 100.0 / size as f64;
            let rate = pos as f64 / start.elapsed().as_secs_f64().max(1e-3) / 1e6;
            eprint!("\ruraid: initial sync {pct:5.1}% ({rate:.0} MB/s)");
        }
    }
    if show {
        eprintln!();
    }
    if fixed > 0 {
        eprintln!("uraid: initial sync wrote {fixed} sectors of parity/copies");
    }
    Ok(())
}

fn chunk_sectors(level: Level, chunk: Option<&str>) -> CliResult<u32> {
    let bytes = match (level, chunk) {
        (Level::Raid1, Some(_)) => return err("raid1 has no chunk size"),
        (Level::Raid1, None) | (Level::Linear, None) => return Ok(0),
        (_, Some(c)) => parse_size(c, 1024).map_err(CliError)?,
        (_, None) => DEFAULT_CHUNK_BYTES,
    };
    let text = chunk.unwrap_or("512K");
    if bytes == 0 || bytes % 4096 != 0 {
        return err(format!("chunk size {text} must be a positive multiple of 4K"));
    }
    if matches!(level, Level::Raid4 | Level::Raid5 | Level::Raid6 | Level::Raid10) && !bytes.is_power_of_two() {
        return err(format!("chunk size {text} is not a power of two ({} needs one)", level.name()));
    }
    u32::try_from(bytes / 512).map_err(|_| CliError(format!("chunk size {text} is too large")))
}

fn layout_number(level: Level, layout: Option<&str>, sizes: &[u64], version: MetadataVersion) -> CliResult<i32> {
    Ok(match level {
        Level::Raid5 | Level::Raid6 => match layout {
            None => ParityAlgorithm::parse(level, "left-symmetric")?.to_md() as i32,
            Some(l) => ParityAlgorithm::parse(level, l)?.to_md() as i32,
        },
        Level::Raid4 => match layout {
            None | Some("parity-last") | Some("default") => 0,
            Some(l) => {
                return err(format!("--layout={l}: raid4 keeps parity on the last member; only parity-last is valid"))
            }
        },
        Level::Raid10 => Raid10Format::parse(layout.unwrap_or("n2"))?.to_md() as i32,
        Level::Raid0 => {
            // 0.90 records no raid0 layout: its planner wants none and checks the members.
            let equal = sizes.windows(2).all(|w| w[0] == w[1]) || version == MetadataVersion::V0_90;
            match layout {
                None if equal => -1,
                None | Some("original") => 1,
                Some("alternate") => 2,
                Some(l) => return err(format!("--layout={l}: raid0 layouts are 'original' and 'alternate'")),
            }
        }
        Level::Linear | Level::Raid1 => match layout {
            None => 0,
            Some(l) => return err(format!("--layout={l}: {} has no layouts", level.name())),
        },
    })
}

fn check_distinct(paths: &[&PathBuf]) -> CliResult {
    use std::os::unix::fs::MetadataExt;
    /// What makes two members one: a file's inode, a block device's number, an NBD export's
    /// URI as written back (two spellings of one address are not caught).
    #[derive(PartialEq)]
    enum Key {
        Node(u64, u64),
        Export(String),
    }
    let mut seen: Vec<(Key, &PathBuf)> = Vec::new();
    for p in paths {
        let key = match p.to_str().and_then(|s| uraid_nbd::client::NbdUri::parse(s).ok()) {
            Some(uri) => Key::Export(uri.to_string()),
            None => {
                let m = std::fs::metadata(p).map_err(|e| CliError(format!("{}: {e}", p.display())))?;
                if m.file_type().is_file() {
                    Key::Node(m.dev(), m.ino())
                } else {
                    Key::Node(m.rdev(), 0)
                }
            }
        };
        if let Some((_, other)) = seen.iter().find(|(k, _)| *k == key) {
            return err(format!("{} and {} are the same device", other.display(), p.display()));
        }
        seen.push((key, *p));
    }
    Ok(())
}

/// The format layer names members by index; say which file that is.
fn with_member_names(message: &str, members: &[PathBuf]) -> String {
    let mut out = message.to_string();
    for (i, m) in members.iter().enumerate().rev() {
        for word in ["member", "device"] {
            out = out.replace(&format!("{word} {i} "), &format!("{} ({word} {i}) ", m.display()));
        }
    }
    out
}
