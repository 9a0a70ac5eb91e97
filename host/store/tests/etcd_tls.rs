//! etcd with TLS and client certificates (`[store]` `ca`, `cert`, `key`): a 1-member
//! cluster started for the test serves HTTPS and requires a client certificate signed by
//! its CA (certificates made here with rcgen). The store works with the right files and
//! fails, naming etcd, without a client certificate or with another CA.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_api::model::{JobRecord, JobSpec};
use gantry_store::test_etcd::{TestEtcd, TlsFiles};
use gantry_store::{HistoryBackend, StateBackend, Store};
use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
use std::path::{Path, PathBuf};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A CA, and a certificate it signed for `names` with `usage`: (CA PEM, cert PEM, key PEM).
fn issue(names: &[&str], usage: ExtendedKeyUsagePurpose) -> (String, String, String) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let (cert, key) = sign(&Issuer::new(ca, ca_key), names, usage);
    (ca_cert.pem(), cert, key)
}

fn sign(
    issuer: &Issuer<'_, KeyPair>,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    // etcd's gateway calls its own gRPC server with the member's certificate, so a
    // member's certificate is for both ends (as etcd's own guides make them).
    params.extended_key_usages = match usage {
        ExtendedKeyUsagePurpose::ServerAuth => {
            vec![usage, ExtendedKeyUsagePurpose::ClientAuth]
        }
        other => vec![other],
    };
    let cert = params.signed_by(&key, issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

#[test]
fn etcd_over_tls_with_client_certificates_takes_the_right_ones_only() {
    let dir = tempfile::tempdir().unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_pem = ca_params.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca_params, ca_key);
    let (server, server_key) = sign(&issuer, &["127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth);
    let (client, client_key) = sign(&issuer, &["gantry"], ExtendedKeyUsagePurpose::ClientAuth);
    let tls = TlsFiles {
        ca: write(dir.path(), "ca.pem", &ca_pem),
        server_cert: write(dir.path(), "server.pem", &server),
        server_key: write(dir.path(), "server-key.pem", &server_key),
    };
    let client_files = (
        write(dir.path(), "client.pem", &client),
        write(dir.path(), "client-key.pem", &client_key),
    );
    let cluster = TestEtcd::start_tls(1, tls, client_files).unwrap();
    let config = cluster.config("/tls/");
    assert!(config.endpoints[0].starts_with("https://"));

    let data = tempfile::tempdir().unwrap();
    let store = Store::open_with(
        data.path(),
        4,
        &StateBackend::Etcd(config.clone()),
        &HistoryBackend::Sqlite,
    )
    .unwrap();
    let spec: JobSpec = serde_json::from_str(r#"{"argv": ["true"]}"#).unwrap();
    store.put_job(&JobRecord::new(1, spec, 1)).unwrap();
    assert!(store.job(1).unwrap().is_some());
    drop(store);

    let open = |config: gantry_store::etcd::EtcdConfig| {
        let data = tempfile::tempdir().unwrap();
        Store::open_with(
            data.path(),
            4,
            &StateBackend::Etcd(config),
            &HistoryBackend::Sqlite,
        )
        .map(drop)
    };
    let mut anonymous = config.clone();
    anonymous.cert = None;
    anonymous.key = None;
    let err = open(anonymous)
        .expect_err("etcd wants a client certificate")
        .to_string();
    assert!(err.contains("etcd (https://127.0.0.1:"), "{err}");
    // So a controller's start-up check (issue 43, finding 13) finds that the members refuse
    // a client without credentials, although it never gets an answer of theirs.
    assert!(!gantry_store::etcd::accepts_anonymous(&config).unwrap());

    let (other_ca, other_cert, other_key) = issue(&["gantry"], ExtendedKeyUsagePurpose::ClientAuth);
    let mut stranger = config.clone();
    stranger.ca = Some(write(dir.path(), "other-ca.pem", &other_ca));
    stranger.cert = Some(write(dir.path(), "other.pem", &other_cert));
    stranger.key = Some(write(dir.path(), "other-key.pem", &other_key));
    let err = open(stranger)
        .expect_err("neither side trusts the other")
        .to_string();
    assert!(err.contains("etcd (https://127.0.0.1:"), "{err}");

    let mut half = config;
    half.key = None;
    let err = open(half)
        .expect_err("a certificate without its key")
        .to_string();
    assert!(err.contains("store.cert and store.key"), "{err}");
}
