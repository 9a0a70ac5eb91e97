//! Copying a registry reference into its cache entry with `skopeo`, bounded: in the task's
//! cgroups, stopped at `[containers] pull_timeout_s`, and stopped once the bytes it brought
//! (blobs new to the entry, finished or being written) pass `max_pull_mib`, or as soon as
//! the registry's manifest lists layers that would. Its progress goes to `task-N.pull`
//! beside the task's bundle every quarter second and to the task's log every few seconds.
//!
//! Owns: the copy and its bounds. Does not own the entry's name, lock or checks
//! (`image_store`), nor the progress file's format (`pull_progress`).

use super::error::{ImageError, cache_err};
use super::tool_run::{Watch, watch};
use super::{ContainerRequest, pull_progress, registry};
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const MIB: u64 = 1 << 20;

/// The blob files (finished or not) of the layout at `layout` and their sizes.
fn blob_files(layout: &Path) -> Vec<(String, u64)> {
    let blobs = layout.join("blobs/sha256");
    fs::read_dir(blobs)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let len = e.metadata().ok()?.len();
            Some((e.file_name().to_string_lossy().into_owned(), len))
        })
        .collect()
}

/// Copies `reference` into the layout at `layout` within the request's bounds.
pub(crate) fn pull(
    req: &ContainerRequest,
    reference: &str,
    layout: &Path,
    say: &mut dyn FnMut(&str),
) -> Result<(), ImageError> {
    let err = |message: String| ImageError::Pull {
        image: reference.into(),
        message,
    };
    let skopeo = super::find_tool("skopeo").ok_or_else(|| err("skopeo is not installed".into()))?;
    if let Some(parent) = layout.parent() {
        fs::create_dir_all(parent).map_err(cache_err(parent))?;
    }
    // The manifest is asked for beside the copy, not before it: a launch by tag whose
    // layers are all cached waits for nothing more than the copy.
    let asking = {
        let (skopeo, insecure) = (skopeo.clone(), req.insecure);
        let (auth, reference) = (req.auth_file.clone(), reference.to_string());
        std::thread::spawn(move || registry::layers(&skopeo, insecure, auth.as_deref(), &reference))
    };
    let mut asking = Some(asking);
    let mut layers = Vec::new();
    let had: BTreeSet<String> = blob_files(layout).into_iter().map(|(n, _)| n).collect();
    let max_bytes = req.max_pull_mib.saturating_mul(MIB);
    let mut cmd = Command::new(&skopeo);
    cmd.args(["copy", "--quiet", "--retry-times", "2"]);
    registry::flags(&mut cmd, "src-", req.insecure, req.auth_file.as_deref());
    cmd.arg(format!("docker://{reference}"))
        .arg(format!("oci:{}:image", layout.display()));
    let progress_file = req.bundle_dir.with_extension("pull");
    let bounds = Watch {
        cgroups: &req.tool_cgroups,
        deadline: (req.pull_timeout_s != 0).then(|| Duration::from_secs(req.pull_timeout_s)),
        deadline_name: format!("[containers] pull_timeout_s = {}", req.pull_timeout_s),
    };
    let over = |what: &str, bytes: u64| {
        format!(
            "{what} {} MiB, past [containers] max_pull_mib = {}",
            bytes.div_ceil(MIB),
            req.max_pull_mib
        )
    };
    let result = watch(cmd, &bounds, |elapsed_ms, last_said_ms| {
        if asking.as_ref().is_some_and(|t| t.is_finished())
            && let Some(t) = asking.take()
        {
            layers = t.join().unwrap_or_default();
            let listed: u64 = layers.iter().map(|l| l.size).sum();
            if max_bytes != 0 && listed > max_bytes {
                return Err(over("its registry lists layers of", listed));
            }
        }
        let brought: u64 = blob_files(layout)
            .iter()
            .filter(|(name, _)| !had.contains(name))
            .map(|(_, len)| len)
            .sum();
        if max_bytes != 0 && brought > max_bytes {
            return Err(over("it brought", brought));
        }
        let progress = pull_progress::measure(&req.image, layout, &layers, elapsed_ms);
        let _ = pull_progress::write(&progress_file, &progress);
        if elapsed_ms >= *last_said_ms + 5000 {
            *last_said_ms = elapsed_ms;
            say(&progress.message());
        }
        Ok(())
    });
    let _ = fs::remove_file(&progress_file);
    result.map_err(err)
}

/// The cache entry of the registry reference `reference` (`layouts/<entry_name>`, with the
/// reference in `<entry_name>.ref`), locked for this task (one pull of an entry at a time on
/// the node; entries of other names never wait for it), holding the image: a reference by
/// digest is reused only when the entry's manifest hashes to that digest, else (and for a
/// tag, always) pulled again. Returns the layout and its lock, held until the image is
/// unpacked.
pub(crate) fn registry_entry(
    req: &ContainerRequest,
    reference: &str,
    say: &mut dyn FnMut(&str),
) -> Result<(std::path::PathBuf, fs::File), ImageError> {
    let name = super::image_ref::entry_name(reference);
    let layouts = req.cache_dir.join("layouts");
    let layout = layouts.join(&name);
    let lock = super::cache::lock_file(&layouts.join(format!("{name}.lock")))?;
    let pinned = super::image_ref::pinned_digest(reference);
    let have = pinned.is_some_and(|digest| {
        super::layout_verify::verified_manifest_digest(&layout, "image").is_ok_and(|d| d == digest)
    });
    if !have {
        if pinned.is_some() {
            // An entry of a digest that does not hash to it is damaged: never topped up.
            remove_entry(&layout);
        }
        // A tag's entry is topped up (its blobs are reused); whatever is unpacked from it is
        // checked blob by blob first, and a bad blob removes the entry.
        say(&format!("pulling {reference}"));
        if let Err(e) = pull(req, reference, &layout, say) {
            remove_entry(&layout);
            return Err(e);
        }
    }
    let sidecar = layouts.join(format!("{name}.ref"));
    fs::write(&sidecar, format!("{reference}\n")).map_err(cache_err(&sidecar))?;
    Ok((layout, lock))
}

/// Removes a registry entry's layout (what a stopped pull left included) and the reference
/// kept beside it; its lock file stays (a task may hold it).
pub(crate) fn remove_entry(layout: &Path) {
    if let Err(e) = fs::remove_dir_all(layout)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(layout = %layout.display(), "cannot remove an image cache entry: {e}");
    }
    let mut sidecar = layout.as_os_str().to_os_string();
    sidecar.push(".ref");
    let _ = fs::remove_file(sidecar);
}
