//! The partial parity log (md's PPL) as the engine sees it: which log entries describe a stripe
//! write, and how a log is replayed after a crash. Pure; the log machinery that orders log
//! writes before data writes lives in the array (`array/logging.rs`).
//!
//! Why PPL closes the write hole: before the data and parity of a partial-stripe write go out,
//! the XOR of the data chunks the write does *not* touch ("partial parity") is written durably
//! to the log on the stripe's parity member. After a crash, XORing that partial parity with
//! whatever the touched chunks now hold gives parity consistent with the stripe as it is on
//! disk, whichever of the writes landed. So an untouched chunk on a missing member can again be
//! rebuilt right. A chunk that was being written while its own member is missing cannot be
//! helped by any log short of a data journal; it reads back as something, not necessarily the
//! old or the new data (md behaves the same).
//!
//! Format: md's (`raid5-ppl.c`), so a raid5 array moves between the kernel and uraid with its
//! log. An entry describes a rectangle of one stripe: rows `[row, row+strip)` of `n` data
//! chunks that follow each other in array order, starting at array sector `data_sector`;
//! `data_size` is `n * strip`, `pp_size` the partial parity (`strip` bytes, or 0 when all data
//! chunks of those rows are written). For raid4 and raid6 uraid uses the same log as its own
//! extension (md's kernel refuses PPL there): raid4 exactly like raid5, raid6 with the partial
//! Q syndrome after the partial P, so `pp_size` is `2 * strip` unless the rows are full. A raid6
//! entry (whose `parity_disk` is still P's slot) is written to the logs of both parity members,
//! P and Q: a raid6 array survives the loss of either, and the entry must too, since the other
//! syndrome is what a second missing member is rebuilt through. [`replay`] applies such an
//! entry once.

use uraid_layout::StripeRoles;
use uraid_md_format::ppl::{pp_checksum, PplEntry, PplHeader, HEADER_BYTES, MAX_ENTRIES};

use crate::geometry::{Geometry, SECTOR_BYTES};
use crate::member_io::MemberIoError;
use crate::slot::SlotState;

/// The row granularity of partial parity: one sector. md logs whole 4 KiB stripe pages, and its
/// recovery reads entries sector by sector when they are not page aligned, so finer entries
/// replay the same in the kernel. They matter on a degraded array: with a page as the unit, the
/// untouched sectors of a page being partly written on the missing member would be rebuilt from
/// parity the log cannot make right again.
pub const ROW_BYTES: u64 = SECTOR_BYTES;

/// How an array logs partial parity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PplConfig {
    /// md's signature for the array (`uraid_md_format::ppl::signature` of the array uuid).
    pub signature: u32,
    /// Bytes of the log area on every member, header included.
    pub area_bytes: u64,
}

impl PplConfig {
    /// Partial-parity bytes one log write may carry: the area after the header, in whole rows.
    pub fn space(&self) -> u64 {
        self.area_bytes.saturating_sub(HEADER_BYTES as u64) / ROW_BYTES * ROW_BYTES
    }
}

/// Whether the geometry keeps a Q syndrome (raid6): its entries carry partial Q too.
fn has_q(geometry: &Geometry) -> bool {
    geometry.stripe_roles(0).q.is_some()
}

/// Partial-parity bytes per row of an entry that is not a full-row write.
pub fn pp_per_row(geometry: &Geometry) -> u64 {
    if has_q(geometry) {
        2 * ROW_BYTES
    } else {
        ROW_BYTES
    }
}

/// What one stripe write changes, as the log needs it.
#[derive(Debug, Clone, Copy)]
pub struct StripeChange<'a> {
    pub stripe: u64,
    /// The member rows written: whole sectors, inside the chunk.
    pub lo: u64,
    pub hi: u64,
    /// `modified[d]`, per row of `lo..hi`: whether the write changes data chunk `d` (array
    /// order) in that row.
    pub modified: &'a [Vec<bool>],
    /// Data chunk `d`'s new contents over `lo..hi`, where it is modified.
    pub new_data: &'a [Option<&'a [u8]>],
    /// The new P and Q over `lo..hi`.
    pub p: &'a [u8],
    pub q: Option<&'a [u8]>,
}

