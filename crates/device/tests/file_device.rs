//! `FileDevice`'s reads into uninitialised buffers and vectored writes.

use bytes::Bytes;
use uraid_device::{FileDevice, MemberDevice};
use uraid_engine::IoBuf;

#[test]
fn vectored_writes_and_unzeroed_reads_round_trip() {
    let dir = uraid_testkit::scratch_dir("file-device-vectored");
    let path = dir.join("member.img");
    std::fs::write(&path, vec![0xaau8; 1 << 20]).unwrap();
    let dev = FileDevice::open(&path, true).unwrap();

    let a = uraid_testkit::noise(1, 5000);
    let b = uraid_testkit::noise(2, 70_000);
    let c = uraid_testkit::noise(3, 3);
    let mut data = IoBuf::new();
    for p in [&a, &b, &c] {
        data.push(Bytes::copy_from_slice(p));
    }
    dev.write_pieces(4096 + 17, &data).unwrap();

    let got = dev.read_vec(4096, 17 + data.len() + 10).unwrap();
    assert!(got[..17].iter().all(|&x| x == 0xaa), "bytes before the write kept");
    assert_eq!(&got[17..17 + a.len()], &a[..]);
    assert_eq!(&got[17 + a.len()..17 + a.len() + b.len()], &b[..]);
    assert_eq!(&got[17 + a.len() + b.len()..17 + data.len()], &c[..]);
    assert!(got[17 + data.len()..].iter().all(|&x| x == 0xaa), "bytes after the write kept");

    // Past the end: refused, nothing written.
    assert!(dev.read_vec((1 << 20) - 10, 11).is_err());
    assert!(dev.write_pieces((1 << 20) - 10, &data).is_err());
    assert!(dev.read_vec((1 << 20) - 10, 10).unwrap().iter().all(|&x| x == 0xaa));
    assert!(dev.read_vec(0, 0).unwrap().is_empty());
}
