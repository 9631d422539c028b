//! TLS credentials for tests, made at test time with the `openssl` command: a PSK file in
//! psktool's format, and a small X.509 setup (a CA, a server certificate for `localhost` and
//! 127.0.0.1, a client certificate, and a second CA that signed nothing here) laid out in the
//! folders nbdkit, qemu-nbd, libnbd and uraid take. The certificates carry the extensions qemu
//! insists on (basic constraints, key usage, key purpose), so every peer accepts them.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The folders of a test X.509 setup.
pub struct Pki {
    /// `ca-cert.pem`, `server-cert.pem`, `server-key.pem`: for a server (`--tls-certificates`,
    /// qemu's `tls-creds-x509,endpoint=server`).
    pub server_dir: PathBuf,
    /// `ca-cert.pem`, `client-cert.pem`, `client-key.pem`: for a client (`tls-certificates=`,
    /// qemu's `tls-creds-x509,endpoint=client`).
    pub client_dir: PathBuf,
    /// `ca-cert.pem` only: a client that trusts the CA but has no certificate of its own.
    pub ca_only_dir: PathBuf,
    /// `ca-cert.pem` of another CA: a client that trusts nobody who signed the server.
    pub other_ca_dir: PathBuf,
}

/// Whether the `openssl` command can be run; when not, says that the calling test is skipped.
pub fn openssl_installed() -> bool {
    let found = Command::new("openssl").arg("version").output().is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("skipped: openssl is not installed");
    }
    found
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").current_dir(dir).args(args).output().expect("run openssl");
    assert!(out.status.success(), "openssl {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
}

/// A fresh random key of 32 bytes, as psktool makes them, in hex.
pub fn random_psk_hex() -> String {
    let out = Command::new("openssl").args(["rand", "-hex", "32"]).output().expect("run openssl");
    assert!(out.status.success(), "openssl rand failed");
    String::from_utf8(out.stdout).expect("hex").trim().to_string()
}

/// Writes a PSK file at `path` giving `username` a fresh key; returns the key's hex.
pub fn write_psk_file(path: &Path, username: &str) -> String {
    let key = random_psk_hex();
    fs::write(path, format!("{username}:{key}\n")).expect("write the PSK file");
    key
}

/// How every key here is made: an EC key on P-256, unencrypted (`openssl req` arguments).
const NEW_KEY: &[&str] = &["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];

/// A CA `name` in `dir` (`NAME-cert.pem`, `NAME-key.pem`).
fn make_ca(dir: &Path, name: &str) {
    let (key, cert, subject) =
        (format!("{name}-key.pem"), format!("{name}-cert.pem"), format!("/CN=uraid test {name}"));
    let rest = [
        "-keyout",
        &key,
        "-out",
        &cert,
        "-days",
        "2",
        "-subj",
        &subject,
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ];
    openssl(dir, &[&["req", "-x509"], NEW_KEY, &rest].concat());
}

/// A certificate `name` signed by the CA `ca`, for `purpose` (serverAuth or clientAuth).
fn make_leaf(dir: &Path, ca: &str, name: &str, common_name: &str, purpose: &str, alt_names: Option<&str>) {
    let (key, request, subject) = (format!("{name}-key.pem"), format!("{name}.csr"), format!("/CN={common_name}"));
    openssl(dir, &[&["req"], NEW_KEY, &["-keyout", &key, "-out", &request, "-subj", &subject]].concat());
    let mut ext = format!(
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage={purpose}\n"
    );
    if let Some(alt) = alt_names {
        ext.push_str(&format!("subjectAltName={alt}\n"));
    }
    fs::write(dir.join(format!("{name}.ext")), ext).expect("write the extensions");
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}-cert.pem"),
            "-CAkey",
            &format!("{ca}-key.pem"),
            "-CAcreateserial",
            "-out",
            &format!("{name}-cert.pem"),
            "-days",
            "2",
            "-extfile",
            &format!("{name}.ext"),
        ],
    );
}

/// Makes the X.509 setup under `dir` (see [`Pki`]).
pub fn make_pki(dir: &Path) -> Pki {
    let work = dir.join("work");
    fs::create_dir_all(&work).expect("make the work folder");
    make_ca(&work, "ca");
    make_ca(&work, "other-ca");
    make_leaf(&work, "ca", "server", "localhost", "serverAuth", Some("DNS:localhost,IP:127.0.0.1"));
    make_leaf(&work, "ca", "client", "uraid test client", "clientAuth", None);
    let folder = |name: &str, files: &[(&str, &str)]| {
        let d = dir.join(name);
        fs::create_dir_all(&d).expect("make a credentials folder");
        for (from, to) in files {
            fs::copy(work.join(from), d.join(to)).expect("copy a credential");
        }
        d
    };
    Pki {
        server_dir: folder(
            "server",
            &[
                ("ca-cert.pem", "ca-cert.pem"),
                ("server-cert.pem", "server-cert.pem"),
                ("server-key.pem", "server-key.pem"),
            ],
        ),
        client_dir: folder(
            "client",
            &[
                ("ca-cert.pem", "ca-cert.pem"),
                ("client-cert.pem", "client-cert.pem"),
                ("client-key.pem", "client-key.pem"),
            ],
        ),
        ca_only_dir: folder("ca-only", &[("ca-cert.pem", "ca-cert.pem")]),
        other_ca_dir: folder("other-ca", &[("other-ca-cert.pem", "ca-cert.pem")]),
    }
}