/// Log entries for one stripe write. Partial parity of a row is the parity of the chunks it
/// leaves alone, computed as new parity minus the new data of the chunks it changes.
pub fn stripe_entries(geometry: &Geometry, change: &StripeChange) -> (Vec<PplEntry>, Vec<u8>) {
    let StripeChange { stripe, lo, hi, modified, new_data, p, q } = *change;
    assert!(lo.is_multiple_of(ROW_BYTES) && hi.is_multiple_of(ROW_BYTES) && lo < hi, "rows must be whole sectors");
    let roles = geometry.stripe_roles(stripe);
    let chunk = geometry.chunk_bytes();
    let width = geometry.stripe_data_bytes().expect("parity geometry");
    let rows = ((hi - lo) / ROW_BYTES) as usize;
    let data_disks = roles.data.len();
    // Per row: the first modified data chunk and how many follow it.
    let span = |row: usize| -> Option<(usize, usize)> {
        let first = (0..data_disks).find(|&d| modified[d][row])?;
        let count = (first..data_disks).take_while(|&d| modified[d][row]).count();
        debug_assert!(
            (first + count..data_disks).all(|d| !modified[d][row]),
            "one request changes neighbouring chunks of a row"
        );
        Some((first, count))
    };
    let mut entries: Vec<PplEntry> = Vec::new();
    let mut pp_all: Vec<u8> = Vec::new();
    let mut row = 0;
    while row < rows {
        let Some((first, count)) = span(row) else {
            row += 1;
            continue;
        };
        let start = row;
        while row < rows && span(row) == Some((first, count)) {
            row += 1;
        }
        let strip = (row - start) as u64 * ROW_BYTES;
        let at = start * ROW_BYTES as usize;
        let len = strip as usize;
        let full = count == data_disks;
        // This entry's partial parity goes straight to the end of the log's bytes.
        let pp_at = pp_all.len();
        if !full {
            pp_all.extend_from_slice(&p[at..at + len]);
            for block in new_data.iter().take(first + count).skip(first) {
                uraid_parity::xor_into(
                    &mut pp_all[pp_at..],
                    &block.expect("modified chunk has new data")[at..at + len],
                );
            }
            if roles.q.is_some() {
                let q = q.expect("a raid6 stripe write computes Q");
                pp_all.extend_from_slice(&partial_q(&roles, &q[at..at + len], new_data, first, count, at, len));
            }
        }
        let pp = &pp_all[pp_at..];
        let logical = stripe * width + first as u64 * chunk + lo + start as u64 * ROW_BYTES;
        entries.push(PplEntry {
            data_sector: logical / SECTOR_BYTES,
            pp_size: pp.len() as u32,
            data_size: (count as u64 * strip) as u32,
            parity_disk: roles.p as u32,
            checksum: pp_checksum(pp),
        });
    }
    (entries, pp_all)
}

/// Q minus the syndrome contribution of data chunks `first..first+count` over `[at, at+len)`.
fn partial_q(
    roles: &StripeRoles,
    q: &[u8],
    new_data: &[Option<&[u8]>],
    first: usize,
    count: usize,
    at: usize,
    len: usize,
) -> Vec<u8> {
    let mut out = q.to_vec();
    let mut scratch_p = vec![0u8; len];
    let zero = vec![0u8; len];
    for (d, block) in new_data.iter().enumerate().skip(first).take(count) {
        let slot = roles.syndrome_slot[roles.data[d]].expect("data member has a syndrome slot");
        let new = &block.expect("modified chunk has new data")[at..at + len];
        // Removing a block's contribution is updating it to zero.
        uraid_parity::update_pq(&mut scratch_p, Some(&mut out), slot, new, &zero);
    }
    out
}

