//! What the node's image cache holds, and its collection: the unpacked images
//! (`rootfs/<digest>`, each with the references it was asked by, its size and when a task
//! last used it) listed for `gantry images`, and the least recently used ones removed while
//! the cache is over `[containers] cache_max_mib`, never one a container runs from.
//!
//! Before an image is unpacked, `cache_room::make_room` checks that its estimated size fits the
//! cache's bound (`cache_max_mib`) and the share of the user whose task brings it
//! (`cache_max_mib_per_user`, charged through `.owner`), removing that user's, then anyone's,
//! least recently used images not in use to make room, and refusing with the reason when
//! that is not enough (`cache_room`).
//!
//! Owns: the files beside each unpacked image (`.references`, `.size`, `.owner`, the time of
//! `.complete`), the cache's lock files ([`lock_file`]) and the collection. Does not own pulling and unpacking (`image_store`).

use super::error::{ImageError, cache_err};
use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// An image not collected for this long after its last use, whatever the cache's size: a
/// task that just made it ready may not have started its container yet.
pub(crate) const RECENT: Duration = Duration::from_secs(600);

/// One unpacked image (the wire type, shared with agents' answers).
pub use gantry_api::cluster::CachedImage;
use gantry_api::cluster::NodeImages;

pub(crate) fn roots(cache_dir: &Path) -> PathBuf {
    cache_dir.join("rootfs")
}

/// Records that `reference` was made ready as the image in `bundle` now (its size once).
pub(crate) fn record_use(bundle: &Path, reference: &str) -> io::Result<()> {
    let refs = bundle.join(".references");
    let known = fs::read_to_string(&refs).unwrap_or_default();
    if !known.lines().any(|l| l == reference) {
        fs::write(&refs, format!("{known}{reference}\n"))?;
    }
    let size = bundle.join(".size");
    if !size.is_file() {
        fs::write(&size, tree_bytes(&bundle.join("rootfs")).to_string())?;
    }
    fs::File::options()
        .write(true)
        .open(bundle.join(".complete"))?
        .set_modified(SystemTime::now())
}

/// Records that the task of `uid` brought the image in `bundle` (charged to its share).
pub(crate) fn record_owner(bundle: &Path, uid: u32) -> io::Result<()> {
    fs::write(bundle.join(".owner"), uid.to_string())
}

/// Removes one unpacked image (renamed aside first, so a half-removed one is never used).
pub(crate) fn remove_image(cache_dir: &Path, hex: &str) -> io::Result<()> {
    let dir = roots(cache_dir).join(hex);
    let trash = roots(cache_dir).join(format!(".trash-{hex}"));
    fs::rename(&dir, &trash)?;
    fs::remove_dir_all(&trash)
}

/// Bytes of the files under `dir`, never following a link.
pub(crate) fn tree_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(meta) = fs::symlink_metadata(entry.path()) else {
                continue;
            };
            total += meta.len();
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    total
}

/// The root file systems containers of this node run from now (from the runtime's state).
fn in_use(runtime_state: &Path) -> BTreeSet<String> {
    let mut roots = BTreeSet::new();
    for entry in fs::read_dir(runtime_state).into_iter().flatten().flatten() {
        let Ok(text) = fs::read_to_string(entry.path().join("state.json")) else {
            continue;
        };
        if let Ok(state) = serde_json::from_str::<serde_json::Value>(&text)
            && let Some(root) = state["config"]["rootfs"].as_str()
        {
            roots.insert(root.to_string());
        }
    }
    roots
}

/// This node's cache as `gantry images` shows it: disabled without `[containers]`.
pub fn node_images(containers: Option<&super::Containers>) -> io::Result<NodeImages> {
    let Some(c) = containers else {
        return Ok(NodeImages::default());
    };
    Ok(NodeImages {
        enabled: true,
        cache_dir: Some(c.cache_dir.display().to_string()),
        cache_max_mib: c.config.cache_max_mib,
        images: list(&c.cache_dir, Path::new(super::RUNTIME_STATE))?,
    })
}

