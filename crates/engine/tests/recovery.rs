//! Members that are not trusted yet and members that misbehave: rebuilding a replaced member
//! while the array serves writes, recovering members left out of every read, read errors
//! rebuilt from redundancy and written back, and membership changes asked for by the driver.

mod common;

use common::{
    assert_every_loss_reads, check_consistent, drive, filled_array, geometries, read_all, removable_sets, sync,
    Members, MEMBER_BYTES,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use uraid_engine::array::{Array, Completion, EngineEvent, IoResult, MemberIoError, MemberOp, Request, SlotState};
use uraid_engine::blocking::execute;
use uraid_engine::geometry::{CopyPlacement, Geometry};
use uraid_engine::EngineError;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(37).wrapping_add(seed) ^ (i >> 9) as u8).collect()
}

fn redundant_geometries() -> Vec<(String, Geometry)> {
    geometries().into_iter().filter(|(_, g)| g.max_degraded() > 0).collect()
}

/// Fail `slots` as an operator would, put zeroed devices in their place and mark them
/// recovering; from then on the members panic if the engine reads them.
fn replace_with_spares(array: &mut Array, members: &mut Members, slots: &[usize], name: &str) {
    for &s in slots {
        array.set_slot_state(s, SlotState::Faulty, false).unwrap_or_else(|e| panic!("{name}: failing {s}: {e}"));
    }
    let events = array.take_events();
    for &s in slots {
        assert!(
            events.contains(&EngineEvent::MemberFailed {
                slot: s,
                reason: "failed by request".into(),
                unreachable: false
            }),
            "{name}: no failed-by-request event for {s}: {events:?}"
        );
    }
    for &s in slots {
        members.disks[s] = Some(vec![0u8; MEMBER_BYTES as usize]);
        members.no_reads[s] = true;
        array.set_slot_state(s, SlotState::Recovering, false).unwrap();
    }
}

/// Where a healthy read of logical `[offset, offset+len)` (inside one chunk) goes: the slot and
/// member offset it reads first.
fn first_read_location(g: &Geometry, offset: u64, len: u64) -> (usize, u64) {
    g.runs(offset, len)[0].copies[0]
}

/// A logical range of `len` bytes that lies inside one chunk.
fn range_in_one_chunk(g: &Geometry, rng: &mut StdRng, len: u64) -> u64 {
    let chunk = match g.chunk_bytes() {
        0 => 64 * 1024,
        c => c,
    };
    let chunks = g.array_bytes() / chunk;
    rng.gen_range(0..chunks) * chunk + rng.gen_range(0..=chunk - len)
}

/// Rebuild `lost` while random foreground requests run alongside (their member I/Os performed in
/// random order), then check the rebuilt members hold exactly what they should.
fn recover_under_load(name: &str, g: &Geometry, lost: &[usize], rng: &mut StdRng) {
    let (mut members, mut array, mut model) = filled_array(g);
    replace_with_spares(&mut array, &mut members, lost, name);
    let size = array.size_bytes();
    let member_bytes = g.member_data_bytes();
    let mut pos = 0;
    while pos < member_bytes {
        let mut batch: Vec<Request> = Vec::new();
        // What each request must return; reads see every request submitted before them.
        let mut expect: Vec<Completion> = Vec::new();
        for _ in 0..rng.gen_range(0..4) {
            match rng.gen_range(0..10) {
                0..=4 => {
                    let len = rng.gen_range(1..20_000u64).min(size);
                    let offset = rng.gen_range(0..=size - len);
                    let data = pattern(len as usize, rng.gen());
                    model[offset as usize..(offset + len) as usize].copy_from_slice(&data);
                    batch.push(Request::Write { offset, data: data.into() });
                    expect.push(Completion::Written);
                }
                5..=7 => {
                    let len = rng.gen_range(1..30_000u64).min(size);
                    let offset = rng.gen_range(0..=size - len);
                    expect.push(Completion::Read(model[offset as usize..(offset + len) as usize].to_vec().into()));
                    batch.push(Request::Read { offset, len });
                }
                8 => {
                    let unit = g.stripe_data_bytes().unwrap_or(512);
                    let units = size / unit;
                    let first = rng.gen_range(0..units);
                    let count = rng.gen_range(1..=(units - first).min(3));
                    let (offset, len) = (first * unit, count * unit);
                    model[offset as usize..(offset + len) as usize].fill(0);
                    batch.push(Request::Discard { offset, len });
                    expect.push(Completion::Written);
                }
                _ => {
                    batch.push(Request::Flush);
                    expect.push(Completion::Flushed);
                }
            }
        }
        let step = rng.gen_range(1..=40_000u64).min(member_bytes - pos);
        let at = rng.gen_range(0..=batch.len());
        batch.insert(at, Request::Recover { offset: pos, len: step });
        expect.insert(at, Completion::Recovered);
        pos += step;
        let results = drive(&mut array, &mut members, batch, rng);
        for (i, (got, want)) in results.into_iter().zip(expect).enumerate() {
            assert!(got.as_ref() == Ok(&want), "{name} lost {lost:?}: request {i} of a batch returned {got:?}");
        }
    }
    let events = array.take_events();
    assert!(events.is_empty(), "{name}: unexpected events during recovery: {events:?}");
    for &s in lost {
        array.set_slot_state(s, SlotState::InSync, false).unwrap();
        members.no_reads[s] = false;
    }
    assert!(read_all(&mut array, &mut members) == model, "{name} lost {lost:?}: contents differ after recovery");
    check_consistent(&mut array, &mut members, name);
    assert_every_loss_reads(g, &mut members, &model, name);
}

