//! Test support shared by uraid's crates (dev-dependency only).
//!
//! It owns what every layer's tests need:
//! - member images of a new md array with real superblocks ([`NewMdArray`]);
//! - discovery of the md fixtures that the real Linux kernel made (`shared/fixtures/md/<case>/`),
//!   with their `case.json` and their member images decompressed on demand into a cache;
//! - the md-oracle data pattern, so a test can say what any logical sector of a fixture holds;
//! - the independent Vinum reader (`dissect.volume`) the gvinum cross-checks run ([`vinum_peer`]);
//! - NetBSD's own RAIDframe driver, run as a judge ([`raidframe_oracle`]);
//! - TLS credentials (a PSK file, a CA with server and client certificates) for the NBD TLS
//!   tests ([`tls_creds`]).
//!
//! Fixture cases are discovered, never listed, so new cases are picked up without code changes.
//! A missing fixture folder is an error, not a skip: a suite that silently tests nothing is worse
//! than a red one.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use sha2::{Digest, Sha256};

mod new_md;
pub use new_md::NewMdArray;
pub mod raidframe_oracle;
pub mod tls_creds;
pub mod vinum_peer;

/// Where the kernel-made fixtures live: `$URAID_FIXTURES`, else `shared/fixtures/md` beside the
/// repository (the layout CI uses).
pub fn fixtures_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("URAID_FIXTURES") {
        return PathBuf::from(dir);
    }
    workspace_root().join("../shared/fixtures/md")
}

/// The workspace root (the folder holding the top-level Cargo.toml).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A scratch folder under the workspace's target directory, created if needed.
pub fn scratch_dir(name: &str) -> PathBuf {
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| workspace_root().join("target"));
    let dir = target.join("uraid-test-scratch").join(name);
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// One member of a fixture case as `case.json` records it.
#[derive(Debug, Clone)]
pub struct FixtureMember {
    /// Position in the `mdadm --create` command (= raid slot for active members).
    pub index: usize,
    /// `active`, `failed-stale`, `missing`, `spare`, `re-added`.
    pub status: String,
    /// The compressed image, or `None` for a missing member.
    pub compressed: Option<PathBuf>,
    /// sha256 of the uncompressed image, when recorded.
    pub image_sha256: Option<String>,
    /// The member's record in `case.json`.
    pub json: Value,
}

/// One fixture folder.
#[derive(Debug, Clone)]
pub struct FixtureCase {
    pub name: String,
    pub dir: PathBuf,
    pub case_number: u64,
    pub json: Value,
    pub members: Vec<FixtureMember>,
}

