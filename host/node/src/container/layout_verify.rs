//! Checking an OCI layout against its digests before the cache trusts it: the manifest a tag
//! names must hash to the digest `index.json` claims for it, and the configuration and every
//! layer the manifest lists must hash to theirs (and have the size it says). An unpacked
//! image (`rootfs/<manifest digest>`) is made only from a layout checked here, and reused
//! only for a layout whose manifest hashes to that digest: a layout that only *claims* a
//! digest (its `index.json` names one) never gets the image another user's task unpacked.
//!
//! Owns: reading `index.json`, the manifest's descriptors, hashing blobs. Does not own where
//! layouts come from (`image_store`, `local_import`) nor unpacking.

use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Why a layout is not what it claims.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("{path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path}: not valid JSON: {message}")]
    Json { path: PathBuf, message: String },
    #[error("no manifest tagged `{tag}` in {layout}")]
    NoTag { tag: String, layout: PathBuf },
    #[error("`{0}` is not a sha256 digest")]
    BadDigest(String),
    #[error("{what} {digest} does not match its content (it hashes to sha256:{actual})")]
    Mismatch {
        what: &'static str,
        digest: String,
        actual: String,
    },
    #[error("{what} {digest} is {actual} bytes, its descriptor says {expected}")]
    Size {
        what: &'static str,
        digest: String,
        actual: u64,
        expected: u64,
    },
    #[error("the manifest {0} is not an image manifest (no config or layers)")]
    NotAnImage(String),
}

/// One blob the manifest names: its digest, size and media type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Blob {
    pub digest: String,
    pub size: u64,
    pub media_type: String,
}

/// The 64 hex digits of a `sha256:` digest, or why not.
pub(crate) fn sha256_hex(digest: &str) -> Result<&str, VerifyError> {
    let hex = digest.strip_prefix("sha256:").unwrap_or("");
    if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(VerifyError::BadDigest(digest.to_string()));
    }
    Ok(hex)
}

/// The path of the blob `digest` in the layout at `layout`.
pub(crate) fn blob_path(layout: &Path, digest: &str) -> Result<PathBuf, VerifyError> {
    Ok(layout.join("blobs/sha256").join(sha256_hex(digest)?))
}