/// A replaced member (two for raid6, and any survivable pair elsewhere) rebuilt in random
/// windows while writes, reads and discards run, then marked in sync: the array reads the model,
/// a check finds nothing, and every survivable loss still reads the model, so the rebuilt
/// members hold the right data, P and Q.
#[test]
fn replaced_members_are_rebuilt_under_load() {
    for (index, (name, g)) in redundant_geometries().into_iter().enumerate() {
        let mut rng = StdRng::seed_from_u64(0x5eed + index as u64);
        let sets = removable_sets(&g);
        for size in [1, 2] {
            let candidates: Vec<&Vec<usize>> = sets.iter().filter(|s| s.len() == size).collect();
            if candidates.is_empty() {
                continue;
            }
            let lost = candidates[rng.gen_range(0..candidates.len())].clone();
            recover_under_load(&name, &g, &lost, &mut rng);
        }
    }
}

/// With a member recovering, reads and checks never read it; a check compares only in-sync
/// members; a repair writes the recovering member its correct contents.
#[test]
fn recovering_members_are_not_read_and_repair_fills_them() {
    for (index, (name, g)) in redundant_geometries().into_iter().enumerate() {
        let mut rng = StdRng::seed_from_u64(index as u64);
        let (mut members, mut array, mut model) = filled_array(&g);
        let slot = rng.gen_range(0..g.raid_disks());
        replace_with_spares(&mut array, &mut members, &[slot], &name);
        assert!(read_all(&mut array, &mut members) == model, "{name}: read with a recovering member differs");
        let data = pattern(10_000, 3);
        let offset = array.size_bytes() / 3;
        model[offset as usize..offset as usize + data.len()].copy_from_slice(&data);
        execute(&mut array, Request::Write { offset, data: data.into() }, &mut |io| members.exec(io)).unwrap();
        assert_eq!(sync(&mut array, &mut members, false), 0, "{name}: check with a recovering member");
        assert_eq!(sync(&mut array, &mut members, true), 0, "{name}: repair with a recovering member");
        assert!(read_all(&mut array, &mut members) == model, "{name}: contents differ");
        // The repair rebuilt the member in full.
        array.set_slot_state(slot, SlotState::InSync, false).unwrap();
        members.no_reads[slot] = false;
        check_consistent(&mut array, &mut members, &name);
        assert_every_loss_reads(&g, &mut members, &model, &name);
        assert!(array.take_events().is_empty(), "{name}: unexpected events");
    }
}

/// Bytes of `slot` that hold array data (raid10 members may end in chunks nothing maps to).
fn holds_data(g: &Geometry, slot: usize, offset: u64, len: u64) -> bool {
    if g.is_parity() {
        offset + len <= g.member_data_bytes()
    } else {
        g.logical(slot, offset).is_some() && g.logical(slot, offset + len - 1).is_some()
    }
}

/// The 4 KiB rows of data that member bytes `[offset, offset+len)` of `slot` take part in:
/// stripe rows for parity levels (every member of a row is needed to rebuild it), logical rows
/// otherwise.
fn data_rows(g: &Geometry, slot: usize, offset: u64, len: u64) -> Vec<u64> {
    (offset / 4096..=(offset + len - 1) / 4096)
        .map(|row| if g.is_parity() { row } else { g.logical(slot, row * 4096).expect("bytes holding data") / 4096 })
        .collect()
}

