#![allow(clippy::unwrap_used)]
use super::*;
use sha2::{Digest, Sha256};
use std::os::unix::fs::PermissionsExt;

const NOBODY: Credentials = Credentials {
    uid: 65534,
    gid: 65534,
    groups: Vec::new(),
};

const NO_BOUND: Bound = Bound {
    bytes: None,
    name: String::new(),
};

fn put(layout: &Path, bytes: &[u8]) -> String {
    let hex = hex::encode(Sha256::digest(bytes));
    fs::write(layout.join("blobs/sha256").join(&hex), bytes).unwrap();
    format!("sha256:{hex}")
}

/// A layout at `dir` tagged `t` whose manifest lists one layer `layer`; its manifest's digest.
fn layout_at(dir: &Path, layer: &[u8]) -> String {
    fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
    let config = put(dir, b"{}");
    let layer_digest = put(dir, layer);
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": 2},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest, "size": layer.len()}],
    });
    let bytes = manifest.to_string().into_bytes();
    let digest = put(dir, &bytes);
    let index = serde_json::json!({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest,
        "size": bytes.len(), "annotations": {"org.opencontainers.image.ref.name": "t"}}]});
    fs::write(dir.join("index.json"), index.to_string()).unwrap();
    digest
}

fn me() -> Credentials {
    Credentials {
        uid: gantry_private_files::daemon_uid(),
        gid: gantry_private_files::daemon_gid(),
        groups: Vec::new(),
    }
}

#[test]
fn a_layout_is_copied_and_checked_and_a_claimed_digest_without_its_content_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let digest = layout_at(&src, b"layer bytes");
    let dst = tmp.path().join("dst");
    copy_layout(&me(), &src, "t", &dst, &NO_BOUND).unwrap();
    assert_eq!(verify_layout(&dst, STAGED_TAG).unwrap(), digest);

    // A layout whose index claims that digest but holds other bytes under its name.
    let liar = tmp.path().join("liar");
    layout_at(&liar, b"other bytes");
    let index = fs::read_to_string(liar.join("index.json")).unwrap();
    let own = serde_json::from_str::<serde_json::Value>(&index).unwrap()["manifests"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    fs::write(liar.join("index.json"), index.replace(&own, &digest)).unwrap();
    let own_hex = own.trim_start_matches("sha256:");
    let claimed_hex = digest.trim_start_matches("sha256:");
    fs::rename(
        liar.join("blobs/sha256").join(own_hex),
        liar.join("blobs/sha256").join(claimed_hex),
    )
    .unwrap();
    let dst = tmp.path().join("dst-liar");
    let copied = copy_layout(&me(), &liar, "t", &dst, &NO_BOUND);
    let checked = copied.map_err(|e| e.to_string()).and_then(|()| {
        verify_layout(&dst, STAGED_TAG)
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    assert!(checked.is_err(), "a claimed digest was accepted");

    // A blob longer than its descriptor says is cut at the size and refused.
    let long = tmp.path().join("long");
    let d = layout_at(&long, b"abc");
    let (_, layers) = manifest_blobs(&long, &d).unwrap();
    let path = blob_path(&long, &layers[0].digest).unwrap();
    fs::write(&path, b"abcdef").unwrap();
    let err = copy_layout(&me(), &long, "t", &tmp.path().join("dst-long"), &NO_BOUND).unwrap_err();
    assert!(err.contains("over"), "{err}");

    // Past the bound, nothing is copied.
    let small = Bound {
        bytes: Some(8),
        name: "[containers] max_pull_mib".into(),
    };
    let err = copy_layout(&me(), &src, "t", &tmp.path().join("dst-bound"), &small).unwrap_err();
    assert!(err.contains("max_pull_mib"), "{err}");
}

#[test]
fn a_layout_behind_another_users_private_directory_is_refused_for_the_user() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "this test switches users and needs root (CI runs it as root)"
    );
    let tmp = tempfile::tempdir().unwrap();
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let private = tmp.path().join("private");
    let src = private.join("layout");
    layout_at(&src, b"secret layer");
    for entry in ["", "layout", "layout/blobs", "layout/blobs/sha256"] {
        fs::set_permissions(private.join(entry), fs::Permissions::from_mode(0o755)).unwrap();
    }
    fs::set_permissions(&private, fs::Permissions::from_mode(0o700)).unwrap();
    let err = copy_layout(&NOBODY, &src, "t", &tmp.path().join("dst"), &NO_BOUND).unwrap_err();
    assert!(err.contains("Permission denied"), "{err}");
    // Reachable, the same layout is copied for nobody.
    fs::set_permissions(&private, fs::Permissions::from_mode(0o755)).unwrap();
    let readable = |p: &Path| fs::set_permissions(p, fs::Permissions::from_mode(0o644));
    for entry in fs::read_dir(src.join("blobs/sha256")).unwrap() {
        readable(&entry.unwrap().path()).unwrap();
    }
    readable(&src.join("index.json")).unwrap();
    copy_layout(&NOBODY, &src, "t", &tmp.path().join("dst"), &NO_BOUND).unwrap();
}