/// Where one entry applies, by md's reading of an entry (`ppl_recover_entry`), which uraid
/// follows to the letter so logs written by the kernel replay the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryExtent {
    /// Logical byte of the first modified row of the first modified chunk.
    pub first: u64,
    /// Data chunks (array order, from `first`'s chunk) the entry modified.
    pub data_disks: usize,
    /// Bytes of rows per chunk.
    pub strip: u64,
}

/// Interpret an entry; `None` if it does not describe rows inside one stripe of this geometry.
pub fn entry_extent(geometry: &Geometry, e: &PplEntry) -> Option<EntryExtent> {
    let chunk = geometry.chunk_bytes();
    let width = geometry.stripe_data_bytes()?;
    let all = (width / chunk) as usize;
    let first = e.data_sector.checked_mul(SECTOR_BYTES)?;
    let per_row = if has_q(geometry) { 2 } else { 1 };
    let pp = u64::from(e.pp_size) / per_row;
    let data = u64::from(e.data_size);
    if u64::from(e.pp_size) % per_row != 0 {
        return None;
    }
    let (data_disks, strip) = if pp < chunk {
        match data.checked_div(pp) {
            Some(disks) => (disks as usize, pp),
            None => (all, data / all as u64),
        }
    } else if data % chunk == 0 {
        // md walks every data chunk but stops at `first + data_size`: whole chunks only.
        ((data / chunk) as usize, chunk)
    } else {
        return None;
    };
    // md would also accept entries it never writes (an entry reaching past its chunk's rows);
    // uraid refuses them instead of guessing.
    let within = first % chunk;
    let last_chunk = first / chunk + data_disks as u64 - 1;
    if data_disks == 0
        || strip == 0
        || strip % SECTOR_BYTES != 0
        || within + strip > chunk
        || first / width != last_chunk / (width / chunk)
        || data_disks > all
    {
        return None;
    }
    Some(EntryExtent { first, data_disks, strip })
}

/// The newest log in one member's PPL area, found as md finds it (`ppl_load_distributed`):
/// headers follow each other (each after the previous one's partial parity) while they are
/// valid, carry the array's signature and their generation does not go down. Returns the byte
/// offset of that header in the area and the header; `None` if not even the first is valid
/// (md counts that as a mismatch).
pub fn latest_header(area: &[u8], signature: u32) -> Option<(usize, PplHeader)> {
    let mut best: Option<(usize, PplHeader)> = None;
    let mut at = 0usize;
    while at + HEADER_BYTES <= area.len() {
        let Ok(h) = PplHeader::parse(&area[at..at + HEADER_BYTES]) else { break };
        if h.signature != signature {
            break;
        }
        if best.as_ref().is_some_and(|(_, b)| b.generation > h.generation) {
            break;
        }
        let next = at + HEADER_BYTES + h.entries.iter().map(|e| e.pp_size as usize).sum::<usize>();
        best = Some((at, h));
        if next <= at {
            break;
        }
        at = next;
    }
    best
}

/// Member I/O a replay needs from its driver. A failure only makes the entry it was for count
/// as bad (see [`ReplayReport::bad`]).
pub trait ReplayIo {
    /// Read `len` bytes at byte `offset` from the data start of `slot`.
    fn read(&mut self, slot: usize, offset: u64, len: u64) -> Result<Vec<u8>, MemberIoError>;
    /// Write `data` at byte `offset` from the data start of `slot`.
    fn write(&mut self, slot: usize, offset: u64, data: &[u8]) -> Result<(), MemberIoError>;
}

/// Why a log cannot be replayed at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// The array has no parity, so a partial parity log means nothing on it.
    #[error("a partial parity log needs a parity level")]
    NotParity,
}

/// What replaying the logs did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayReport {
    /// Entries whose stripes got parity consistent with their data again.
    pub recovered: usize,
    /// Entries left alone because a member they changed is not in sync and no syndrome is to
    /// spare (its rows being written may read back as neither version; every other row is right).
    pub skipped: usize,
    /// raid6 entries with one changed member gone: its rows taken as P says, Q made to match.
    pub rebuilt: usize,
    /// Entries whose partial parity failed its checksum, which do not fit the array, or whose
    /// members could not be read or written (md counts the first two as mismatches and fails
    /// the member for the others); the array then needs a resync. A copy that failed its
    /// checksum does not count when another log holds the same entry intact.
    pub bad: usize,
    /// Copies of entries another log holds too (raid6 logs each entry on both parity
    /// members), applied once.
    pub duplicates: usize,
}