/// Latent read errors on one or two members: reads return the right data, the unreadable bytes are
/// rewritten from redundancy (the member image is right again), the member stays in sync, and
/// the events say which bytes were corrected.
#[test]
fn read_errors_are_rebuilt_and_written_back() {
    for (index, (name, g)) in redundant_geometries().into_iter().enumerate() {
        let mut rng = StdRng::seed_from_u64(0xbad + index as u64);
        let (mut members, mut array, mut model) = filled_array(&g);
        let n = g.raid_disks();
        let slot = rng.gen_range(0..n);
        let snapshot = members.disks.clone();
        let mut ranges = Vec::new();
        // One range exactly where a read goes first, and a few anywhere.
        let offset = range_in_one_chunk(&g, &mut rng, 2048);
        let (first_slot, first_off) = first_read_location(&g, offset, 2048);
        members.add_bad_range(first_slot, first_off, 1000);
        ranges.push((first_slot, first_off, 1000));
        // Errors on different members must not hit the same 4 KiB row of data: the engine (as
        // md) rebuilds row by row, and a row unreadable everywhere is lost.
        let taken = |ranges: &[(usize, u64, u64)], s: usize, off: u64, len: u64| {
            ranges.iter().any(|&(rs, ro, rl)| {
                rs != s && data_rows(&g, rs, ro, rl).iter().any(|row| data_rows(&g, s, off, len).contains(row))
            })
        };
        while ranges.len() < 5 {
            let len = rng.gen_range(1..3000u64);
            let off = rng.gen_range(0..g.member_data_bytes() - len);
            if holds_data(&g, slot, off, len) && !taken(&ranges, slot, off, len) {
                members.add_bad_range(slot, off, len);
                ranges.push((slot, off, len));
            }
        }
        assert!(read_all(&mut array, &mut members) == model, "{name}: read with read errors differs");
        check_consistent(&mut array, &mut members, &name);
        for (s, off, len) in &ranges {
            assert!(
                !members.unreadable[*s][*off as usize..(off + len) as usize].contains(&true),
                "{name}: slot {s} {off}+{len} not rewritten"
            );
        }
        assert!(members.disks == snapshot, "{name}: a member holds wrong bytes after correction");
        assert!(array.slot_states().iter().all(|s| *s == SlotState::InSync), "{name}: a member left the array");
        let events = array.take_events();
        for (s, off, len) in &ranges {
            for byte in *off..off + len {
                let covered = events.iter().any(|e| match e {
                    EngineEvent::ReadErrorCorrected { slot: es, offset, len } => {
                        es == s && *offset <= byte && byte < offset + len
                    }
                    EngineEvent::MemberFailed { .. } => false,
                });
                assert!(covered, "{name}: no corrected-read event covers slot {s} byte {byte}: {events:?}");
            }
        }
        assert!(
            events.iter().all(|e| matches!(e, EngineEvent::ReadErrorCorrected { .. })),
            "{name}: a member failed: {events:?}"
        );

        // Read errors met by writes (rmw/rcw reads), on another member.
        let other = (slot + 1) % n;
        for _ in 0..6 {
            let len = rng.gen_range(1..4000u64);
            let off = rng.gen_range(0..g.member_data_bytes() - len);
            if holds_data(&g, other, off, len) {
                members.add_bad_range(other, off, len);
            }
        }
        for _ in 0..12 {
            let size = array.size_bytes();
            let len = rng.gen_range(1..9000u64);
            let offset = rng.gen_range(0..=size - len);
            let data = pattern(len as usize, rng.gen());
            model[offset as usize..(offset + len) as usize].copy_from_slice(&data);
            execute(&mut array, Request::Write { offset, data: data.into() }, &mut |io| members.exec(io)).unwrap();
        }
        assert!(read_all(&mut array, &mut members) == model, "{name}: contents differ after writes over read errors");
        check_consistent(&mut array, &mut members, &name);
        assert!(!members.unreadable[other].contains(&true), "{name}: unreadable bytes left on slot {other}");
        assert!(array.slot_states().iter().all(|s| *s == SlotState::InSync), "{name}: a member left the array");
        assert_every_loss_reads(&g, &mut members, &model, &name);
    }
}

/// A parity write whose first member read fails (read-modify-write or reconstruct-write alike)
/// rebuilds the rows, writes them back itself, and the stripe stays consistent.
#[test]
fn parity_write_corrects_the_read_error_it_meets() {
    for (name, g) in redundant_geometries().into_iter().filter(|(_, g)| g.is_parity()) {
        let width = g.stripe_data_bytes().unwrap();
        // A small write (read-modify-write on wide stripes) and most of a stripe
        // (reconstruct-write).
        for (offset, len) in [(width + 100, 300u64), (2 * width + 512, width - 1024)] {
            let (mut members, mut array, mut model) = filled_array(&g);
            let data = pattern(len as usize, 5);
            model[offset as usize..(offset + len) as usize].copy_from_slice(&data);
            let id = array.submit(Request::Write { offset, data: data.into() }).unwrap();
            let mut victim = None;
            let mut result = None;
            while result.is_none() {
                let io = array.next_io().unwrap_or_else(|| panic!("{name} {offset}+{len}: write stalled"));
                if victim.is_none() {
                    if let MemberOp::Read { len } = io.op {
                        members.add_bad_range(io.slot, io.offset, len);
                        victim = Some((io.slot, io.offset, len));
                    }
                }
                let r = members.exec(&io);
                array.complete_io(io.id, r);
                if let Some((done, r)) = array.next_completion() {
                    assert_eq!(done, id);
                    result = Some(r);
                }
            }
            assert_eq!(result, Some(Ok(Completion::Written)), "{name}");
            let Some((slot, off, len)) = victim else {
                // One data member (raid5-2): a write covering its rows reads nothing.
                assert_eq!(g.stripe_roles(0).data.len(), 1, "{name}: the write read no member");
                continue;
            };
            assert!(!members.unreadable[slot].contains(&true), "{name}: read error left in place");
            let events = array.take_events();
            assert!(
                events.iter().any(|e| matches!(e, EngineEvent::ReadErrorCorrected { slot: s, offset: o, len: l }
                    if *s == slot && *o <= off && off + len <= o + l)),
                "{name}: {events:?}"
            );
            assert!(array.slot_states().iter().all(|s| *s == SlotState::InSync), "{name}");
            assert!(read_all(&mut array, &mut members) == model, "{name}: contents differ");
            check_consistent(&mut array, &mut members, &name);
            assert_every_loss_reads(&g, &mut members, &model, &name);
        }
    }
}

