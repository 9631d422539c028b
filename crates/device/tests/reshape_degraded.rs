//! A member that fails part-way through a grow: as md does, the reshape goes on degraded, the
//! other members recording it faulty, and the grown array reads the data from the survivors; a
//! grow left so is taken up degraded; a second death in a raid5 stops it at its last record.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{filled_members, open, Breakable, Fails};
use uraid_device::reshape::{Grow, ReshapeRequest};
use uraid_device::{MemberDevice, MemoryDevice, OpenArray};
use uraid_md_format::Role;

const MEMBER_BYTES: u64 = 4 << 20;

/// A raid5 of four holding its data, and a blank fifth, every member able to break as
/// `fails` says (with its switch).
fn raid5_and_a_fifth(fails: Fails) -> (Vec<Arc<Breakable>>, Vec<Arc<AtomicBool>>, Vec<u8>) {
    let (devs, data) = filled_members(5, 4, 128, MEMBER_BYTES, 11);
    let mut images: Vec<Vec<u8>> = devs.iter().map(|d| d.snapshot()).collect();
    images.push(vec![0u8; MEMBER_BYTES as usize]);
    let switches: Vec<Arc<AtomicBool>> = images.iter().map(|_| Arc::new(AtomicBool::new(false))).collect();
    let breakable = images
        .into_iter()
        .zip(&switches)
        .enumerate()
        .map(|(i, (img, broken))| {
            let inner = Arc::new(MemoryDevice::from_bytes(&format!("m{i}"), img));
            Arc::new(Breakable { inner, broken: Arc::clone(broken), fails })
        })
        .collect();
    (breakable, switches, data)
}

fn as_dyn(devs: &[Arc<Breakable>]) -> Vec<Arc<dyn MemberDevice>> {
    devs.iter().map(|d| Arc::clone(d) as Arc<dyn MemberDevice>).collect()
}

/// Record the grow of the first four onto the fifth, take it up, and make `steps` steps.
fn grow_for(devs: &[Arc<Breakable>], steps: usize) -> Grow {
    let all = as_dyn(devs);
    let request = ReshapeRequest { raid_devices: Some(5), ..ReshapeRequest::default() };
    Grow::start_reshape_on(all[..4].to_vec(), all[4..].to_vec(), request).unwrap();
    let mut g = Grow::resume_on(all).unwrap();
    for _ in 0..steps {
        assert!(!g.step().unwrap(), "the grow ended within {steps} steps");
    }
    g
}

/// The role the superblock of `dev` gives the member whose device number is `dev_number`.
fn role_of(dev: &dyn MemberDevice, dev_number: u32) -> Role {
    let sb = uraid_device::probe(dev).unwrap().expect("a superblock").superblock;
    sb.info().roles[dev_number as usize]
}

fn dev_number(dev: &dyn MemberDevice) -> u32 {
    uraid_device::probe(dev).unwrap().expect("a superblock").superblock.info().dev_number
}

#[test]
fn a_member_dying_mid_grow_is_recorded_faulty_and_the_grow_finishes_degraded() {
    let (devs, broken, data) = raid5_and_a_fifth(Fails::All);
    let number = dev_number(devs[1].as_ref());
    let mut g = grow_for(&devs, 12);
    broken[1].store(true, Ordering::SeqCst);
    while !g.step().unwrap_or_else(|e| panic!("the grow stopped although the array can spare one member: {e}")) {}
    let failures = g.failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].0, "m1");
    assert!(failures[0].1.contains("injected") && failures[0].1.contains("m1"), "{failures:?}");
    let survivors = g.devices();
    assert_eq!(survivors.len(), 4, "the dead member is left out");
    for dev in &survivors {
        assert_eq!(role_of(dev.as_ref(), number), Role::Faulty, "{} records the death", dev.name());
    }
    // Grown onto five with one gone: the data is read round it, from parity.
    let mut a = open(&survivors, false);
    let plan = &a.md().unwrap().plan;
    assert_eq!((plan.raid_disks, plan.reshape.is_some()), (5, false));
    assert!(a.engine().degraded());
    assert!(a.read(0, data.len() as u64).unwrap() == data, "the grown array's data");
}

