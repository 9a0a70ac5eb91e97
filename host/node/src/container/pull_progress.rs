//! A registry pull seen from outside: which layers an image has (from its manifest, asked
//! of the registry with `skopeo inspect --raw` before the copy), how many of them are in the
//! node's cache so far and at what rate bytes arrive, written as a small JSON file beside
//! the task's other files (`task-N.pull`) while `skopeo copy` runs. The daemon reads it to
//! say why a started job has no process yet: `pulling image X (2 of 5 layers, 310 MiB,
//! 42 MiB/s)`.
//!
//! Owns: the layer list, the progress file's format, counting what arrived. Does not own the
//! copy itself (`image_store`) nor the job's view (the daemon).

use serde::{Deserialize, Serialize};
use std::fs;
use std::io;
use std::path::Path;

/// One layer of the image being pulled: its digest and size in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    pub digest: String,
    pub size: u64,
}

/// What a pull has done so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullProgress {
    /// The image as the job named it.
    pub image: String,
    pub layers_done: usize,
    pub layers_total: usize,
    /// Bytes of layers in the cache (finished, or being written).
    pub bytes_done: u64,
    pub bytes_total: u64,
    /// Milliseconds since the pull began.
    pub elapsed_ms: u64,
}

impl PullProgress {
    /// `pulling image X (n of m layers, a of b MiB, r MiB/s)`, or `(a MiB so far, r MiB/s)`
    /// before the layers are known.
    pub fn message(&self) -> String {
        const MIB: f64 = 1024.0 * 1024.0;
        let secs = (self.elapsed_ms as f64 / 1000.0).max(0.001);
        if self.layers_total == 0 {
            // The registry's manifest has not answered (yet): only what arrived is known.
            return format!(
                "pulling image {} ({:.0} MiB so far, {:.1} MiB/s)",
                self.image,
                self.bytes_done as f64 / MIB,
                self.bytes_done as f64 / MIB / secs
            );
        }
        format!(
            "pulling image {} ({} of {} layers, {:.0} of {:.0} MiB, {:.1} MiB/s)",
            self.image,
            self.layers_done,
            self.layers_total,
            self.bytes_done as f64 / MIB,
            self.bytes_total as f64 / MIB,
            self.bytes_done as f64 / MIB / secs
        )
    }
}

/// The layers of the manifest `manifest` (JSON, as `skopeo inspect --raw` prints it); for
/// an index, `Err(Some(digest))` names the manifest of this machine's platform to ask next.
pub fn layers_of(manifest: &[u8]) -> Result<Vec<Layer>, Option<String>> {
    let value: serde_json::Value = serde_json::from_slice(manifest).map_err(|_| None)?;
    if let Some(layers) = value["layers"].as_array() {
        return Ok(layers
            .iter()
            .filter_map(|l| {
                Some(Layer {
                    digest: l["digest"].as_str()?.to_string(),
                    size: l["size"].as_u64().unwrap_or(0),
                })
            })
            .collect());
    }
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let chosen = value["manifests"].as_array().and_then(|ms| {
        ms.iter().find(|m| {
            m["platform"]["os"].as_str() == Some("linux")
                && m["platform"]["architecture"].as_str() == Some(arch)
        })
    });
    Err(chosen.and_then(|m| m["digest"].as_str().map(str::to_string)))
}

/// The repository of a registry reference (`host/name` of `host/name:tag` or
/// `host/name@sha256:...`).
pub fn repository_of(reference: &str) -> &str {
    if let Some((repo, _)) = reference.split_once('@') {
        return repo;
    }
    match reference.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => repo,
        _ => reference,
    }
}

