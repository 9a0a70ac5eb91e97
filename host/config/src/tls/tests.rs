#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A fresh self-signed certificate for 127.0.0.1/localhost: (cert PEM, key PEM).
fn self_signed() -> (String, String) {
    let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    let made = rcgen::generate_simple_self_signed(names).unwrap();
    (made.cert.pem(), made.signing_key.serialize_pem())
}

/// Writes the pair into `dir` and returns the `[tls]` settings naming the files.
fn write_pair(dir: &Path, cert: &str, key: &str) -> TlsSettings {
    let (c, k) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&c, cert).unwrap();
    std::fs::write(&k, key).unwrap();
    private(&k);
    TlsSettings {
        cert: Some(c),
        key: Some(k),
    }
}

/// Makes `path` readable by its owner only (a key others may read is refused).
fn private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn load_error(settings: &TlsSettings) -> String {
    ServerTls::load(settings).unwrap_err().to_string()
}

#[test]
fn no_settings_means_plain_http_and_a_valid_pair_loads_with_a_summary() {
    assert!(ServerTls::load(&TlsSettings::default()).unwrap().is_none());
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed();
    let tls = ServerTls::load(&write_pair(dir.path(), &cert, &key))
        .unwrap()
        .unwrap();
    let summary = tls.summary();
    assert!(summary.contains("cert.pem"), "{summary}");
    assert!(
        summary.contains("subject CN=rcgen self signed cert"),
        "{summary}"
    );
    assert!(
        summary.contains("valid until 4096-01-01 00:00:00 UTC"),
        "{summary}"
    );
    assert!(summary.contains("sha256 "), "{summary}");
    assert_eq!(tls.config().alpn_protocols, vec![b"http/1.1".to_vec()]);
}

#[test]
fn config_errors_name_the_setting_and_the_file_problem() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed();
    let good = write_pair(dir.path(), &cert, &key);

    let only_cert = TlsSettings {
        key: None,
        ..good.clone()
    };
    let e = load_error(&only_cert);
    assert!(
        e.contains("tls.key must be set together with tls.cert"),
        "{e}"
    );
    let only_key = TlsSettings {
        cert: None,
        ..good.clone()
    };
    assert!(load_error(&only_key).contains("tls.cert must be set"));

    let missing = TlsSettings {
        key: Some(dir.path().join("nope.pem")),
        ..good.clone()
    };
    let e = load_error(&missing);
    assert!(
        e.starts_with("tls.key: cannot read ") && e.contains("nope.pem"),
        "{e}"
    );

    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "this is not a certificate\n").unwrap();
    let e = load_error(&TlsSettings {
        cert: Some(garbage.clone()),
        ..good.clone()
    });
    assert!(
        e.starts_with("tls.cert: ") && e.contains("holds no PEM certificate"),
        "{e}"
    );
    let e = load_error(&TlsSettings {
        key: Some(garbage),
        ..good.clone()
    });
    assert!(
        e.starts_with("tls.key: ") && e.contains("holds no PEM private key"),
        "{e}"
    );

    let broken = dir.path().join("broken.pem");
    std::fs::write(&broken, "-----BEGIN CERTIFICATE-----\n!!!\n").unwrap();
    let e = load_error(&TlsSettings {
        cert: Some(broken),
        ..good.clone()
    });
    assert!(
        e.starts_with("tls.cert: ") && e.contains("not valid PEM"),
        "{e}"
    );

    // The certificate in the key's place and a key that does not match the certificate.
    let e = load_error(&TlsSettings {
        key: good.cert.clone(),
        ..good.clone()
    });
    assert!(e.contains("holds no PEM private key"), "{e}");
    let (_, other_key) = self_signed();
    let other = dir.path().join("other-key.pem");
    std::fs::write(&other, other_key).unwrap();
    // A key its group or others may read is refused before anything else is said of it.
    let e = load_error(&TlsSettings {
        key: Some(other.clone()),
        ..good.clone()
    });
    assert!(e.contains("may be read by its group or others"), "{e}");
    private(&other);
    let e = load_error(&TlsSettings {
        key: Some(other),
        ..good
    });
    assert!(e.starts_with("tls.cert/tls.key: "), "{e}");
}

#[test]
fn ca_cert_errors_name_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    assert!(trust_roots(None).unwrap().is_none());
    let e = trust_roots(Some(&dir.path().join("absent.pem")))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("--ca-cert: cannot read "), "{e}");
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "").unwrap();
    let e = trust_roots(Some(&empty)).unwrap_err().to_string();
    assert!(e.contains("holds no PEM certificate"), "{e}");
}

/// A handshake over an in-memory pipe between [`ServerTls`] and [`client_config`], then
/// one line each way; returns the client's error when the handshake fails.
async fn exchange(server: &ServerTls, client: Arc<rustls::ClientConfig>) -> Result<(), String> {
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let acceptor = tokio_rustls::TlsAcceptor::from(server.config());
    let server_side = tokio::spawn(async move {
        let mut tls = acceptor.accept(server_io).await.ok()?;
        let mut buf = [0u8; 5];
        tls.read_exact(&mut buf).await.ok()?;
        tls.write_all(b"pong!").await.ok()?;
        tls.flush().await.ok()?;
        Some(buf)
    });
    let connector = tokio_rustls::TlsConnector::from(client);
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = connector
        .connect(name, client_io)
        .await
        .map_err(|e| e.to_string())?;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    tls.write_all(b"ping!").await.unwrap();
    let mut buf = [0u8; 5];
    tls.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"pong!");
    assert_eq!(server_side.await.unwrap(), Some(*b"ping!"));
    Ok(())
}

#[tokio::test]
async fn the_client_config_trusts_the_given_ca_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed();
    let settings = write_pair(dir.path(), &cert, &key);
    let server = ServerTls::load(&settings).unwrap().unwrap();
    let trusting = client_config(settings.cert.as_deref()).unwrap();
    exchange(&server, trusting).await.unwrap();
    let public_roots_only = client_config(None).unwrap();
    let e = exchange(&server, public_roots_only).await.unwrap_err();
    assert!(e.contains("invalid peer certificate"), "{e}");
    let (other_cert, _) = self_signed();
    let other = dir.path().join("other.pem");
    std::fs::write(&other, other_cert).unwrap();
    let e = exchange(&server, client_config(Some(&other)).unwrap())
        .await
        .unwrap_err();
    assert!(e.contains("invalid peer certificate"), "{e}");
}