/// Recovery meets read errors on an in-sync member: where the level survives losing both, the
/// spare is rebuilt and the source rewritten; where it does not, that row is reported lost.
#[test]
fn recovery_over_read_errors() {
    for (index, (name, g)) in redundant_geometries().into_iter().enumerate() {
        let mut rng = StdRng::seed_from_u64(0xec0 + index as u64);
        let n = g.raid_disks();
        let (mut members, mut array, model) = filled_array(&g);
        let spare = rng.gen_range(0..n);
        replace_with_spares(&mut array, &mut members, &[spare], &name);
        let source = (spare + 1 + rng.gen_range(0..n - 1)) % n;
        let off = loop {
            let off = rng.gen_range(0..g.member_data_bytes() / 4096) * 4096 + 1000;
            if holds_data(&g, source, off, 2000) {
                break off;
            }
        };
        members.add_bad_range(source, off, 2000);
        let survivable = g.is_readable(&|s| s != spare && s != source);
        let got =
            execute(&mut array, Request::Recover { offset: 0, len: g.member_data_bytes() }, &mut |io| members.exec(io));
        if !survivable {
            // Only chunked copies (raid10) may not need the bad row for the spare (its copy
            // lives elsewhere).
            if let Err(e) = &got {
                assert!(
                    matches!(e, EngineError::UnrecoverableRead { slot, offset, len }
                        if *slot == source && *offset <= off && off < offset + len && *len <= 4096),
                    "{name}: {e:?}"
                );
                assert!(array.slot_states()[source] == SlotState::InSync, "{name}");
                continue;
            }
            assert!(
                matches!(g.copy_placement(), CopyPlacement::Chunks { .. }),
                "{name}: unrecoverable row went unnoticed: {got:?}"
            );
        }
        assert_eq!(got, Ok(Completion::Recovered), "{name}");
        if g.is_parity() {
            // Recovery reads every in-sync member of a stripe.
            assert!(!members.unreadable[source].contains(&true), "{name}: the source was not rewritten");
        }
        assert!(array.take_events().iter().all(|e| matches!(e, EngineEvent::ReadErrorCorrected { .. })), "{name}");
        array.set_slot_state(spare, SlotState::InSync, false).unwrap();
        members.no_reads[spare] = false;
        assert!(read_all(&mut array, &mut members) == model, "{name}: contents differ after recovery");
        check_consistent(&mut array, &mut members, &name);
        // Mirrors are read from one copy; the check read them all.
        assert!(!members.unreadable[source].contains(&true), "{name}: the source was not rewritten");
        assert_every_loss_reads(&g, &mut members, &model, &name);
    }
}

/// When the corrective write fails too, the member is failed, and the read still returns the
/// right data.
#[test]
fn failed_correction_fails_the_member_but_not_the_read() {
    correction_that_does_not_take(
        0xdead,
        |m, slot| m.bad_writes_fail[slot] = true,
        "rewriting after a read error failed",
    );
}

/// A read error still there after its rewrite (the drive took the write but could not remap the
/// sector) fails the member too, as md's `fix_read_error` does when it reads the sector back.
#[test]
fn a_read_error_that_survives_its_rewrite_fails_the_member() {
    correction_that_does_not_take(
        0x571c,
        |m, slot| m.bad_stays_bad[slot] = true,
        "reading back a rewritten read error failed",
    );
}

/// On every redundant geometry, a read meets bad bytes whose correction `spoil` makes fail: the
/// read returns the right data from redundancy, the member is failed (the only event, giving
/// `reason`, so nothing says the error was corrected), and the array reads right without it.
fn correction_that_does_not_take(seed: u64, spoil: fn(&mut Members, usize), reason: &str) {
    for (index, (name, g)) in redundant_geometries().into_iter().enumerate() {
        let mut rng = StdRng::seed_from_u64(seed + index as u64);
        let (mut members, mut array, model) = filled_array(&g);
        let offset = range_in_one_chunk(&g, &mut rng, 4096);
        let (slot, member_off) = first_read_location(&g, offset, 4096);
        members.add_bad_range(slot, member_off + 100, 3000);
        spoil(&mut members, slot);
        let got = execute(&mut array, Request::Read { offset, len: 4096 }, &mut |io| members.exec(io)).unwrap();
        assert!(
            got == Completion::Read(model[offset as usize..offset as usize + 4096].to_vec().into()),
            "{name}: wrong data"
        );
        assert_eq!(array.slot_states()[slot], SlotState::Faulty, "{name}");
        let events = array.take_events();
        assert!(
            matches!(events.as_slice(), [EngineEvent::MemberFailed { slot: s, reason: r, .. }] if *s == slot && r.contains(reason)),
            "{name}: expected one member-failed event saying {reason:?}: {events:?}"
        );
        assert!(read_all(&mut array, &mut members) == model, "{name}: contents differ with the member failed");
    }
}

