//! Grows cut short by power losses: the real reshape (`uraid_device::reshape::Grow`, which the
//! engine drives) on simulated disks whose volatile writes a crash keeps, loses or tears
//! ([`SimDisk::crash`]), crashed again and again part-way and continued from the bytes left,
//! until it finishes. Judged by what a user would see: after every crash the array reads the
//! data written before the grow, and at the end it has the new member count, the same data, and
//! parity right everywhere.
//!
//! Each seed picks a level (raid5 or raid6), a member count, a chunk, a member size and the room
//! after the data, and what the reshape changes (more members, one fewer, or a restripe on the
//! same members to another chunk size, another layout, or both; half the grows onto more members
//! on 1.0 or 0.90 metadata, which run in place, their critical section backed up on the added
//! members, and a cut inside it mended by taking the reshape up), fills the array with random
//! data, starts the reshape (its superblock writes complete: a cut among those few writes can
//! leave members disagreeing on the member count, which assembly refuses as mdadm does), then
//! cuts power after a random number of member writes, up to eight times.
//! Disks also write back parts of their caches on their own between flushes.
//!
//! [`run_seed_served`] runs the same grow as a server runs it, client writes between its steps
//! (see `uraid_device::reshape`'s online I/O), and judges every acknowledged write kept.

use std::io;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use uraid_device::reshape::{Grow, GrowError, ReshapeRequest};
use uraid_device::{MemberDevice, MemoryDevice, OpenArray};
use uraid_md_format::create::{self, CreateSpec};
use uraid_md_format::MetadataVersion;

use crate::disk::SimDisk;
use crate::rng::SimRng;

/// What one seed did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReshapeRun {
    /// md level, members before and after, chunk sectors before and after, md's layout before
    /// and after.
    pub level: i32,
    pub from: u32,
    pub to: u32,
    pub chunk_sectors: u32,
    pub new_chunk_sectors: u32,
    pub layout: i32,
    pub new_layout: i32,
    /// Power cuts during the reshape, and member writes it made in all.
    pub crashes: usize,
    pub writes: u64,
    /// The metadata: 1.2 (the data offset moves), or 1.0 or 0.90 (a grow runs in place, its
    /// critical section backed up on the added members).
    pub metadata: MetadataVersion,
}

/// A simulated disk as the reshape sees it: writes go to the disk's cache (volatile until a
/// flush), and stop once a budget shared by every disk is spent (the power cut).
struct CutDisk {
    name: String,
    disk: Arc<Mutex<SimDisk>>,
    budget: Arc<AtomicI64>,
    writes: Arc<AtomicI64>,
    rng: Arc<Mutex<SimRng>>,
}

fn cut() -> io::Error {
    io::Error::other("power cut")
}

impl MemberDevice for CutDisk {
    fn name(&self) -> &str {
        &self.name
    }

    fn size(&self) -> u64 {
        self.disk.lock().expect("disk").len()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let data = self.disk.lock().expect("disk").read(offset, buf.len() as u64).map_err(io::Error::other)?;
        buf.copy_from_slice(&data);
        Ok(())
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        if self.budget.fetch_sub(1, Ordering::SeqCst) <= 0 {
            return Err(cut());
        }
        self.writes.fetch_add(1, Ordering::SeqCst);
        let mut disk = self.disk.lock().expect("disk");
        disk.write(offset, data).map_err(io::Error::other)?;
        // Drives write back their caches on their own, oldest first.
        if self.rng.lock().expect("rng").chance(1, 6) {
            disk.destage(1);
        }
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        if self.budget.load(Ordering::SeqCst) <= 0 {
            return Err(cut());
        }
        let mut disk = self.disk.lock().expect("disk");
        let mark = disk.flush_mark();
        disk.flush_done(mark);
        Ok(())
    }
}

/// The disks' durable-or-not current bytes as in-memory members, to open the array on.
fn snapshot(disks: &[Arc<Mutex<SimDisk>>]) -> Vec<Box<dyn MemberDevice>> {
    disks
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let d = d.lock().expect("disk");
            Box::new(MemoryDevice::from_bytes(&format!("d{i}"), d.peek(0, d.len()).to_vec())) as Box<dyn MemberDevice>
        })
        .collect()
}