/// The newest log found on one in-sync member: its header and the partial parity after it.
#[derive(Debug, Clone, Copy)]
pub struct MemberLog<'a> {
    pub slot: usize,
    pub header: &'a PplHeader,
    /// The bytes of the log area after the header.
    pub pp: &'a [u8],
}

/// What became of one entry.
enum Applied {
    Recovered,
    Rebuilt,
    Skipped,
    Bad,
}

/// Replay the logs of the in-sync members: recompute parity of every stripe they name from the
/// data on the members now. `slots` are the states the array is assembled with.
///
/// raid4/5 keep a stripe's entries in its P member's log only, so the logs name disjoint
/// stripes. raid6 keeps each entry in the logs of both its P and Q members; a copy found in two
/// logs is applied once. Applying an entry only rewrites parity from data, which it does not
/// change, so the order matters only where entries overlap: the logs are applied oldest header
/// first (uraid numbers its headers across the members), each in its own order, so a newer
/// entry has the last word. Either copy is right while both exist: the stripe's member writes
/// waited for both to be durable, and a header is replaced only once what it covers is flushed.
pub fn replay(
    geometry: &Geometry,
    slots: &[SlotState],
    logs: &[MemberLog],
    io: &mut dyn ReplayIo,
) -> Result<ReplayReport, ReplayError> {
    let width = geometry.stripe_data_bytes().ok_or(ReplayError::NotParity)?;
    let checked: Vec<Vec<CheckedEntry>> = logs.iter().map(|log| checked_entries(geometry, width, log)).collect();
    let intact: Vec<(PplEntry, &[u8])> = checked.iter().flatten().filter_map(|(e, b)| b.map(|b| (*e, b))).collect();
    let mut order: Vec<usize> = (0..logs.len()).collect();
    order.sort_by_key(|&i| (logs[i].header.generation, logs[i].slot));
    let mut report = ReplayReport::default();
    let mut applied: Vec<(PplEntry, &[u8])> = Vec::new();
    for i in order {
        for &(e, bytes) in &checked[i] {
            let Some(bytes) = bytes else {
                if intact.iter().any(|(twin, _)| *twin == e) {
                    report.duplicates += 1;
                } else {
                    report.bad += 1;
                }
                continue;
            };
            if applied.contains(&(e, bytes)) {
                report.duplicates += 1;
                continue;
            }
            applied.push((e, bytes));
            match apply_entry(geometry, slots, &e, bytes, io) {
                Applied::Recovered => report.recovered += 1,
                Applied::Rebuilt => report.rebuilt += 1,
                Applied::Skipped => report.skipped += 1,
                Applied::Bad => report.bad += 1,
            }
        }
    }
    Ok(report)
}

/// An entry with its partial parity, or `None` where the entry cannot be used.
type CheckedEntry<'a> = (PplEntry, Option<&'a [u8]>);

/// The entries of one log, each with its partial parity if it fits this geometry and this log
/// (the stripe's P or Q member) and its partial parity is there and passes its checksum.
fn checked_entries<'a>(geometry: &Geometry, width: u64, log: &MemberLog<'a>) -> Vec<CheckedEntry<'a>> {
    let mut pp_at = 0usize;
    log.header
        .entries
        .iter()
        .take(MAX_ENTRIES)
        .map(|e| {
            let bytes = log.pp.get(pp_at..pp_at + e.pp_size as usize);
            pp_at += e.pp_size as usize;
            let usable = bytes.filter(|b| {
                pp_checksum(b) == e.checksum
                    && entry_extent(geometry, e).is_some_and(|ext| {
                        let roles = geometry.stripe_roles(ext.first / width);
                        log.slot == roles.p || Some(log.slot) == roles.q
                    })
            });
            (*e, usable)
        })
        .collect()
}