/// The mirrored geometries under test.
fn mirror_geometries() -> Vec<(String, Geometry)> {
    geometries().into_iter().filter(|(_, g)| g.is_mirrored()).collect()
}

/// Copies that disagree (after a crash, before the resync has passed) and a read error on one of
/// them, met by a read, a check or a recovery whose range starts and ends inside sectors: the
/// correction rewrites whole sectors of one copy's version, so afterwards every sector of every
/// copy is one copy's version in full, never two spliced together (the sectors at the edges of
/// the request would be, if only its bytes were rewritten). Also when the other copy cannot read
/// the whole 4 KiB row, only the sectors asked for.
#[test]
fn mirror_corrections_never_splice_copies_inside_a_sector() {
    for (name, g) in mirror_geometries() {
        for case in ["read", "read, row unreadable on the other copy", "check", "recover"] {
            let (mut members, mut array, _) = filled_array(&g);
            let chunk = match g.chunk_bytes() {
                0 => 64 * 1024,
                c => c,
            };
            // A row that starts a chunk in the middle of the array; the request covers bytes
            // 700..1700 of it: part of sector 1, sector 2, part of sector 3.
            let row = array.size_bytes() / 2 / chunk * chunk;
            let (offset, len) = (row + 700, 1000u64);
            let copies = g.runs(row, 4096)[0].copies.clone();
            if case == "recover" && copies.len() < 3 {
                continue;
            }
            let versions: Vec<Vec<u8>> = (0..copies.len()).map(|k| pattern(4096, 0x40 + 0x31 * k as u8)).collect();
            for (&(slot, off), version) in copies.iter().zip(&versions) {
                members.disks[slot].as_mut().unwrap()[off as usize..off as usize + 4096].copy_from_slice(version);
            }
            // The first copy read cannot read sector 2 of the row.
            let (bad_slot, bad_off) = copies[0];
            members.add_bad_range(bad_slot, bad_off + 1024, 512);
            if case == "read, row unreadable on the other copy" {
                // Every other copy fails on sector 6, outside the sectors asked for.
                for &(slot, off) in &copies[1..] {
                    members.add_bad_range(slot, off + 3072, 512);
                }
            }
            let mut checked = copies.clone();
            let got = match case {
                "check" => {
                    execute(&mut array, Request::Sync { offset, len, repair: false }, &mut |io| members.exec(io))
                }
                "recover" => {
                    let (target, target_off) = copies[2];
                    replace_with_spares(&mut array, &mut members, &[target], &name);
                    checked.pop();
                    let got = execute(&mut array, Request::Recover { offset: target_off + 700, len }, &mut |io| {
                        members.exec(io)
                    });
                    let rebuilt =
                        &members.disks[target].as_ref().unwrap()[target_off as usize + 700..target_off as usize + 1700];
                    assert!(rebuilt == &versions[1][700..1700], "{name} {case}: the spare holds other bytes");
                    got
                }
                _ => execute(&mut array, Request::Read { offset, len }, &mut |io| members.exec(io)),
            };
            match got {
                Ok(Completion::Read(data)) => {
                    assert!(
                        versions.iter().any(|v| v[700..1700] == data.to_vec()[..]),
                        "{name} {case}: the read returned bytes of no single copy"
                    );
                }
                Ok(_) => {}
                Err(e) => panic!("{name} {case}: {e:?}"),
            }
            for &(slot, off) in &checked {
                let disk = &members.disks[slot].as_ref().unwrap()[off as usize..off as usize + 4096];
                for sector in 0..8 {
                    let s = sector * 512..(sector + 1) * 512;
                    // A sector still unreadable holds nothing anyone can read.
                    let at = off as usize + s.start;
                    if members.unreadable[slot][at..at + 512].contains(&true) {
                        continue;
                    }
                    assert!(
                        versions.iter().any(|v| v[s.clone()] == disk[s.clone()]),
                        "{name} {case}: sector {sector} of the row on slot {slot} is no single copy's version"
                    );
                }
            }
            let fixed = &members.unreadable[bad_slot][bad_off as usize + 1024..bad_off as usize + 1536];
            assert!(!fixed.contains(&true), "{name} {case}: the read error was not corrected");
            assert!(array.slot_states().iter().all(|s| *s != SlotState::Faulty), "{name} {case}: a member failed");
        }
    }
}