/// Every fixture case folder (those holding a `case.json`), sorted by name.
///
/// Panics with a clear message when the fixture folder is missing or empty.
pub fn cases() -> Vec<FixtureCase> {
    let dir = fixtures_dir();
    let entries = fs::read_dir(&dir).unwrap_or_else(|e| {
        panic!("md fixtures not found at {} ({e}); set URAID_FIXTURES to the fixtures/md folder", dir.display())
    });
    let mut out = Vec::new();
    for entry in entries {
        let path = entry.expect("readable fixture folder").path();
        let case_json = path.join("case.json");
        if case_json.is_file() {
            out.push(load_case(&path));
        }
    }
    assert!(!out.is_empty(), "no fixture cases under {}", dir.display());
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Load one case folder.
pub fn load_case(dir: &Path) -> FixtureCase {
    let text = fs::read_to_string(dir.join("case.json"))
        .unwrap_or_else(|e| panic!("{}: cannot read case.json: {e}", dir.display()));
    let json: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: bad case.json: {e}", dir.display()));
    let name = json["name"].as_str().expect("case.json: name").to_string();
    let case_number = json["case_number"].as_u64().expect("case.json: case_number");
    let members = json["members"]
        .as_array()
        .expect("case.json: members")
        .iter()
        .map(|m| {
            let index = m["index"].as_u64().expect("member index") as usize;
            let compressed = m["file"].as_str().map(|f| dir.join(f)).filter(|p| p.is_file());
            FixtureMember {
                index,
                status: m["status"].as_str().unwrap_or("").to_string(),
                compressed,
                image_sha256: m["image_sha256"].as_str().map(str::to_string),
                json: m.clone(),
            }
        })
        .collect();
    FixtureCase { name, dir: dir.to_path_buf(), case_number, json, members }
}

impl FixtureCase {
    /// The uncompressed image of member `index`, decompressed once into the scratch cache.
    /// `None` for a member that has no image (a `missing` one).
    pub fn member_image(&self, index: usize) -> Option<PathBuf> {
        let member = self.members.iter().find(|m| m.index == index)?;
        let compressed = member.compressed.as_ref()?;
        let cache = scratch_dir("fixtures").join(&self.name);
        fs::create_dir_all(&cache).expect("fixture cache folder");
        let out = cache.join(format!("disk{index}.img"));
        if out.is_file() && member_matches(&out, member) {
            return Some(out);
        }
        decompress(compressed, &out);
        if let Some(want) = &member.image_sha256 {
            let got = sha256_file(&out);
            assert_eq!(&got, want, "{}: decompressed image sha256 differs", out.display());
        }
        Some(out)
    }

    /// Fresh, writable copies of every member image that exists, in `dir`, named `diskN.img`.
    /// Returns `(index, path)` pairs in index order.
    pub fn copy_members_to(&self, dir: &Path) -> Vec<(usize, PathBuf)> {
        fs::create_dir_all(dir).expect("copy target folder");
        let mut out = Vec::new();
        for m in &self.members {
            if let Some(src) = self.member_image(m.index) {
                let dst = dir.join(format!("disk{}.img", m.index));
                fs::copy(&src, &dst).expect("copy fixture image");
                out.push((m.index, dst));
            }
        }
        out
    }

    /// `case.json`'s `array_size_bytes`.
    pub fn array_size_bytes(&self) -> u64 {
        self.json["array_size_bytes"].as_u64().expect("array_size_bytes")
    }

    /// `case.json`'s `array_sha256`.
    pub fn array_sha256(&self) -> String {
        self.json["array_sha256"].as_str().expect("array_sha256").to_string()
    }

    /// Whether the array content is the plain sector pattern (not an ext4 image).
    pub fn is_pattern(&self) -> bool {
        self.json["content"].as_str() == Some("pattern")
    }
}

fn member_matches(path: &Path, member: &FixtureMember) -> bool {
    match &member.image_sha256 {
        Some(want) => &sha256_file(path) == want,
        None => true,
    }
}

fn decompress(src: &Path, dst: &Path) {
    // Unique per process and thread: tests of one binary run on several threads and may
    // decompress the same image at once; each writes its own file and renames it into place.
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dst.with_extension(format!("tmp{}-{n}", std::process::id()));
    let file = fs::File::create(&tmp).expect("create decompression target");
    let status = Command::new("xz")
        .arg("-dc")
        .arg(src)
        .stdout(file)
        .status()
        .unwrap_or_else(|e| panic!("cannot run xz (install xz-utils): {e}"));
    assert!(status.success(), "xz -dc {} failed", src.display());
    fs::rename(&tmp, dst).expect("rename decompressed image");
}

/// Hex sha256 of a whole file.
pub fn sha256_file(path: &Path) -> String {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    sha256_hex(&bytes)
}

/// Hex sha256 of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Logical sector `s` of the md-oracle pattern for case `case`: magic, `s`, `case` as LE u64,
/// then 488 bytes of `((s*31 + 7) & 0xff) ^ xor`. The fixtures' current data uses magic
/// `MDORACLE` and xor 0; a failed member's stale data uses `MDSTALE!` and xor 0xff.
pub fn pattern_sector(s: u64, case: u64, magic: &[u8; 8], xor: u8) -> [u8; 512] {
    let mut out = [0u8; 512];
    out[..8].copy_from_slice(magic);
    out[8..16].copy_from_slice(&s.to_le_bytes());
    out[16..24].copy_from_slice(&case.to_le_bytes());
    let fill = (((s.wrapping_mul(31)).wrapping_add(7)) & 0xff) as u8 ^ xor;
    out[24..].fill(fill);
    out
}

/// The current (non-stale) pattern for sectors `first..first+count`.
pub fn pattern(case: u64, first: u64, count: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity((count * 512) as usize);
    for s in first..first + count {
        out.extend_from_slice(&pattern_sector(s, case, b"MDORACLE", 0));
    }
    out
}

/// Deterministic noise (xorshift64 from `seed`): test data that a failure can replay exactly.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// `len` bytes that differ at every offset and from seed to seed (xorshift), for tests that
/// write data and read it back.
pub fn random_bytes(len: u64, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_of_a_fixture_hashes_to_its_recorded_sha() {
        let case = cases().into_iter().find(|c| c.name == "raid5-4-ls-64k").expect("case");
        let bytes = pattern(case.case_number, 0, case.array_size_bytes() / 512);
        assert_eq!(sha256_hex(&bytes), case.array_sha256());
    }

    #[test]
    fn member_images_decompress_to_recorded_hash() {
        let case = cases().into_iter().find(|c| c.name == "raid1-2").expect("case");
        let img = case.member_image(0).expect("member 0 image");
        assert_eq!(fs::metadata(img).unwrap().len(), 4 << 20);
    }
}