#[test]
fn a_grow_left_degraded_is_taken_up_and_finished() {
    let (devs, broken, data) = raid5_and_a_fifth(Fails::All);
    let mut g = grow_for(&devs, 6);
    broken[2].store(true, Ordering::SeqCst);
    for _ in 0..6 {
        assert!(!g.step().unwrap());
    }
    assert_eq!(g.failures().len(), 1);
    g.stop().unwrap();
    let survivors = g.devices();
    drop(g);
    // Mid-reshape and degraded, it is read through the reshape only, which goes on from its
    // record.
    let boxed: Vec<Box<dyn MemberDevice>> =
        survivors.iter().map(|d| Box::new(Arc::clone(d)) as Box<dyn MemberDevice>).collect();
    let refused = OpenArray::assemble(boxed, false).err().expect("opened degraded mid-reshape");
    assert!(refused.to_string().contains("only by continuing the reshape"), "{refused}");
    let mut g = Grow::resume_on(survivors.clone()).unwrap();
    let (done, total) = g.progress();
    assert!(done > 0 && done < total, "taken up where it was left: {done} of {total}");
    let read = g.read(0, data.len() as u64).unwrap();
    let mut bytes = vec![0u8; data.len()];
    read.copy_to(&mut bytes);
    assert!(bytes == data, "read through the reshape, degraded");
    while !g.step().unwrap() {}
    assert!(g.failures().is_empty());
    let mut a = open(&survivors, false);
    assert_eq!(a.md().unwrap().plan.raid_disks, 5);
    assert!(a.read(0, data.len() as u64).unwrap() == data, "the grown array's data");
}

#[test]
fn a_second_death_stops_a_raid5_grow_at_its_last_record() {
    let (devs, broken, _) = raid5_and_a_fifth(Fails::All);
    let (number, second) = (dev_number(devs[0].as_ref()), dev_number(devs[3].as_ref()));
    let mut g = grow_for(&devs, 4);
    broken[0].store(true, Ordering::SeqCst);
    assert!(!g.step().unwrap(), "one death is spared");
    broken[3].store(true, Ordering::SeqCst);
    let mut stopped = None;
    for _ in 0..64 {
        match g.step() {
            Ok(false) => {}
            Ok(true) => panic!("a raid5 grew with two members dead"),
            Err(e) => {
                stopped = Some(e.to_string());
                break;
            }
        }
    }
    let why = stopped.expect("the grow stopped");
    assert!(why.contains("stopped at its last recorded position"), "{why}");
    // The one recorded death stands; the second was never recorded as the array cannot lose it.
    for dev in [&devs[1], &devs[2], &devs[4]] {
        assert_eq!(role_of(dev.as_ref(), number), Role::Faulty);
        assert_ne!(role_of(dev.as_ref(), second), Role::Faulty);
    }
}

/// Reads alone failing (its superblock writes still succeed): the failure comes through the
/// engine's reads of the old shape, not a superblock write, and is recorded the same way.
#[test]
fn a_member_whose_reads_fail_mid_grow_is_read_round_and_recorded_faulty() {
    let (devs, broken, data) = raid5_and_a_fifth(Fails::Reads);
    let number = dev_number(devs[3].as_ref());
    let mut g = grow_for(&devs, 8);
    broken[3].store(true, Ordering::SeqCst);
    while !g.step().unwrap() {}
    let failures = g.failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].1.contains("injected read error"), "{failures:?}");
    let survivors = g.devices();
    for dev in &survivors {
        assert_eq!(role_of(dev.as_ref(), number), Role::Faulty, "{} records the failure", dev.name());
    }
    let mut a = open(&survivors, false);
    assert!(a.read(0, data.len() as u64).unwrap() == data, "the grown array's data");
}