/// Make the parity of one entry's rows right again (`bytes`: its partial parity, checked).
fn apply_entry(geometry: &Geometry, slots: &[SlotState], e: &PplEntry, bytes: &[u8], io: &mut dyn ReplayIo) -> Applied {
    let chunk = geometry.chunk_bytes();
    let width = geometry.stripe_data_bytes().expect("parity geometry");
    let in_sync = |s: usize| slots[s] == SlotState::InSync;
    let ext = entry_extent(geometry, e).expect("a checked entry");
    let stripe = ext.first / width;
    let roles = geometry.stripe_roles(stripe);
    let first_chunk = ((ext.first % width) / chunk) as usize;
    let member_off = stripe * chunk + ext.first % chunk;
    let members: Vec<usize> = (first_chunk..first_chunk + ext.data_disks).map(|d| roles.data[d]).collect();
    let missing: Vec<usize> = (0..members.len()).filter(|&i| !in_sync(members[i])).collect();
    // With a changed member gone, the rows it was being written with cannot be known. md
    // (raid5) leaves the entry alone: those rows read back as whatever parity now says, and
    // nothing else can disagree with parity in a degraded raid4/5. raid6 still has a
    // syndrome to spare, which must agree again: the missing rows are taken as P now says
    // they are and Q is made to match (for an entry whose write had long finished, that is
    // the data itself and Q does not change). With no syndrome to spare: left alone.
    let rebuild_from_p = match missing.len() {
        0 => false,
        1 if roles.q.is_some_and(in_sync) && in_sync(roles.p) => true,
        _ => return Applied::Skipped,
    };
    let len = ext.strip as usize;
    let mut blocks: Vec<Option<Vec<u8>>> = vec![None; roles.data.len()];
    let mut unreadable = false;
    for (i, &m) in members.iter().enumerate() {
        if !in_sync(m) {
            continue;
        }
        match io.read(m, member_off, ext.strip) {
            Ok(b) => blocks[first_chunk + i] = Some(b),
            // The stripe keeps its parity as it is; a resync has to settle it.
            Err(_) => unreadable = true,
        }
    }
    let partial_p = if e.pp_size == 0 { vec![0u8; len] } else { bytes[..len].to_vec() };
    if rebuild_from_p {
        match io.read(roles.p, member_off, ext.strip) {
            Ok(mut x) => {
                uraid_parity::xor_into(&mut x, &partial_p);
                for b in blocks.iter().flatten() {
                    uraid_parity::xor_into(&mut x, b);
                }
                blocks[first_chunk + missing[0]] = Some(x);
            }
            Err(_) => unreadable = true,
        }
    }
    if unreadable {
        return Applied::Bad;
    }
    let mut p = partial_p;
    for b in blocks.iter().flatten() {
        uraid_parity::xor_into(&mut p, b);
    }
    let q = roles.q.map(|_| {
        let mut q = if e.pp_size == 0 { vec![0u8; len] } else { bytes[len..2 * len].to_vec() };
        let mut scratch = vec![0u8; len];
        let zero = vec![0u8; len];
        for (d, b) in blocks.iter().enumerate() {
            if let Some(b) = b {
                let slot = roles.syndrome_slot[roles.data[d]].expect("data member has a syndrome slot");
                uraid_parity::update_pq(&mut scratch, Some(&mut q), slot, &zero, b);
            }
        }
        q
    });
    let mut written = true;
    if in_sync(roles.p) && !rebuild_from_p {
        written &= io.write(roles.p, member_off, &p).is_ok();
    }
    if let (Some(qs), Some(q)) = (roles.q, q) {
        if in_sync(qs) {
            written &= io.write(qs, member_off, &q).is_ok();
        }
    }
    if !written {
        Applied::Bad
    } else if rebuild_from_p {
        Applied::Rebuilt
    } else {
        Applied::Recovered
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uraid_layout::{Level, ParityAlgorithm, ParityLayout};

    fn raid5(disks: usize, chunk_kib: u32) -> Geometry {
        let alg = ParityAlgorithm::from_md(Level::Raid5, 2).unwrap();
        Geometry::Parity(ParityLayout::new(Level::Raid5, alg, disks, chunk_kib * 2, 4096).unwrap())
    }

    #[test]
    fn an_entry_is_read_back_as_written() {
        let g = raid5(4, 64);
        let chunk = g.chunk_bytes();
        // Rows 8 KiB..20 KiB of data chunks 1 and 2 of stripe 3.
        let (lo, hi) = (8192, 20480);
        let rows = ((hi - lo) / ROW_BYTES) as usize;
        let mut modified = vec![vec![false; rows]; 3];
        modified[1] = vec![true; rows];
        modified[2] = vec![true; rows];
        let len = (hi - lo) as usize;
        let d1 = vec![1u8; len];
        let d2 = vec![2u8; len];
        let p = vec![7u8; len];
        let new_data = [None, Some(&d1[..]), Some(&d2[..])];
        let change = StripeChange { stripe: 3, lo, hi, modified: &modified, new_data: &new_data, p: &p, q: None };
        let (entries, pp) = stripe_entries(&g, &change);
        assert_eq!(entries.len(), 1);
        assert_eq!(pp, vec![7 ^ 1 ^ 2; len]);
        let ext = entry_extent(&g, &entries[0]).unwrap();
        assert_eq!(ext, EntryExtent { first: 3 * 3 * chunk + chunk + lo, data_disks: 2, strip: hi - lo });
    }

    #[test]
    fn rows_with_different_chunks_make_different_entries() {
        let g = raid5(3, 16);
        // A write from the last 4 KiB of chunk 0 into the first 4 KiB of chunk 1.
        let rows = (16384 / ROW_BYTES) as usize;
        let mut modified = vec![vec![false; rows]; 2];
        let per_4k = (4096 / ROW_BYTES) as usize;
        modified[0][rows - per_4k..].fill(true);
        modified[1][..per_4k].fill(true);
        let len = 4 * 4096;
        let d = vec![5u8; len];
        let p = vec![0u8; len];
        let new_data = [Some(&d[..]), Some(&d[..])];
        let change =
            StripeChange { stripe: 0, lo: 0, hi: 16384, modified: &modified, new_data: &new_data, p: &p, q: None };
        let (entries, pp) = stripe_entries(&g, &change);
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].data_sector, 16384 / 512, "chunk 1, row 0 comes first");
        assert_eq!(entries[1].data_sector, 3 * 4096 / 512);
        assert_eq!(pp.len(), 2 * 4096);
        for e in &entries {
            let ext = entry_extent(&g, e).unwrap();
            assert_eq!((ext.data_disks, ext.strip), (1, 4096));
        }
    }

    #[test]
    fn full_rows_carry_no_partial_parity() {
        let g = raid5(3, 16);
        let modified = vec![vec![true; (16384 / ROW_BYTES) as usize]; 2];
        let d = vec![9u8; 16384];
        let new_data = [Some(&d[..]), Some(&d[..])];
        let change =
            StripeChange { stripe: 1, lo: 0, hi: 16384, modified: &modified, new_data: &new_data, p: &d, q: None };
        let (entries, pp) = stripe_entries(&g, &change);
        assert!(pp.is_empty());
        assert_eq!(entries[0].pp_size, 0);
        let ext = entry_extent(&g, &entries[0]).unwrap();
        assert_eq!((ext.first, ext.data_disks, ext.strip), (32768, 2, 16384));
    }

    #[test]
    fn entries_reaching_outside_their_stripe_are_refused() {
        let g = raid5(3, 16);
        let bad = PplEntry { data_sector: 24, pp_size: 8192, data_size: 8192, parity_disk: 0, checksum: 0 };
        assert_eq!(entry_extent(&g, &bad), None, "rows 12K..20K cross the chunk end");
    }
}