/// The images in the cache, most recently used first.
pub fn list(cache_dir: &Path, runtime_state: &Path) -> io::Result<Vec<CachedImage>> {
    let busy = in_use(runtime_state);
    let mut out = Vec::new();
    let dir = roots(cache_dir);
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(done) = fs::metadata(path.join(".complete")) else {
            continue;
        };
        let last_used_ms = done
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as u64);
        let bytes: u64 = fs::read_to_string(path.join(".size"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        let rootfs = path.join("rootfs").to_string_lossy().into_owned();
        out.push(CachedImage {
            digest: format!("sha256:{name}"),
            references: fs::read_to_string(path.join(".references"))
                .unwrap_or_default()
                .lines()
                .map(str::to_string)
                .collect(),
            size_mib: bytes.div_ceil(1 << 20),
            last_used_ms,
            in_use: busy.contains(&rootfs),
        });
    }
    out.sort_by_key(|i| std::cmp::Reverse(i.last_used_ms));
    Ok(out)
}

/// Removes the least recently used images not in use (nor used in the last ten minutes)
/// while the cache holds more than `max_mib` (0: no limit); returns the digests removed.
pub fn collect(cache_dir: &Path, runtime_state: &Path, max_mib: u64) -> io::Result<Vec<String>> {
    if max_mib == 0 {
        return Ok(Vec::new());
    }
    let images = list(cache_dir, runtime_state)?;
    let mut total: u64 = images.iter().map(|i| i.size_mib).sum();
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut removed = Vec::new();
    for image in images.iter().rev() {
        if total <= max_mib {
            break;
        }
        if image.in_use || now_ms.saturating_sub(image.last_used_ms) < RECENT.as_millis() as u64 {
            continue;
        }
        let hex = image.digest.trim_start_matches("sha256:");
        remove_image(cache_dir, hex)?;
        for reference in &image.references {
            if !reference.starts_with("oci:") {
                let name = super::image_ref::entry_name(reference);
                let layouts = cache_dir.join("layouts");
                let _ = fs::remove_dir_all(layouts.join(&name));
                let _ = fs::remove_file(layouts.join(format!("{name}.ref")));
            }
        }
        total = total.saturating_sub(image.size_mib);
        removed.push(image.digest.clone());
    }
    Ok(removed)
}

/// Holds an exclusive lock on the file at `path` (made if missing) until dropped.
pub(crate) fn lock_file(path: &Path) -> Result<File, ImageError> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(cache_err(parent))?;
    }
    let file = File::create(path).map_err(cache_err(path))?;
    file.lock().map_err(cache_err(path))?;
    Ok(file)
}

#[cfg(test)]
pub(super) mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A finished unpacked image `hex` of `mib` MiB in `cache`, last used `age_s` ago, named
    /// by `reg/<hex>:v1` (also for `cache_room`'s tests).
    pub(crate) fn image(cache: &Path, hex: &str, mib: u64, age_s: u64) -> PathBuf {
        let dir = roots(cache).join(hex);
        fs::create_dir_all(dir.join("rootfs")).unwrap();
        fs::write(dir.join(".complete"), "").unwrap();
        fs::write(dir.join(".size"), (mib << 20).to_string()).unwrap();
        fs::write(dir.join(".references"), format!("reg/{hex}:v1\n")).unwrap();
        let when = SystemTime::now() - Duration::from_secs(age_s);
        fs::File::options()
            .write(true)
            .open(dir.join(".complete"))
            .unwrap()
            .set_modified(when)
            .unwrap();
        dir
    }

    #[test]
    fn the_oldest_images_go_first_but_never_one_in_use_or_just_used() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("cache");
        let state = tmp.path().join("state");
        image(&cache, "aa", 100, 7200);
        image(&cache, "bb", 100, 3600);
        image(&cache, "cc", 100, 1800);
        image(&cache, "dd", 100, 10);
        // A container runs from the oldest.
        fs::create_dir_all(state.join("c1")).unwrap();
        let root = roots(&cache).join("aa/rootfs");
        fs::write(
            state.join("c1/state.json"),
            serde_json::json!({"config": {"rootfs": root}}).to_string(),
        )
        .unwrap();
        let listed = list(&cache, &state).unwrap();
        assert_eq!(listed[0].digest, "sha256:dd", "most recent first");
        assert!(
            listed
                .iter()
                .find(|i| i.digest == "sha256:aa")
                .unwrap()
                .in_use
        );
        assert_eq!(collect(&cache, &state, 0).unwrap(), Vec::<String>::new());
        let removed = collect(&cache, &state, 250).unwrap();
        assert_eq!(removed, ["sha256:bb", "sha256:cc"]);
        let left: Vec<String> = list(&cache, &state)
            .unwrap()
            .into_iter()
            .map(|i| i.digest)
            .collect();
        assert_eq!(left, ["sha256:dd", "sha256:aa"]);
    }
}