/// Counts the layers of `layers` present in the OCI layout at `layout` (a finished blob
/// is named by its digest) and the bytes written so far, finished or not.
pub fn measure(image: &str, layout: &Path, layers: &[Layer], elapsed_ms: u64) -> PullProgress {
    let blobs = layout.join("blobs").join("sha256");
    let mut done = 0;
    let mut bytes = 0;
    for layer in layers {
        let hex = layer.digest.trim_start_matches("sha256:");
        if blobs.join(hex).is_file() {
            done += 1;
            bytes += layer.size;
        }
    }
    // Blobs being written are files of other names in the same directory.
    if let Ok(entries) = fs::read_dir(&blobs) {
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            let known = name.len() == 64 && name.chars().all(|c| c.is_ascii_hexdigit());
            if !known && let Ok(meta) = e.metadata() {
                bytes += meta.len();
            }
        }
    }
    PullProgress {
        image: image.to_string(),
        layers_done: done,
        layers_total: layers.len(),
        bytes_done: bytes,
        bytes_total: layers.iter().map(|l| l.size).sum(),
        elapsed_ms,
    }
}

/// Replaces the progress file at `path` (written aside, then renamed).
pub fn write(path: &Path, progress: &PullProgress) -> io::Result<()> {
    let tmp = path.with_extension("pull-tmp");
    fs::write(
        &tmp,
        serde_json::to_vec(progress).map_err(io::Error::other)?,
    )?;
    fs::rename(&tmp, path)
}

/// The progress file at `path`, when a pull is under way.
pub fn read(path: &Path) -> Option<PullProgress> {
    serde_json::from_slice(&fs::read(path).ok()?).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_manifest_gives_its_layers_and_an_index_names_this_platform() {
        let manifest = br#"{"schemaVersion":2,"layers":[
            {"digest":"sha256:aa","size":10},{"digest":"sha256:bb","size":20}]}"#;
        let layers = layers_of(manifest).unwrap();
        assert_eq!(layers.len(), 2);
        assert_eq!(layers[1].size, 20);
        let index = format!(
            r#"{{"manifests":[{{"digest":"sha256:other","platform":{{"os":"linux","architecture":"s390x"}}}},
            {{"digest":"sha256:mine","platform":{{"os":"linux","architecture":"{}"}}}}]}}"#,
            match std::env::consts::ARCH {
                "x86_64" => "amd64",
                "aarch64" => "arm64",
                a => a,
            }
        );
        assert_eq!(
            layers_of(index.as_bytes()).unwrap_err(),
            Some("sha256:mine".to_string())
        );
        assert_eq!(layers_of(b"not json").unwrap_err(), None);
    }

    #[test]
    fn repositories_drop_their_tag_or_digest_but_not_a_port() {
        assert_eq!(repository_of("127.0.0.1:5000/a/b:v1"), "127.0.0.1:5000/a/b");
        assert_eq!(repository_of("127.0.0.1:5000/a/b"), "127.0.0.1:5000/a/b");
        assert_eq!(repository_of("reg/a@sha256:00"), "reg/a");
        assert_eq!(repository_of("busybox:1"), "busybox");
    }

    #[test]
    fn progress_counts_finished_layers_and_bytes_in_flight() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = dir.path().join("blobs/sha256");
        fs::create_dir_all(&blobs).unwrap();
        let a = "a".repeat(64);
        let b = "b".repeat(64);
        fs::write(blobs.join(&a), vec![0; 1000]).unwrap();
        fs::write(blobs.join("oci-put-blob123"), vec![0; 300]).unwrap();
        let layers = [
            Layer {
                digest: format!("sha256:{a}"),
                size: 1000,
            },
            Layer {
                digest: format!("sha256:{b}"),
                size: 4000,
            },
        ];
        let p = measure("img:v1", dir.path(), &layers, 2000);
        assert_eq!((p.layers_done, p.layers_total), (1, 2));
        assert_eq!((p.bytes_done, p.bytes_total), (1300, 5000));
        let file = dir.path().join("task-0.pull");
        write(&file, &p).unwrap();
        assert_eq!(read(&file).unwrap(), p);
        assert!(
            p.message()
                .starts_with("pulling image img:v1 (1 of 2 layers")
        );
        let unknown = measure("img:v1", dir.path(), &[], 2000);
        assert!(
            unknown
                .message()
                .starts_with("pulling image img:v1 (0 MiB so far"),
            "{}",
            unknown.message()
        );
    }
}