/// Without redundancy a read error is the caller's: the request fails, the member stays.
#[test]
fn read_error_without_redundancy_fails_the_request_only() {
    for (index, (name, g)) in geometries().into_iter().filter(|(_, g)| g.max_degraded() == 0).enumerate() {
        let mut rng = StdRng::seed_from_u64(0x2a0 + index as u64);
        let (mut members, mut array, model) = filled_array(&g);
        let offset = range_in_one_chunk(&g, &mut rng, 1024);
        let (slot, member_off) = first_read_location(&g, offset, 1024);
        members.add_bad_range(slot, member_off, 10);
        let got = execute(&mut array, Request::Read { offset, len: 1024 }, &mut |io| members.exec(io));
        assert!(
            matches!(got, Err(EngineError::UnrecoverableRead { slot: s, offset: o, .. }) if s == slot && o == member_off),
            "{name}: {got:?}"
        );
        assert!(array.slot_states().iter().all(|s| *s == SlotState::InSync), "{name}: member dropped");
        assert!(array.take_events().is_empty(), "{name}: events");
        // Everything else still reads.
        if offset >= 1 {
            let got =
                execute(&mut array, Request::Read { offset: 0, len: offset }, &mut |io| members.exec(io)).unwrap();
            assert!(got == Completion::Read(model[..offset as usize].to_vec().into()), "{name}");
        }
    }
}

/// A read error on a degraded array with no redundancy left fails the request and keeps the
/// member (md never fails the last copy of data for a read error).
#[test]
fn read_error_beyond_redundancy_fails_the_request_only() {
    for (index, (name, g)) in redundant_geometries().into_iter().enumerate() {
        let mut rng = StdRng::seed_from_u64(0xfeed + index as u64);
        let (mut members, _, model) = filled_array(&g);
        let offset = range_in_one_chunk(&g, &mut rng, 512);
        let (slot, member_off) = first_read_location(&g, offset, 512);
        // Take away every other member that could stand in for `slot` here.
        let n = g.raid_disks();
        let mut states = vec![SlotState::InSync; n];
        for other in (0..n).filter(|&o| o != slot) {
            states[other] = SlotState::Missing;
            let alive = |s: usize| states[s] == SlotState::InSync;
            if !g.is_readable(&alive) {
                states[other] = SlotState::InSync;
            }
        }
        let mut array = Array::new(g.clone(), states.clone()).unwrap();
        members.add_bad_range(slot, member_off, 512);
        let got = execute(&mut array, Request::Read { offset, len: 512 }, &mut |io| members.exec(io));
        if let Ok(Completion::Read(data)) = &got {
            // raid10 far/offset layouts may still hold another copy on a member kept above.
            assert!(data.to_vec()[..] == model[offset as usize..offset as usize + 512], "{name}: wrong data");
            continue;
        }
        assert!(matches!(got, Err(EngineError::UnrecoverableRead { .. })), "{name}: {got:?}");
        assert_eq!(array.slot_states(), &states[..], "{name}: states changed");
        assert!(array.take_events().is_empty(), "{name}: events");
    }
}

/// Failing members beyond redundancy is refused and changes nothing; force overrides; other
/// transitions that make no sense are refused.
#[test]
fn slot_state_changes_are_checked() {
    for (name, g) in geometries() {
        let n = g.raid_disks();
        let mut array = Array::new(g.clone(), vec![SlotState::InSync; n]).unwrap();
        assert_eq!(
            array.set_slot_state(n, SlotState::Faulty, false),
            Err(EngineError::NoSuchSlot { slot: n, raid_disks: n })
        );
        assert_eq!(
            array.set_slot_state(0, SlotState::Recovering, false),
            Err(EngineError::InvalidSlotChange { slot: 0, from: SlotState::InSync, to: SlotState::Recovering }),
            "{name}"
        );
        assert_eq!(
            array.set_slot_state(0, SlotState::Missing, false),
            Err(EngineError::InvalidSlotChange { slot: 0, from: SlotState::InSync, to: SlotState::Missing }),
            "{name}"
        );
        let mut failed: Vec<usize> = Vec::new();
        let mut refused: Vec<usize> = Vec::new();
        for s in 0..n {
            let before = array.slot_states().to_vec();
            let survivable = g.is_readable(&|x| x != s && !failed.contains(&x));
            match array.set_slot_state(s, SlotState::Faulty, false) {
                Ok(()) => {
                    assert!(survivable, "{name}: failing {s} after {failed:?} accepted");
                    assert_eq!(
                        array.take_events(),
                        vec![EngineEvent::MemberFailed {
                            slot: s,
                            reason: "failed by request".into(),
                            unreachable: false
                        }]
                    );
                    failed.push(s);
                }
                Err(e) => {
                    assert!(!survivable, "{name}: failing {s} after {failed:?} refused");
                    assert_eq!(e, EngineError::WouldFailArray { slot: s });
                    assert_eq!(array.slot_states(), &before[..], "{name}: refused change changed states");
                    assert!(array.take_events().is_empty(), "{name}: refused change left events");
                    refused.push(s);
                }
            }
        }
        assert!(!refused.is_empty(), "{name}: nothing refused");
        // The operator insists.
        array.set_slot_state(refused[0], SlotState::Faulty, true).unwrap();
        assert_eq!(array.slot_states()[refused[0]], SlotState::Faulty);
        assert!(matches!(
            array.submit(Request::Read { offset: 0, len: 512 }).map(|_| array.next_completion()),
            Ok(Some((_, Err(EngineError::ArrayFailed))))
        ));
        // Faulty may be emptied, and a spare may go in an empty slot; it cannot be trusted at once.
        array.set_slot_state(refused[0], SlotState::Missing, false).unwrap();
        assert_eq!(
            array.set_slot_state(refused[0], SlotState::InSync, false),
            Err(EngineError::InvalidSlotChange { slot: refused[0], from: SlotState::Missing, to: SlotState::InSync })
        );
        array.set_slot_state(refused[0], SlotState::Recovering, false).unwrap();
    }
}

