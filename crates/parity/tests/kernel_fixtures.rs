//! Byte compatibility with the Linux kernel: P and Q computed here must equal the parity chunks
//! that md itself wrote into the fixture member images, and every one- or two-member loss of a
//! real stripe must be rebuilt exactly.
//!
//! The layout arithmetic below is the minimum needed to find the chunks of one stripe; the real
//! layout code lives elsewhere and is tested there.

use std::fs;

use uraid_parity::{pq_matches, Kernel};
use uraid_testkit::{cases, pattern, FixtureCase};

const SECTOR: usize = 512;

#[derive(Clone, Copy, Debug)]
enum Layout {
    LeftSymmetric,
    LeftAsymmetric,
    /// RAID-5 left-symmetric over the first N-1 members, Q always on the last.
    LeftSymmetric6,
}

/// Where P, Q and each logical data chunk of stripe `k` live, for `members` members.
struct StripeMap {
    p: usize,
    q: usize,
    /// `data[j]` = member holding logical data chunk j of the stripe.
    data: Vec<usize>,
}

fn stripe_map(layout: Layout, members: usize, k: usize) -> StripeMap {
    let data_count = members - 2;
    match layout {
        Layout::LeftSymmetric => {
            let p = members - 1 - k % members;
            let q = (p + 1) % members;
            let data = (0..data_count).map(|j| (p + 2 + j) % members).collect();
            StripeMap { p, q, data }
        }
        Layout::LeftAsymmetric => {
            let p = members - 1 - k % members;
            if p == members - 1 {
                StripeMap { p, q: 0, data: (1..=data_count).collect() }
            } else {
                let data = (0..data_count).map(|j| if j >= p { j + 2 } else { j }).collect();
                StripeMap { p, q: p + 1, data }
            }
        }
        Layout::LeftSymmetric6 => {
            let rotating = members - 1;
            let p = rotating - 1 - k % rotating;
            let data = (0..data_count).map(|j| (p + 1 + j) % rotating).collect();
            StripeMap { p, q: members - 1, data }
        }
    }
}

/// md's syndrome-slot order for its own (non-DDF) layouts: walk the members starting just after
/// Q (from member 0 when Q is the last member), wrapping, and number the data members as met.
fn syndrome_order(map: &StripeMap, members: usize) -> Vec<usize> {
    let start = if map.q == members - 1 { 0 } else { map.q + 1 };
    (0..members).map(|i| (start + i) % members).filter(|&m| m != map.p && m != map.q).collect()
}

fn case(name: &str) -> FixtureCase {
    cases().into_iter().find(|c| c.name == name).unwrap_or_else(|| panic!("fixture {name} not found"))
}

/// Checks every stripe of a clean fixture; returns how many stripes had a syndrome order that
/// differs from the logical data order.
fn check_fixture(name: &str, layout: Layout) -> usize {
    let case = case(name);
    let members = case.members.len();
    assert_eq!(case.json["raid_devices"].as_u64().expect("case.json: raid_devices") as usize, members);
    assert!(case.is_pattern(), "{name}: expected pattern content");
    let chunk = case.json["chunk_bytes"].as_u64().expect("case.json: chunk_bytes") as usize;
    let component = case.json["component_size_kib"].as_u64().expect("case.json: component_size_kib") as usize * 1024;
    let stripes = component / chunk;
    assert!(stripes > 0);

    let images: Vec<Vec<u8>> = (0..members)
        .map(|i| {
            assert_eq!(case.members[i].status, "active", "{name}: member {i} not active");
            let path = case.member_image(i).expect("member image");
            fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        })
        .collect();
    let data_offsets: Vec<usize> = case.members[..members]
        .iter()
        .map(|m| m.json["data_offset_sectors"].as_u64().expect("case.json: data_offset_sectors") as usize * SECTOR)
        .collect();
    let chunk_of = |member: usize, k: usize| -> &[u8] {
        let start = data_offsets[member] + k * chunk;
        &images[member][start..start + chunk]
    };

    let data_count = members - 2;
    let chunk_sectors = (chunk / SECTOR) as u64;
    let mut reordered_stripes = 0;
    for k in 0..stripes {
        let map = stripe_map(layout, members, k);

        // The layout is right if each logical data chunk holds the array pattern it should.
        for (j, &member) in map.data.iter().enumerate() {
            let first_sector = (k * data_count + j) as u64 * chunk_sectors;
            assert!(
                chunk_of(member, k) == pattern(case.case_number, first_sector, chunk_sectors).as_slice(),
                "{name} stripe {k}: member {member} does not hold logical chunk {j}"
            );
        }

        let order = syndrome_order(&map, members);
        if order != map.data {
            reordered_stripes += 1;
        }
        let data: Vec<&[u8]> = order.iter().map(|&m| chunk_of(m, k)).collect();
        assert!(pq_matches(chunk_of(map.p, k), chunk_of(map.q, k), &data));
        let block_members: Vec<usize> = order.iter().copied().chain([map.p, map.q]).collect();
        let original: Vec<&[u8]> = block_members.iter().map(|&m| chunk_of(m, k)).collect();
        // Every kernel this CPU runs, called directly: the crate's plain functions use one
        // kernel chosen once per process.
        for kernel in Kernel::available_kernels() {
            check_stripe(kernel, name, k, &data, &original, &block_members, &map);
        }
    }
    reordered_stripes
}