fn read_json(path: &Path) -> Result<serde_json::Value, VerifyError> {
    let bytes = std::fs::read(path).map_err(|source| VerifyError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|e| VerifyError::Json {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// The digest `index.json` of `layout` claims for the manifest tagged `tag` (not checked).
pub(crate) fn claimed_digest(layout: &Path, tag: &str) -> Result<String, VerifyError> {
    let index = read_json(&layout.join("index.json"))?;
    let manifests = index["manifests"].as_array().cloned().unwrap_or_default();
    let found = manifests
        .iter()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"].as_str() == Some(tag))
        .and_then(|m| m["digest"].as_str())
        .ok_or_else(|| VerifyError::NoTag {
            tag: tag.to_string(),
            layout: layout.to_path_buf(),
        })?;
    sha256_hex(found)?;
    Ok(found.to_string())
}

/// Hashes the file at `path` (and counts its bytes).
fn hash_file(path: &Path) -> Result<(String, u64), VerifyError> {
    let err = |source| VerifyError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(err)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(err)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        total += n as u64;
    }
    Ok((hex::encode(hasher.finalize()), total))
}

/// Checks that the blob `digest` of `layout` hashes to it (and is `size` bytes when given).
fn check_blob(
    layout: &Path,
    what: &'static str,
    digest: &str,
    size: Option<u64>,
) -> Result<(), VerifyError> {
    let (actual, bytes) = hash_file(&blob_path(layout, digest)?)?;
    if actual != sha256_hex(digest)? {
        return Err(VerifyError::Mismatch {
            what,
            digest: digest.to_string(),
            actual,
        });
    }
    match size {
        Some(expected) if expected != bytes => Err(VerifyError::Size {
            what,
            digest: digest.to_string(),
            actual: bytes,
            expected,
        }),
        _ => Ok(()),
    }
}

/// The manifest digest tagged `tag` in `layout`, after checking that the manifest blob hashes
/// to it (cheap: one small file). Enough to reuse an unpacked image Gantry made itself from a
/// fully checked layout of that digest.
pub(crate) fn verified_manifest_digest(layout: &Path, tag: &str) -> Result<String, VerifyError> {
    let digest = claimed_digest(layout, tag)?;
    check_blob(layout, "the manifest", &digest, None)?;
    Ok(digest)
}

/// The configuration and layers the (checked) manifest `digest` of `layout` lists.
pub(crate) fn manifest_blobs(
    layout: &Path,
    digest: &str,
) -> Result<(Blob, Vec<Blob>), VerifyError> {
    let manifest = read_json(&blob_path(layout, digest)?)?;
    let blob = |v: &serde_json::Value| -> Option<Blob> {
        Some(Blob {
            digest: v["digest"].as_str()?.to_string(),
            size: v["size"].as_u64()?,
            media_type: v["mediaType"].as_str().unwrap_or("").to_string(),
        })
    };
    let config = blob(&manifest["config"]);
    let layers: Option<Vec<Blob>> = manifest["layers"]
        .as_array()
        .map(|ls| ls.iter().map(blob).collect::<Option<Vec<_>>>())
        .unwrap_or(None);
    match (config, layers) {
        (Some(config), Some(layers)) => Ok((config, layers)),
        _ => Err(VerifyError::NotAnImage(digest.to_string())),
    }
}

/// Checks every blob the manifest tagged `tag` in the layout at `layout` needs (the
/// manifest, its configuration, each layer) against its sha256 digest and size; returns the
/// manifest's digest. Call it on any layout before an image is unpacked from it.
pub(crate) fn verify_layout(layout: &Path, tag: &str) -> Result<String, VerifyError> {
    let digest = verified_manifest_digest(layout, tag)?;
    let (config, layers) = manifest_blobs(layout, &digest)?;
    check_blob(
        layout,
        "the configuration",
        &config.digest,
        Some(config.size),
    )?;
    for layer in &layers {
        check_blob(layout, "the layer", &layer.digest, Some(layer.size))?;
    }
    Ok(digest)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Writes `bytes` as a blob of `layout`; returns its digest.
    fn put(layout: &Path, bytes: &[u8]) -> String {
        let hex = hex::encode(Sha256::digest(bytes));
        std::fs::write(layout.join("blobs/sha256").join(&hex), bytes).unwrap();
        format!("sha256:{hex}")
    }

    fn layout_with(dir: &Path, layer: &[u8]) -> (String, String) {
        std::fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
        let config = put(dir, b"{}");
        let layer_digest = put(dir, layer);
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": 2},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest, "size": layer.len()}],
        });
        let manifest = put(dir, manifest.to_string().as_bytes());
        let index = serde_json::json!({"schemaVersion": 2, "manifests": [
            {"digest": manifest, "size": 1, "annotations": {"org.opencontainers.image.ref.name": "t"}}]});
        std::fs::write(dir.join("index.json"), index.to_string()).unwrap();
        (manifest, layer_digest)
    }

    #[test]
    fn a_layout_passes_only_when_every_blob_hashes_to_its_digest() {
        let tmp = tempfile::tempdir().unwrap();
        let (manifest, layer) = layout_with(tmp.path(), b"layer bytes");
        assert_eq!(verify_layout(tmp.path(), "t").unwrap(), manifest);
        assert!(matches!(
            verify_layout(tmp.path(), "other"),
            Err(VerifyError::NoTag { .. })
        ));
        // A layer replaced under its name.
        std::fs::write(blob_path(tmp.path(), &layer).unwrap(), b"layer bytez").unwrap();
        let err = verify_layout(tmp.path(), "t").unwrap_err();
        assert!(matches!(err, VerifyError::Mismatch { .. }), "{err}");
        assert_eq!(
            verified_manifest_digest(tmp.path(), "t").unwrap(),
            manifest,
            "the manifest itself is still the one claimed"
        );
        // An index that only claims a digest whose blob is something else.
        let claimed = "sha256:".to_string() + &"ab".repeat(32);
        std::fs::write(blob_path(tmp.path(), &claimed).unwrap(), b"{}").unwrap();
        let index = serde_json::json!({"manifests": [
            {"digest": claimed, "annotations": {"org.opencontainers.image.ref.name": "t"}}]});
        std::fs::write(tmp.path().join("index.json"), index.to_string()).unwrap();
        assert!(matches!(
            verified_manifest_digest(tmp.path(), "t"),
            Err(VerifyError::Mismatch { .. })
        ));
        assert!(sha256_hex("sha256:../../etc").is_err());
    }
}