/// `Recover` is refused without redundancy, without a recovering member, and past the members'
/// data; refused requests issue no I/O.
#[test]
fn recover_requests_are_checked() {
    for (name, g) in geometries() {
        let n = g.raid_disks();
        let mut array = Array::new(g.clone(), vec![SlotState::InSync; n]).unwrap();
        let got = array.submit(Request::Recover { offset: 0, len: 4096 });
        if g.max_degraded() == 0 {
            assert!(matches!(got, Err(EngineError::NoRedundancy { .. })), "{name}: {got:?}");
            continue;
        }
        assert_eq!(got, Err(EngineError::NothingToRecover), "{name}");
        array.set_slot_state(0, SlotState::Faulty, false).unwrap();
        array.set_slot_state(0, SlotState::Recovering, false).unwrap();
        let end = g.member_data_bytes();
        assert!(
            matches!(array.submit(Request::Recover { offset: end - 10, len: 11 }), Err(EngineError::OutOfRange { .. })),
            "{name}"
        );
        assert!(
            matches!(array.submit(Request::Recover { offset: u64::MAX, len: 2 }), Err(EngineError::OutOfRange { .. })),
            "{name}"
        );
        assert!(array.next_io().is_none(), "{name}: a refused request issued I/O");
    }
}

/// A recovering member whose I/O fails is dropped, and no request fails because of it.
#[test]
fn failing_recovering_member_fails_no_request() {
    for (name, g) in redundant_geometries() {
        let (mut members, mut array, mut model) = filled_array(&g);
        let slot = 1 % g.raid_disks();
        replace_with_spares(&mut array, &mut members, &[slot], &name);
        members.broken[slot] = true;
        let got = execute(&mut array, Request::Recover { offset: 0, len: 20_000 }, &mut |io| members.exec(io));
        assert_eq!(got, Ok(Completion::Recovered), "{name}");
        assert_eq!(array.slot_states()[slot], SlotState::Faulty, "{name}");
        assert!(
            matches!(array.take_events().as_slice(), [EngineEvent::MemberFailed { slot: s, .. }] if *s == slot),
            "{name}"
        );
        // Again as a spare, failing under a foreground write that reaches it.
        array.set_slot_state(slot, SlotState::Recovering, false).unwrap();
        // Near the first data the slot holds (a slot holding only parity, as raid6's
        // parity-first layouts' Q slot, takes part in every write anyway).
        let held = (0..g.member_data_bytes()).step_by(512).find_map(|at| g.logical(slot, at)).unwrap_or(1000);
        let offset = held.saturating_sub(1000).min(array.size_bytes() - 50_000);
        let data = pattern(50_000, 9);
        model[offset as usize..offset as usize + 50_000].copy_from_slice(&data);
        let got = execute(&mut array, Request::Write { offset, data: data.into() }, &mut |io| members.exec(io));
        assert_eq!(got, Ok(Completion::Written), "{name}");
        assert_eq!(array.slot_states()[slot], SlotState::Faulty, "{name}");
        assert!(read_all(&mut array, &mut members) == model, "{name}: contents differ");
    }
}

