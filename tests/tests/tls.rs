//! HTTPS end to end: a daemon with `[tls]` and a self-signed certificate made at test time
//! (rcgen) serves the API over TLS only; the real CLI trusts it with `--ca-cert` (submit,
//! list, a job that runs to `succeeded`), refuses it without, and plain HTTP to the TLS
//! port gets no HTTP answer. A bad `[tls]` table stops `gantry serve` at start.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::{Daemon, Serve, gantry_bin};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// A self-signed certificate for localhost/127.0.0.1 and its key, written into `dir`.
fn self_signed(dir: &Path) -> (PathBuf, PathBuf) {
    let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    let made = rcgen::generate_simple_self_signed(names).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    // A key others may read is refused, as ssh refuses one.
    let private = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o600);
    std::fs::set_permissions(&key, private).unwrap();
    (cert, key)
}

/// Runs the CLI against `server`, with `--ca-cert` when given; no token, no CA from the
/// environment.
fn cli(server: &str, ca_cert: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = Command::new(gantry_bin());
    cmd.args(["--server", server])
        .env_remove("GANTRY_CA_CERT")
        .env_remove("GANTRY_SERVER")
        .env_remove("GANTRY_TOKEN")
        .env("HOME", "/nonexistent");
    if let Some(ca) = ca_cert {
        cmd.arg("--ca-cert").arg(ca);
    }
    cmd.args(args).output().expect("cannot run the gantry CLI")
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

#[test]
fn the_cli_submits_and_lists_over_https_and_refuses_an_unknown_certificate() {
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(certs.path());
    let d = Daemon::start_tls(2, "", &cert, &key);
    let url = d.url().to_string();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    assert!(
        d.log_tail().contains("gantry tls: on, certificate ") && d.log_tail().contains("cert.pem"),
        "{}",
        d.log_tail()
    );

    let out = cli(
        &url,
        Some(&cert),
        &[
            "submit",
            "--name",
            "over-tls",
            "--gpus",
            "1",
            "--",
            "/bin/sh",
            "-c",
            "echo hello-tls",
        ],
    );
    assert!(out.status.success(), "submit failed: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let id: u64 = stdout
        .trim()
        .strip_prefix("submitted job ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected submit output {stdout:?}"));
    let done = d.wait_state(id, "succeeded");
    assert_eq!(done["exit_code"], 0, "{done}");

    let out = cli(&url, Some(&cert), &["jobs"]);
    assert!(out.status.success(), "jobs failed: {}", text(&out.stderr));
    let listing = text(&out.stdout);
    assert!(
        listing.contains("over-tls") && listing.contains("succeeded"),
        "{listing}"
    );
    let out = cli(&url, Some(&cert), &["logs", &id.to_string()]);
    assert_eq!(
        text(&out.stdout).trim(),
        "hello-tls",
        "{}",
        text(&out.stderr)
    );

    // No trust for the self-signed certificate: a clear certificate error, nothing sent.
    let out = cli(&url, None, &["jobs"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("cannot verify the daemon's certificate"),
        "{err}"
    );
    assert!(err.contains("--ca-cert"), "{err}");

    // A different self-signed certificate is not trusted either.
    let other_dir = tempfile::tempdir().unwrap();
    let (other, _) = self_signed(other_dir.path());
    let err = text(&cli(&url, Some(&other), &["jobs"]).stderr);
    assert!(
        err.contains("cannot verify the daemon's certificate"),
        "{err}"
    );

    // A --ca-cert file that holds no certificate is named.
    let err = text(&cli(&url, Some(&key), &["jobs"]).stderr);
    assert!(
        err.contains("--ca-cert") && err.contains("holds no PEM certificate"),
        "{err}"
    );
}

#[test]
fn plain_http_to_the_tls_port_gets_no_http_answer() {
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(certs.path());
    let d = Daemon::start_tls(1, "", &cert, &key);
    let (status, health) = d.get("/v1/health");
    assert_eq!(status, 200, "{health}");
    let addr = d.url().trim_start_matches("https://").to_string();

    let mut tcp = std::net::TcpStream::connect(&addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    tcp.write_all(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    // The server closes the connection after the failed handshake (or resets it).
    let _ = tcp.read_to_end(&mut answer);
    assert!(
        !answer.starts_with(b"HTTP/"),
        "plain HTTP got an HTTP answer: {:?}",
        text(&answer)
    );

    // The CLI with an http:// URL fails too, and the daemon keeps serving HTTPS.
    let out = cli(&format!("http://{addr}"), None, &["jobs"]);
    assert!(!out.status.success(), "{}", text(&out.stdout));
    assert_eq!(d.get("/v1/health").0, 200);
}

#[test]
fn a_bad_tls_table_stops_the_daemon_at_start() {
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(certs.path());
    let missing_key = format!("[tls]\ncert = {:?}\n", cert.display().to_string());
    let mut serve = Serve::start("127.0.0.1:0", &missing_key);
    let status = serve
        .wait_listening_or_exit()
        .expect("it listened without tls.key");
    assert!(!status.success());
    assert!(
        serve
            .stderr()
            .contains("tls.key must be set together with tls.cert"),
        "{}",
        serve.stderr()
    );

    let garbage = certs.path().join("garbage.pem");
    std::fs::write(&garbage, "not pem at all").unwrap();
    let bad_cert = format!(
        "[tls]\ncert = {:?}\nkey = {:?}\n",
        garbage.display().to_string(),
        key.display().to_string()
    );
    let mut serve = Serve::start("127.0.0.1:0", &bad_cert);
    let status = serve
        .wait_listening_or_exit()
        .expect("it listened with a garbage tls.cert");
    assert!(!status.success());
    let err = serve.stderr();
    assert!(
        err.contains("tls.cert") && err.contains("holds no PEM certificate"),
        "{err}"
    );
}