/// P and Q of one stripe's data (in syndrome order) equal md's, and every single member and
/// every pair of members lost is rebuilt from the rest.
fn check_stripe(
    kernel: Kernel,
    name: &str,
    k: usize,
    data: &[&[u8]],
    original: &[&[u8]],
    block_members: &[usize],
    map: &StripeMap,
) {
    let members = original.len();
    let chunk = original[0].len();
    let mut p = vec![0u8; chunk];
    let mut q = vec![0u8; chunk];
    kernel.gen_pq(&mut p, &mut q, data);
    assert!(p == original[members - 2], "{name} stripe {k} ({kernel}): P differs from member {}", map.p);
    assert!(q == original[members - 1], "{name} stripe {k} ({kernel}): Q differs from member {}", map.q);
    p.fill(0);
    kernel.gen_p(&mut p, data);
    assert!(p == original[members - 2], "{name} stripe {k} ({kernel}): gen_p differs from member {}", map.p);
    for a in 0..members {
        for b in a..members {
            let missing: Vec<usize> = if a == b { vec![a] } else { vec![a, b] };
            let mut work: Vec<Vec<u8>> = original.iter().map(|c| c.to_vec()).collect();
            for &m in &missing {
                work[m].fill(0xee);
            }
            let mut blocks: Vec<&mut [u8]> = work.iter_mut().map(Vec::as_mut_slice).collect();
            kernel.raid6_recover(&mut blocks, &missing);
            for (i, block) in work.iter().enumerate() {
                assert!(
                    block.as_slice() == original[i],
                    "{name} stripe {k} ({kernel}): block {i} (member {}) wrong after losing {missing:?}",
                    block_members[i]
                );
            }
        }
    }
}

#[test]
fn raid6_4_left_symmetric_parity_matches_kernel() {
    assert_eq!(check_fixture("raid6-4-ls-64k", Layout::LeftSymmetric), 0);
}

#[test]
fn raid6_5_left_symmetric_parity_matches_kernel() {
    assert_eq!(check_fixture("raid6-5-ls-64k", Layout::LeftSymmetric), 0);
}

/// Asymmetric layouts number syndrome slots by physical position after Q, not by logical data
/// order; the kernel's Q is only reproduced with the syndrome order.
#[test]
fn raid6_5_left_asymmetric_parity_matches_kernel_in_syndrome_order() {
    assert!(check_fixture("raid6-5-la-64k", Layout::LeftAsymmetric) > 0);
}

/// The `-6` layouts keep Q on the last member, so the slot walk starts at member 0 while the
/// logical data order rotates with P: here too slot order is not logical order (in half of the
/// stripes for five members), although the layout is "symmetric".
#[test]
fn raid6_5_left_symmetric_6_parity_matches_kernel_in_syndrome_order() {
    assert!(check_fixture("raid6-5-ls6-64k", Layout::LeftSymmetric6) > 0);
}