/// I/O issued to a member that is failed (or replaced) before it completes is ignored: the
/// request gets its data elsewhere, and the new device in the slot is not blamed.
#[test]
fn completions_from_a_replaced_member_are_ignored() {
    for (name, g) in redundant_geometries() {
        let (mut members, mut array, model) = filled_array(&g);
        let offset = 8192;
        let id = array.submit(Request::Read { offset, len: 4096 }).unwrap();
        let io = array.next_io().expect("a read");
        assert!(matches!(io.op, MemberOp::Read { .. }));
        array.set_slot_state(io.slot, SlotState::Faulty, false).unwrap();
        array.set_slot_state(io.slot, SlotState::Recovering, false).unwrap();
        // The old device answers late, with garbage, then fails: neither counts.
        array.complete_io(io.id, IoResult::Read(vec![0xee; 4096].into()));
        members.no_reads[io.slot] = true;
        while let Some(next) = array.next_io() {
            let r = members.exec(&next);
            array.complete_io(next.id, r);
        }
        members.no_reads[io.slot] = false;
        let (done, result) = array.next_completion().expect("read finished");
        assert_eq!(done, id);
        assert_eq!(
            result,
            Ok(Completion::Read(model[offset as usize..offset as usize + 4096].to_vec().into())),
            "{name}"
        );
        assert_eq!(array.slot_states()[io.slot], SlotState::Recovering, "{name}");
        let events = array.take_events();
        assert_eq!(
            events,
            vec![EngineEvent::MemberFailed { slot: io.slot, reason: "failed by request".into(), unreachable: false }],
            "{name}"
        );

        // A write in flight to a member failed meanwhile: its failure does not touch the spare.
        let (mut members, mut array, _) = filled_array(&g);
        let id = array.submit(Request::Write { offset: 0, data: (vec![7u8; 4096]).into() }).unwrap();
        let mut ios = Vec::new();
        while let Some(io) = array.next_io() {
            ios.push(io);
        }
        let victim = ios[0].slot;
        array.set_slot_state(victim, SlotState::Faulty, false).unwrap();
        array.set_slot_state(victim, SlotState::Recovering, false).unwrap();
        let old: Vec<u64> = ios.iter().filter(|io| io.slot == victim).map(|io| io.id).collect();
        let mut pending = ios;
        while let Some(io) = pending.pop() {
            let r = if old.contains(&io.id) {
                IoResult::Failed(MemberIoError::other("old device"))
            } else {
                members.exec(&io)
            };
            array.complete_io(io.id, r);
            while let Some(more) = array.next_io() {
                pending.push(more);
            }
        }
        let (done, r) = array.next_completion().expect("write finished");
        assert_eq!((done, r), (id, Ok(Completion::Written)), "{name}");
        assert_eq!(array.slot_states()[victim], SlotState::Recovering, "{name}");
    }
}

/// A member that does not answer (its read timed out) or cannot be reached fails at once where
/// the array can do without it (md's failfast), and the read is served from the others; with no
/// redundancy to fall back on it fails the request only, as a read error does.
#[test]
fn an_unreachable_member_fails_fast_where_redundancy_allows() {
    let timed_out = MemberIoError::os("remote member: read", &std::io::Error::from(std::io::ErrorKind::TimedOut));
    assert!(timed_out.member_unreachable());
    for (index, (name, g)) in geometries().into_iter().enumerate() {
        let mut rng = StdRng::seed_from_u64(0xfa57 + index as u64);
        let (mut members, mut array, model) = filled_array(&g);
        let offset = range_in_one_chunk(&g, &mut rng, 4096);
        let (slot, _) = first_read_location(&g, offset, 4096);
        let mut reads_of_slot = 0;
        let got = execute(&mut array, Request::Read { offset, len: 4096 }, &mut |io| {
            if io.slot == slot && matches!(io.op, MemberOp::Read { .. }) {
                reads_of_slot += 1;
                IoResult::Failed(timed_out.clone())
            } else {
                members.exec(io)
            }
        });
        if g.max_degraded() == 0 {
            assert!(matches!(got, Err(EngineError::UnrecoverableRead { .. })), "{name}: {got:?}");
            assert!(array.slot_states().iter().all(|s| *s == SlotState::InSync), "{name}: member dropped");
            continue;
        }
        let want = &model[offset as usize..offset as usize + 4096];
        assert!(matches!(&got, Ok(Completion::Read(d)) if d.to_vec()[..] == *want), "{name}: {got:?}");
        assert_eq!(reads_of_slot, 1, "{name}: the silent member was asked again");
        assert_eq!(array.slot_states()[slot], SlotState::Faulty, "{name}");
        let events = array.take_events();
        assert!(
            events.iter().any(|e| matches!(e, EngineEvent::MemberFailed { slot: s, reason, unreachable: true } if *s == slot && reason.starts_with("not answering"))),
            "{name}: {events:?}"
        );
    }
}

/// A member failed on a write says why: not reached (its write timed out, a member on another
/// host may come back) or answered with an error (a local disk's EIO, which it may not).
#[test]
fn a_failed_member_says_whether_it_was_unreachable() {
    let timed_out = MemberIoError::os("remote member: write", &std::io::Error::from(std::io::ErrorKind::TimedOut));
    // EIO: what a local disk answers with.
    let eio = MemberIoError::os("write", &std::io::Error::from_raw_os_error(5));
    for (error, unreachable) in [(timed_out, true), (eio, false)] {
        let (name, g) = redundant_geometries().into_iter().next().unwrap();
        let (mut members, mut array, _) = filled_array(&g);
        let got = execute(&mut array, Request::Write { offset: 0, data: vec![7u8; 4096].into() }, &mut |io| {
            if io.slot == 0 && matches!(io.op, MemberOp::Write { .. }) {
                IoResult::Failed(error.clone())
            } else {
                members.exec(io)
            }
        });
        assert!(got.is_ok(), "{name}: {got:?}");
        let events = array.take_events();
        assert!(
            events
                .iter()
                .any(|e| matches!(e, EngineEvent::MemberFailed { slot: 0, unreachable: u, .. } if *u == unreachable)),
            "{name}: {events:?}"
        );
    }
}
