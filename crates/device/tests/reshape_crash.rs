//! A grow cut short at every member write it makes, as a power cut would: the members as they
//! were at that moment (every write landed) and as they were at the last flush (every write
//! since lost) must each read the array's data, and `Grow::resume_on` must finish the reshape
//! from them with the data intact and parity right everywhere. The same for a restripe on the
//! same members (another chunk size and layout).

mod common;

use std::io;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use common::{filled_members, open, pattern};
use uraid_device::reshape::{Grow, ReshapeRequest};
use uraid_device::{MemberDevice, MemoryDevice};

const MEMBER_BYTES: u64 = 4 << 20;

/// A member that stops taking writes once a budget shared by every member is spent (the power
/// cut), and keeps what it held at its last flush.
struct CutDevice {
    name: String,
    now: Mutex<Vec<u8>>,
    flushed: Mutex<Vec<u8>>,
    budget: Arc<AtomicI64>,
}

impl CutDevice {
    fn cut() -> io::Error {
        io::Error::other("power cut")
    }
}

impl MemberDevice for CutDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn size(&self) -> u64 {
        self.now.lock().unwrap().len() as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let data = self.now.lock().unwrap();
        buf.copy_from_slice(&data[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        if self.budget.fetch_sub(1, Ordering::SeqCst) <= 0 {
            return Err(CutDevice::cut());
        }
        self.now.lock().unwrap()[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        if self.budget.load(Ordering::SeqCst) <= 0 {
            return Err(CutDevice::cut());
        }
        *self.flushed.lock().unwrap() = self.now.lock().unwrap().clone();
        Ok(())
    }
}

/// A raid5 of four (and a blank fifth) holding `data`, as images.
fn raid5_with_data() -> (Vec<Vec<u8>>, Vec<u8>) {
    raid5_of(MEMBER_BYTES, 128)
}

/// [`raid5_with_data`] with members of `member_bytes` and chunks of `chunk_sectors`.
fn raid5_of(member_bytes: u64, chunk_sectors: u32) -> (Vec<Vec<u8>>, Vec<u8>) {
    let (devs, data) = filled_members(5, 4, chunk_sectors, member_bytes, 7);
    let mut images: Vec<Vec<u8>> = devs.iter().map(|d| d.snapshot()).collect();
    images.push(vec![0u8; member_bytes as usize]);
    (images, data)
}

fn cut_devices(images: &[Vec<u8>], budget: i64) -> (Vec<Arc<CutDevice>>, Arc<AtomicI64>) {
    let budget = Arc::new(AtomicI64::new(budget));
    let devs = images
        .iter()
        .enumerate()
        .map(|(i, img)| {
            Arc::new(CutDevice {
                name: format!("m{i}"),
                now: Mutex::new(img.clone()),
                flushed: Mutex::new(img.clone()),
                budget: Arc::clone(&budget),
            })
        })
        .collect();
    (devs, budget)
}

fn dyn_devs(devs: &[Arc<CutDevice>]) -> Vec<Arc<dyn MemberDevice>> {
    devs.iter().map(|d| Arc::clone(d) as Arc<dyn MemberDevice>).collect()
}

fn memory(images: Vec<Vec<u8>>) -> Vec<Arc<dyn MemberDevice>> {
    images
        .into_iter()
        .enumerate()
        .map(|(i, img)| Arc::new(MemoryDevice::from_bytes(&format!("m{i}"), img)) as Arc<dyn MemberDevice>)
        .collect()
}

/// Start the grow of the first four onto the fifth and run it until it ends or the cut.
fn grow(devs: &[Arc<CutDevice>]) -> Result<(), String> {
    let all = dyn_devs(devs);
    let request = ReshapeRequest { raid_devices: Some(5), ..ReshapeRequest::default() };
    Grow::start_reshape_on(all[..4].to_vec(), all[4..].to_vec(), request).map_err(|e| e.to_string())?;
    let mut g = Grow::resume_on(all).map_err(|e| e.to_string())?;
    while !g.step().map_err(|e| e.to_string())? {}
    Ok(())
}

/// Whatever state `images` are in, the array reads `data`; a reshape recorded in them is
/// finished; then the array reads `data` again, has five members and checks clean.
fn judge(images: Vec<Vec<u8>>, data: &[u8], what: &str) {
    judge_shape(images, data, what, (5, 128, 2));
}

/// [`judge`], the reshape to end with `shape`'s members, chunk sectors and md layout.
fn judge_shape(images: Vec<Vec<u8>>, data: &[u8], what: &str, shape: (usize, u32, i32)) {
    let mut devs = memory(images);
    if devs.len() > 4 && uraid_device::probe(devs[4].as_ref()).unwrap().is_none() {
        // Cut before the new member had its superblock: nothing was recorded.
        devs.pop();
    }
    let mut a = open(&devs, false);
    assert!(a.read(0, data.len() as u64).unwrap() == data, "{what}: read as left");
    let (reshaping, members) = (a.md().unwrap().plan.reshape.is_some(), a.md().unwrap().plan.raid_disks);
    drop(a);
    if reshaping {
        let mut g = Grow::resume_on(devs.clone()).unwrap_or_else(|e| panic!("{what}: resume: {e}"));
        while !g.step().unwrap_or_else(|e| panic!("{what}: step: {e}")) {}
    } else if members == 4 && a_md_shape(&devs) != shape {
        // Cut before the start was recorded: the array is as it was.
        return;
    }
    assert_eq!(a_md_shape(&devs), shape, "{what}");
    let mut a = open(&devs, false);
    assert!(a.read(0, data.len() as u64).unwrap() == data, "{what}: read once finished");
    assert_eq!(a.sync(0, a.size(), false).unwrap(), 0, "{what}: mismatches once finished");
}

/// The members, chunk sectors and md layout of the array of `devs`.
fn a_md_shape(devs: &[Arc<dyn MemberDevice>]) -> (usize, u32, i32) {
    let a = open(devs, false);
    let plan = &a.md().unwrap().plan;
    (plan.raid_disks, plan.chunk_sectors, plan.layout)
}

/// Restripe the four members to chunks of 256 sectors and the right-asymmetric layout, and run
/// it until it ends or the cut.
fn restripe(devs: &[Arc<CutDevice>]) -> Result<(), String> {
    let all = dyn_devs(devs);
    let request = ReshapeRequest { raid_devices: None, layout: Some(1), chunk_sectors: Some(256), array_size: None };
    Grow::start_reshape_on(all.clone(), Vec::new(), request).map_err(|e| e.to_string())?;
    let mut g = Grow::resume_on(all).map_err(|e| e.to_string())?;
    while !g.step().map_err(|e| e.to_string())? {}
    Ok(())
}

#[test]
fn a_restripe_cut_at_any_write_is_finished_with_the_data_intact() {
    let (mut images, data) = raid5_with_data();
    images.pop();
    let shape = (4, 256, 1);
    let (devs, budget) = cut_devices(&images, i64::MAX);
    restripe(&devs).unwrap();
    let writes = i64::MAX - budget.load(Ordering::SeqCst);
    assert!(writes > 20, "{writes} writes");
    judge_shape(devs.iter().map(|d| d.now.lock().unwrap().clone()).collect(), &data, "uncut", shape);
    let start_writes = images.len() as i64;
    for cut in 0..writes {
        let (devs, _) = cut_devices(&images, cut);
        assert!(restripe(&devs).is_err(), "cut at write {cut} of {writes}");
        let flushed: Vec<Vec<u8>> = devs.iter().map(|d| d.flushed.lock().unwrap().clone()).collect();
        judge_shape(flushed, &data, &format!("cut at write {cut}, writes since the last flush lost"), shape);
        if cut >= start_writes {
            let now: Vec<Vec<u8>> = devs.iter().map(|d| d.now.lock().unwrap().clone()).collect();
            judge_shape(now, &data, &format!("cut at write {cut}, every write landed"), shape);
        }
    }
}

#[test]
fn a_grow_cut_at_any_write_is_finished_with_the_data_intact() {
    let (images, data) = raid5_with_data();
    // How many writes a whole grow makes.
    let (devs, budget) = cut_devices(&images, i64::MAX);
    grow(&devs).unwrap();
    let writes = i64::MAX - budget.load(Ordering::SeqCst);
    assert!(writes > 20, "{writes} writes");
    judge(devs.iter().map(|d| d.now.lock().unwrap().clone()).collect(), &data, "uncut");
    // The superblock writes that start the grow go to every member one after the other; a cut
    // among them is judged from the last flush only (as with mdadm, members written and not
    // written would disagree on the member count).
    let start_writes = images.len() as i64;
    for cut in 0..writes {
        let (devs, _) = cut_devices(&images, cut);
        assert!(grow(&devs).is_err(), "cut at write {cut} of {writes}");
        let flushed: Vec<Vec<u8>> = devs.iter().map(|d| d.flushed.lock().unwrap().clone()).collect();
        judge(flushed, &data, &format!("cut at write {cut}, writes since the last flush lost"));
        if cut >= start_writes {
            let now: Vec<Vec<u8>> = devs.iter().map(|d| d.now.lock().unwrap().clone()).collect();
            judge(now, &data, &format!("cut at write {cut}, every write landed"));
        }
    }
}

/// A client write made while the reshape runs (as a server makes them between steps), then a
/// flush: acknowledged once both are done.
struct ClientWrite {
    offset: u64,
    data: Vec<u8>,
}

/// The client write made after reshape step `step` (position `position`, recorded `recorded`):
/// by turns just below the position, where the reshape has moved data it has not recorded yet
/// (or just below the record when the two are level), ahead of the position in the old shape,
/// and far below in the new shape; some unaligned to a chunk.
fn client_write(step: u64, position: u64, recorded: u64, size: u64) -> Option<ClientWrite> {
    let len = if step.is_multiple_of(2) { 8192 } else { 4096 + 512 };
    let offset = match step % 3 {
        0 if position > recorded + len => position - len - 512,
        0 => recorded.checked_sub(len)?,
        1 => position + 70_000,
        _ => (position / 3) & !511,
    };
    (offset + len <= size).then(|| ClientWrite { offset, data: pattern(100 + step, len as usize) })
}

/// Start the grow of the first four onto the fifth and run it, a client write and flush after
/// every step, until it ends or the cut; `acked` gathers the client writes acknowledged, and
/// `in_flight` is the one the cut fell in, if any.
fn grow_written(
    devs: &[Arc<CutDevice>],
    acked: &mut Vec<ClientWrite>,
    in_flight: &mut Option<ClientWrite>,
) -> Result<(), String> {
    let all = dyn_devs(devs);
    let request = ReshapeRequest { raid_devices: Some(5), ..ReshapeRequest::default() };
    Grow::start_reshape_on(all[..4].to_vec(), all[4..].to_vec(), request).map_err(|e| e.to_string())?;
    let mut g = Grow::resume_on(all).map_err(|e| e.to_string())?;
    let mut step = 0;
    while !g.step().map_err(|e| e.to_string())? {
        step += 1;
        let Some(w) = client_write(step, g.progress().0, g.recorded(), g.serving_size()) else { continue };
        let done = g.write(w.offset, bytes::Bytes::from(w.data.clone())).and_then(|()| g.flush());
        if let Err(e) = done {
            *in_flight = Some(w);
            return Err(e.to_string());
        }
        acked.push(w);
    }
    Ok(())
}

/// `read` holds `data` with the writes `acked` made, and `in_flight` made in part: each of its
/// sectors old or new.
fn holds(read: &[u8], data: &[u8], acked: &[ClientWrite], in_flight: &Option<ClientWrite>, what: &str) {
    let mut want = data.to_vec();
    for w in acked {
        want[w.offset as usize..w.offset as usize + w.data.len()].copy_from_slice(&w.data);
    }
    if let Some(w) = in_flight {
        let at = w.offset as usize;
        for (i, sector) in w.data.chunks(512).enumerate() {
            let range = at + i * 512..at + i * 512 + sector.len();
            if read[range.clone()] == *sector {
                want[range].copy_from_slice(sector);
            }
        }
    }
    if let Some(first) = (0..want.len()).find(|&i| read[i] != want[i]) {
        panic!("{what}: byte {first} differs from what was written");
    }
}

/// Like [`judge`], with client writes: the array reads what they wrote (acknowledged ones in
/// full), the same once the reshape is finished, and parity checks out once any resync owed is
/// done (a write cut short leaves the array dirty, never clean with bad parity).
fn judge_written(
    images: Vec<Vec<u8>>,
    data: &[u8],
    acked: &[ClientWrite],
    in_flight: &Option<ClientWrite>,
    what: &str,
) {
    let mut devs = memory(images);
    if uraid_device::probe(devs[4].as_ref()).unwrap().is_none() {
        devs.pop();
    }
    let mut a = open(&devs, false);
    let left = a.read(0, data.len() as u64).unwrap();
    holds(&left, data, acked, in_flight, &format!("{what}: read as left"));
    let (reshaping, members) = (a.md().unwrap().plan.reshape.is_some(), a.md().unwrap().plan.raid_disks);
    drop(a);
    if reshaping {
        let mut g = Grow::resume_on(devs.clone()).unwrap_or_else(|e| panic!("{what}: resume: {e}"));
        while !g.step().unwrap_or_else(|e| panic!("{what}: step: {e}")) {}
    } else if members == 4 {
        return;
    }
    let mut a = open(&devs, false);
    assert_eq!(a.md().unwrap().plan.raid_disks, 5, "{what}");
    assert!(a.read(0, data.len() as u64).unwrap() == left, "{what}: the finished reshape changed the data");
    let clean = a.md().unwrap().plan.clean;
    let mismatches = a.sync(0, a.size(), false).unwrap();
    if clean {
        assert_eq!(mismatches, 0, "{what}: mismatches in an array recorded clean");
    } else {
        drop(a);
        let mut a = open(&devs, true);
        a.sync(0, a.size(), true).unwrap();
        assert_eq!(a.sync(0, a.size(), false).unwrap(), 0, "{what}: mismatches after the resync");
        assert!(a.read(0, data.len() as u64).unwrap() == left, "{what}: the resync changed the data");
    }
}

#[test]
fn a_grow_with_client_writes_cut_at_any_write_keeps_every_acknowledged_write() {
    // Smaller than the other test's array, with smaller chunks, so as many steps take less time.
    let (images, data) = raid5_of(3 << 20, 64);
    let (devs, budget) = cut_devices(&images, i64::MAX);
    let (mut acked, mut in_flight) = (Vec::new(), None);
    grow_written(&devs, &mut acked, &mut in_flight).unwrap();
    let writes = i64::MAX - budget.load(Ordering::SeqCst);
    assert!(acked.len() > 20, "{} client writes", acked.len());
    judge_written(devs.iter().map(|d| d.now.lock().unwrap().clone()).collect(), &data, &acked, &None, "uncut");
    let start_writes = images.len() as i64;
    for cut in 0..writes {
        let (devs, _) = cut_devices(&images, cut);
        let (mut acked, mut in_flight) = (Vec::new(), None);
        assert!(grow_written(&devs, &mut acked, &mut in_flight).is_err(), "cut at write {cut} of {writes}");
        let flushed: Vec<Vec<u8>> = devs.iter().map(|d| d.flushed.lock().unwrap().clone()).collect();
        let what = format!("cut at write {cut}, writes since the last flush lost");
        judge_written(flushed, &data, &acked, &in_flight, &what);
        if cut >= start_writes {
            let now: Vec<Vec<u8>> = devs.iter().map(|d| d.now.lock().unwrap().clone()).collect();
            judge_written(now, &data, &acked, &in_flight, &format!("cut at write {cut}, every write landed"));
        }
    }
}

/// A raid5 of four with `version` metadata whose data offset cannot move (1.0: its superblock
/// at the end, no room before the data; 0.90: no data offset recorded at all) holding `data`,
/// and a blank fifth, as images: its grow runs in place.
fn raid5_in_place(version: uraid_md_format::MetadataVersion) -> (Vec<Vec<u8>>, Vec<u8>) {
    let array =
        uraid_testkit::NewMdArray { chunk_sectors: 128, version, ..uraid_testkit::NewMdArray::new(5, 4, MEMBER_BYTES) };
    let devs: Vec<Arc<dyn MemberDevice>> = memory(array.images());
    let mut a = open(&devs, true);
    let data = pattern(11, a.size() as usize);
    a.write(0, data.clone()).unwrap();
    a.close().unwrap();
    let mut images: Vec<Vec<u8>> = devs
        .iter()
        .map(|d| {
            let mut img = vec![0u8; d.size() as usize];
            d.read_at(0, &mut img).unwrap();
            img
        })
        .collect();
    images.push(vec![0u8; MEMBER_BYTES as usize]);
    (images, data)
}

/// Whatever state `images` of an in-place grow are in: read as left, the array gives `data`, or,
/// inside the critical section, refuses to be read until the reshape is taken up (which mends
/// it from the backup, after which it reads `data`); finished, it reads `data`, has five members
/// and checks clean.
fn judge_in_place(images: Vec<Vec<u8>>, data: &[u8], what: &str) {
    let mut devs = memory(images);
    if uraid_device::probe(devs[4].as_ref()).unwrap().is_none() {
        devs.pop();
    }
    let boxed: Vec<Box<dyn MemberDevice>> =
        devs.iter().map(|d| Box::new(Arc::clone(d)) as Box<dyn MemberDevice>).collect();
    let reshaping = match uraid_device::OpenArray::assemble(boxed, false) {
        Ok(mut a) => {
            assert!(a.read(0, data.len() as u64).unwrap() == data, "{what}: read as left");
            a.md().unwrap().plan.reshape.is_some()
        }
        Err(e) => {
            assert!(e.to_string().contains("critical section"), "{what}: {e}");
            true
        }
    };
    if !reshaping && devs.len() == 4 {
        // Cut before the start was recorded: the array is as it was.
        assert_eq!(a_md_shape(&devs), (4, 128, 2), "{what}");
        return;
    }
    if reshaping {
        let mut g = Grow::resume_on(devs.clone()).unwrap_or_else(|e| panic!("{what}: resume: {e}"));
        assert!(g.read(0, data.len() as u64).unwrap().to_vec() == data, "{what}: read once taken up");
        while !g.step().unwrap_or_else(|e| panic!("{what}: step: {e}")) {}
    }
    assert_eq!(a_md_shape(&devs), (5, 128, 2), "{what}");
    let mut a = open(&devs, false);
    assert!(a.read(0, data.len() as u64).unwrap() == data, "{what}: read once finished");
    assert_eq!(a.sync(0, a.size(), false).unwrap(), 0, "{what}: mismatches once finished");
}

#[test]
fn a_grow_in_place_cut_at_any_write_is_mended_from_its_backup_with_the_data_intact() {
    for version in [uraid_md_format::MetadataVersion::V1_0, uraid_md_format::MetadataVersion::V0_90] {
        grow_in_place_cut_everywhere(version);
    }
}

/// The refusals of a grow in place, nothing written: an added member too small to hold the
/// critical section's backup; and a reshape stopped inside that section whose backup is gone
/// (its header wiped), which mdadm refuses too ("Failed to find backup of critical section").
#[test]
fn a_grow_in_place_without_room_or_without_its_backup_is_refused_writing_nothing() {
    let (mut images, _) = raid5_in_place(uraid_md_format::MetadataVersion::V1_0);
    let request = ReshapeRequest { raid_devices: Some(5), ..ReshapeRequest::default() };
    // A fifth member of 1 MiB, far smaller than what the array uses of each member.
    let small = memory(images.iter().take(4).cloned().chain([vec![0u8; 1 << 20]]).collect());
    let before: Vec<Vec<u8>> = images.iter().take(4).cloned().collect();
    let e = Grow::start_reshape_on(small[..4].to_vec(), small[4..].to_vec(), request).err().expect("refused");
    assert!(e.to_string().contains("too small"), "{e}");
    for (d, img) in small[..4].iter().zip(&before) {
        let mut now = vec![0u8; img.len()];
        d.read_at(0, &mut now).unwrap();
        assert!(now == *img, "{}: written by a refused grow ({e})", d.name());
    }

    // Cut inside the critical section (after the backup and the superblocks, two steps in),
    // then the backup's header wiped.
    let writes_to_section = 5 + 5 + 2 * 5;
    let (devs, _) = cut_devices(&images, writes_to_section);
    assert!(grow(&devs).is_err());
    images = devs.iter().map(|d| d.now.lock().unwrap().clone()).collect();
    let sb =
        uraid_device::probe(&MemoryDevice::from_bytes("m4", images[4].clone())).unwrap().unwrap().superblock.info();
    assert_eq!(sb.reshape.map(|r| r.position), Some(0), "cut inside the section");
    let at = uraid_md_format::backup::header_sector(0, sb.component_sectors).unwrap() as usize * 512;
    images[4][at..at + 512].fill(0);
    let left = memory(images.clone());
    let e = Grow::resume_on(left.clone()).err().expect("refused").to_string();
    assert!(e.contains("inside its critical section") && e.contains("no backup of it was found"), "{e}");
    for (d, img) in left.iter().zip(&images) {
        let mut now = vec![0u8; img.len()];
        d.read_at(0, &mut now).unwrap();
        assert!(now == *img, "{}: written by a refused resume", d.name());
    }
}

fn grow_in_place_cut_everywhere(version: uraid_md_format::MetadataVersion) {
    let (images, data) = raid5_in_place(version);
    let (devs, budget) = cut_devices(&images, i64::MAX);
    grow(&devs).unwrap();
    let writes = i64::MAX - budget.load(Ordering::SeqCst);
    assert!(writes > 20, "{writes} writes");
    judge_in_place(devs.iter().map(|d| d.now.lock().unwrap().clone()).collect(), &data, &format!("{version}: uncut"));
    // Once started, past the critical section: the data offset stayed 0, and the section was
    // backed up on the fifth member, then forgotten (its header's length 0). (The reshape
    // overwrites the backup area last.)
    let (devs, _) = cut_devices(&images, i64::MAX);
    let all = dyn_devs(&devs);
    let request = ReshapeRequest { raid_devices: Some(5), ..ReshapeRequest::default() };
    let g = Grow::start_reshape_on(all[..4].to_vec(), all[4..].to_vec(), request).unwrap();
    assert_eq!(g.recorded(), 768 << 10, "3 rows of 4 chunks of 64K");
    let fifth = devs[4].now.lock().unwrap().clone();
    let sb = uraid_device::probe(&MemoryDevice::from_bytes("m4", fifth.clone())).unwrap().unwrap().superblock.info();
    assert_eq!(sb.data_offset, 0);
    let at = uraid_md_format::backup::header_sector(0, sb.component_sectors).unwrap() as usize * 512;
    let header = uraid_md_format::backup::BackupHeader::parse(&fifth[at..at + 512]).expect("a backup header");
    assert_eq!((header.length, header.covers()), (0, None), "forgotten once past the critical section");
    // The backup comes first (a step of 256K at a time, then its two headers), then the
    // superblocks that start the grow, one per member: a cut among those is judged from the
    // last flush only, as in the grow that moves the data offset.
    let backup_writes = (768 / 256) + 2;
    let start_writes = backup_writes..backup_writes + images.len() as i64;
    // Every cut through the critical section and well past it (the section's 3 steps, its
    // record and the backup forgotten take about 35 writes); from there on the grow is the
    // one `a_grow_cut_at_any_write_is_finished_with_the_data_intact` cuts everywhere.
    for cut in 0..writes.min(100) {
        let (devs, _) = cut_devices(&images, cut);
        assert!(grow(&devs).is_err(), "cut at write {cut} of {writes}");
        let flushed: Vec<Vec<u8>> = devs.iter().map(|d| d.flushed.lock().unwrap().clone()).collect();
        judge_in_place(flushed, &data, &format!("{version}: cut at write {cut}, writes since the last flush lost"));
        if !start_writes.contains(&cut) {
            let now: Vec<Vec<u8>> = devs.iter().map(|d| d.now.lock().unwrap().clone()).collect();
            judge_in_place(now, &data, &format!("{version}: cut at write {cut}, every write landed"));
        }
    }
}