/// Run seed `seed`: a grow cut by power losses until it finishes, judged as the module says.
pub fn run_seed(seed: u64) -> Result<ReshapeRun, String> {
    run(seed, false)
}

/// [`run_seed`] with the grow as a server runs it: between its steps, client writes (each
/// followed by a flush, acknowledged once both are done) land anywhere in the array. After
/// every cut the array must read every acknowledged write, and each sector of a write the cut
/// fell in old or new; at the end, parity must check out once the resync an array left dirty
/// owes is done, and at once if it was left clean.
pub fn run_seed_served(seed: u64) -> Result<ReshapeRun, String> {
    run(seed, true)
}

/// A client write of a served grow: where, and the bytes.
struct ClientWrite {
    offset: u64,
    data: Vec<u8>,
}

fn run(seed: u64, served: bool) -> Result<ReshapeRun, String> {
    let mut rng = SimRng::new(seed);
    let level = if rng.chance(1, 2) { 5 } else { 6 };
    let parity = if level == 6 { 2 } else { 1 };
    let from = parity + rng.between(2, 4) as u32;
    let chunk_sectors = rng.pick(&[64u32, 128]);
    // left-symmetric, md's default.
    let layout = 2;
    // Two in five seeds add members, one removes one (run backwards, the data moving up); the
    // rest restripe on the same ones: another chunk size (halved or doubled), another layout
    // (right-asymmetric), or both.
    let (to, new_chunk_sectors, new_layout) = match rng.below(5) {
        0 | 1 => (from + rng.between(1, 2) as u32, chunk_sectors, layout),
        // (Down to three members at least; md's raid6 takes no fewer than four.)
        2 if from > parity + 2 => (from - 1, chunk_sectors, layout),
        2 | 3 => (from, chunk_sectors ^ 192, layout),
        _ => (from, if rng.chance(1, 2) { chunk_sectors ^ 192 } else { chunk_sectors }, 1),
    };
    // Half the grows onto more members are of arrays whose data offset cannot move (1.0
    // metadata, nothing before the data; 0.90, which records none): they run in place.
    let metadata = if to > from && rng.chance(1, 2) {
        rng.pick(&[MetadataVersion::V1_0, MetadataVersion::V0_90])
    } else {
        MetadataVersion::V1_2
    };
    let data_offset = if metadata == MetadataVersion::V1_2 { 2048u64 } else { 0 };
    // Whole chunks of either size; a grow in place needs members more than twice its critical
    // section (mdadm refuses a backup of half a member or more), up to 20 chunks of 64K here.
    let member_sectors = 128 * if data_offset == 0 { rng.between(48, 80) } else { rng.between(12, 40) };
    // Room after the data: none to speak of (a removal then gives up a chunk of each member),
    // some, or more than before it (a restripe then runs backwards too). 1.0 and 0.90 keep
    // their superblock at the end (in the last 8 KiB, and 64 to 128 KiB).
    let tail = rng.pick(&[0u64, 256, 2560]);
    let superblock_room = if data_offset == 0 { 256 } else { 8 };
    let member_bytes = (data_offset + member_sectors + tail + superblock_room) * 512;
    let mut uuid = [0u8; 16];
    rng.fill(&mut uuid);
    let spec = CreateSpec {
        version: metadata,
        level,
        layout,
        chunk_sectors,
        raid_disks: from,
        array_uuid: uuid,
        name: if metadata == MetadataVersion::V0_90 { String::new() } else { "sim:grow".into() },
        ctime: 1_700_000_000,
        component_sectors: Some(member_sectors),
        bitmap: false,
        data_offset: (metadata == MetadataVersion::V1_2).then_some(data_offset),
        bitmap_chunk: None,
    };
    let uuids: Vec<[u8; 16]> = (0..from).map(|i| [i as u8 + 1; 16]).collect();
    let plan = create::plan(&spec, &vec![member_bytes; from as usize], &uuids)
        .map_err(|e| format!("seed {seed}: creating the array: {e}"))?;
    // The array filled with random data, through the engine, on in-memory members.
    let mem: Vec<Arc<MemoryDevice>> = plan
        .superblocks
        .iter()
        .enumerate()
        .map(|(i, sb)| {
            let mut sb = sb.clone();
            sb.set_clean(true);
            let mut image = vec![0u8; member_bytes as usize];
            let at = sb.byte_offset() as usize;
            let bytes = sb.to_bytes();
            image[at..at + bytes.len()].copy_from_slice(&bytes);
            Arc::new(MemoryDevice::from_bytes(&format!("d{i}"), image))
        })
        .collect();
    let boxed: Vec<Box<dyn MemberDevice>> =
        mem.iter().map(|d| Box::new(Arc::clone(d)) as Box<dyn MemberDevice>).collect();
    let mut array = OpenArray::assemble(boxed, true).map_err(|e| format!("seed {seed}: {e}"))?;
    let mut data = vec![0u8; array.size() as usize];
    rng.fill(&mut data);
    array.write(0, data.clone()).map_err(|e| format!("seed {seed}: {e}"))?;
    array.close().map_err(|e| format!("seed {seed}: {e}"))?;
    let disks: Vec<Arc<Mutex<SimDisk>>> = (0..to.max(from) as usize)
        .map(|i| {
            let mut disk = SimDisk::new(i, member_bytes);
            if let Some(m) = mem.get(i) {
                disk.write_durable(0, &m.snapshot()).expect("in range");
            }
            Arc::new(Mutex::new(disk))
        })
        .collect();
    let budget = Arc::new(AtomicI64::new(i64::MAX));
    let writes = Arc::new(AtomicI64::new(0));
    let shared_rng = Arc::new(Mutex::new(rng.fork()));
    let members = || -> Vec<Arc<dyn MemberDevice>> {
        disks
            .iter()
            .enumerate()
            .map(|(i, d)| {
                Arc::new(CutDisk {
                    name: format!("d{i}"),
                    disk: Arc::clone(d),
                    budget: Arc::clone(&budget),
                    writes: Arc::clone(&writes),
                    rng: Arc::clone(&shared_rng),
                }) as Arc<dyn MemberDevice>
            })
            .collect()
    };
    let all = members();
    let mut request = ReshapeRequest {
        raid_devices: Some(to),
        layout: Some(new_layout),
        chunk_sectors: Some(new_chunk_sectors),
        array_size: None,
    };
    let (old, added) = (&all[..from as usize], &all[from.min(to) as usize..to as usize]);
    let mut started = Grow::start_reshape_on(old.to_vec(), added.to_vec(), request);
    if to < from {
        // Onto fewer members the array shrinks: refused until the size it names is given
        // back, as a user gives it (a chunk of each member less where there is no room after
        // the data, with tail 0).
        match started {
            Err(GrowError::Shrinks { after, component_cut, .. }) if (component_cut > 0) == (tail == 0) => {
                request.array_size = Some(after);
                started = Grow::start_reshape_on(old.to_vec(), added.to_vec(), request);
            }
            other => {
                let got = other.map(|_| "started").map_err(|e| e.to_string());
                return Err(format!("seed {seed}: a shrink without its size was not refused as one: {got:?}"));
            }
        }
    }
    started.map_err(|e| format!("seed {seed}: starting the grow: {e}"))?;
    let array_size = request.array_size;
    if let Some(size) = array_size {
        // What lies past the smaller array's end is given up.
        data.truncate(size as usize);
    }
    let mut crashes = 0;
    let mut client_writes = 0u64;
    loop {
        // Up to eight cuts, each after a random number of writes; then it runs to its end.
        let allowance = if crashes < 8 { rng.between(1, 120) as i64 } else { i64::MAX };
        budget.store(allowance, Ordering::SeqCst);
        let mut in_flight: Option<ClientWrite> = None;
        let outcome = (|| -> Result<(), String> {
            let mut grow = Grow::resume_on(members()).map_err(|e| e.to_string())?;
            while !grow.step().map_err(|e| e.to_string())? {
                if !served || !rng.chance(1, 2) {
                    continue;
                }
                let size = grow.serving_size();
                let len = 512 * rng.between(1, 128);
                let offset = 512 * rng.below((size - len) / 512 + 1);
                let mut bytes = vec![0u8; len as usize];
                rng.fill(&mut bytes);
                in_flight = Some(ClientWrite { offset, data: bytes });
                let w = in_flight.as_ref().expect("just set");
                grow.write(w.offset, bytes::Bytes::from(w.data.clone()))
                    .and_then(|()| grow.flush())
                    .map_err(|e| e.to_string())?;
                let w = in_flight.take().expect("just set");
                data[w.offset as usize..(w.offset + w.data.len() as u64) as usize].copy_from_slice(&w.data);
                client_writes += 1;
            }
            Ok(())
        })();
        match outcome {
            Ok(()) => break,
            Err(e) if budget.load(Ordering::SeqCst) <= 0 => {
                let _ = e;
                crashes += 1;
                for d in &disks {
                    d.lock().expect("disk").crash(&mut rng, &[]);
                }
                // What a user finds after the cut: the data, read through whatever shape. Cut
                // inside a grow in place's critical section, the array is refused until the
                // reshape is taken up, which mends the section from its backup (as mdadm
                // --assemble does): so a user continues it, and reads it then.
                let mut assembled = OpenArray::assemble(snapshot(&disks), false);
                if let Err(uraid_device::OpenError::CriticalSection(_)) = assembled {
                    budget.store(i64::MAX, Ordering::SeqCst);
                    Grow::resume_on(members())
                        .map_err(|e| format!("seed {seed}: after cut {crashes}: mending: {e}"))?;
                    assembled = OpenArray::assemble(snapshot(&disks), false);
                }
                let mut array = assembled.map_err(|e| format!("seed {seed}: after cut {crashes}: assembling: {e}"))?;
                let read =
                    array.read(0, data.len() as u64).map_err(|e| format!("seed {seed}: after cut {crashes}: {e}"))?;
                // The write the cut fell in: each sector old or new; what it left is the data
                // from here on.
                if let Some(w) = in_flight.take() {
                    for (i, sector) in w.data.chunks(512).enumerate() {
                        let at = w.offset as usize + i * 512;
                        if read[at..at + 512] == *sector {
                            data[at..at + 512].copy_from_slice(sector);
                        }
                    }
                }
                if read != data {
                    let first = (0..data.len()).find(|&i| read[i] != data[i]).unwrap_or(0);
                    return Err(format!(
                        "seed {seed}: after cut {crashes}: the array does not read the data written (byte {first} differs)"
                    ));
                }
                // A cut after the final superblocks were written (at their flush) ends it.
                let md = array.md().expect("an md array");
                if md.plan.reshape.is_none() && md.plan.raid_disks == to as usize {
                    break;
                }
            }
            Err(e) => return Err(format!("seed {seed}: the grow failed without a cut: {e}")),
        }
    }
    // Members that missed the final superblock get it, as `uraid grow --continue` gives it.
    budget.store(i64::MAX, Ordering::SeqCst);
    Grow::settle_end(members()).map_err(|e| format!("seed {seed}: settling the end: {e}"))?;
    let finals: Vec<u64> = disks
        .iter()
        .map(|d| {
            let d = d.lock().expect("disk");
            let found =
                uraid_md_format::Superblock::find(d.len(), |at, len| Ok::<_, ()>(d.peek(at, len as u64).to_vec()));
            found.ok().flatten().map_or(0, |sb| sb.info().data_offset)
        })
        .collect();
    if finals.iter().any(|&o| o != finals[0]) {
        return Err(format!("seed {seed}: the members end with different data offsets: {finals:?}"));
    }
    let mut array =
        OpenArray::assemble(snapshot(&disks), false).map_err(|e| format!("seed {seed}: at the end: {e}"))?;
    let md = array.md().expect("an md array");
    if md.plan.reshape.is_some() || md.plan.raid_disks != to as usize {
        return Err(format!("seed {seed}: the grow did not end with {to} members"));
    }
    if (md.plan.chunk_sectors, md.plan.layout) != (new_chunk_sectors, new_layout) {
        return Err(format!(
            "seed {seed}: the reshape ended with chunk {} and layout {}, not {new_chunk_sectors} and {new_layout}",
            md.plan.chunk_sectors, md.plan.layout
        ));
    }
    let clean = md.plan.clean;
    let read = array.read(0, data.len() as u64).map_err(|e| format!("seed {seed}: at the end: {e}"))?;
    if read != data {
        return Err(format!("seed {seed}: at the end the array does not read the data written before the grow"));
    }
    let mismatches = array.sync(0, array.size(), false).map_err(|e| format!("seed {seed}: checking: {e}"))?;
    if clean && mismatches != 0 {
        return Err(format!("seed {seed}: {mismatches} sectors of parity wrong at the end"));
    }
    if !clean {
        // Left dirty by client writes: the resync owed, then parity must check out and the
        // data stay as it was.
        drop(array);
        let mut array =
            OpenArray::assemble(snapshot(&disks), true).map_err(|e| format!("seed {seed}: resyncing: {e}"))?;
        array.sync(0, array.size(), true).map_err(|e| format!("seed {seed}: resyncing: {e}"))?;
        let after = array.sync(0, array.size(), false).map_err(|e| format!("seed {seed}: checking: {e}"))?;
        if after != 0 {
            return Err(format!("seed {seed}: {after} sectors of parity wrong after the resync"));
        }
        let read = array.read(0, data.len() as u64).map_err(|e| format!("seed {seed}: after the resync: {e}"))?;
        if read != data {
            return Err(format!("seed {seed}: the resync changed the data"));
        }
    }
    if served && client_writes == 0 {
        return Err(format!("seed {seed}: no client write was made"));
    }
    Ok(ReshapeRun {
        level,
        from,
        to,
        chunk_sectors,
        new_chunk_sectors,
        layout,
        new_layout,
        crashes,
        writes: writes.load(Ordering::SeqCst) as u64,
        metadata,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_cut_by_power_losses_lose_nothing() {
        let (mut crashes, mut grown, mut shrunk, mut rechunked, mut relaid, mut in_place) = (0, 0, 0, 0, 0, 0);
        for seed in 0..24 {
            let run = run_seed(seed).unwrap_or_else(|e| panic!("{e}"));
            in_place += usize::from(run.metadata != MetadataVersion::V1_2);
            assert!(run.to != run.from || run.new_chunk_sectors != run.chunk_sectors || run.new_layout != run.layout);
            grown += usize::from(run.to > run.from);
            shrunk += usize::from(run.to < run.from);
            rechunked += usize::from(run.new_chunk_sectors != run.chunk_sectors);
            relaid += usize::from(run.new_layout != run.layout);
            crashes += run.crashes;
        }
        assert!(crashes >= 24 * 4, "the seeds cut power often: {crashes}");
        assert!(
            grown > 0 && shrunk > 0 && rechunked > 0 && relaid > 0 && in_place > 0,
            "every kind of reshape: {grown} {shrunk} {rechunked} {relaid} {in_place}"
        );
    }

    #[test]
    fn served_grows_cut_by_power_losses_keep_every_acknowledged_write() {
        let (mut crashes, mut in_place) = (0, 0);
        for seed in 0..24 {
            let run = run_seed_served(seed).unwrap_or_else(|e| panic!("{e}"));
            crashes += run.crashes;
            in_place += usize::from(run.metadata != MetadataVersion::V1_2);
        }
        assert!(crashes >= 24 * 4, "the seeds cut power often: {crashes}");
        assert!(in_place > 0, "grows in place among the seeds");
    }
}
