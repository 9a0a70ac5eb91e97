//! Local images a job names (`oci:/dir/layout:tag`, `docker-archive:/dir/file.tar`), made
//! ready without root ever reading them for the user: every file of the user's is opened
//! as the submitting user (`crate::user_open`) and root reads only the descriptor, so a
//! 0600 archive in another user's 0700 directory, or a link to a root-only file, is refused
//! by the kernel exactly as it would be for the user's own `cat`.
//!
//! - A layout: `index.json`, the manifest its tag names, the manifest's configuration and
//!   layers are each opened as the user and copied (at most the size their descriptor
//!   gives) into a private staging layout of root's (`<cache>/staging/<unique>`, 0700).
//! - An archive: the file is opened as the user, and `skopeo` (root) reads it through that
//!   descriptor (`docker-archive:/proc/<shim>/fd/N`), never through the path, into the
//!   staging layout.
//!
//! Either way the staging layout is then checked blob by blob against its digests
//! (`layout_verify::verify_layout`) before anything is unpacked from it, so an unpacked
//! image (`rootfs/<digest>`) is made or reused only for content Gantry hashed itself: a
//! layout whose `index.json` only *claims* another user's digest gets nothing. The staging
//! layout is removed when the [`Staged`] guard is dropped (after the unpack).
//!
//! Owns: reading local sources as the user, the staging directory. Does not own the
//! cache's names and registry pulls (`image_store`), the digest checks (`layout_verify`),
//! nor which local paths a job may name (`Containers::layout_allowed`).

use super::ContainerRequest;
use super::error::ImageError;
use super::image_ref::Source;
use super::layout_verify::{blob_path, manifest_blobs, sha256_hex, verify_layout};
use super::tool_run::{self, Watch};
use crate::user_open::{Credentials, open_as};
use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

/// The largest `index.json` read from a user's layout.
const MAX_INDEX_BYTES: u64 = 4 << 20;

/// Staging directories older than this are a shim's that died; the next import removes them.
const STALE_STAGING: Duration = Duration::from_secs(24 * 3600);

/// The tag of the image in a staging layout.
pub(crate) const STAGED_TAG: &str = "image";

/// The most bytes a local image may bring into the cache (`max_pull_mib`, as a pull).
#[derive(Debug)]
struct Bound {
    bytes: Option<u64>,
    name: String,
}

impl Bound {
    fn check(&self, total: u64, what: &Path) -> Result<(), String> {
        match self.bytes {
            Some(max) if total > max => Err(format!(
                "{} brings more than {max} bytes ({})",
                what.display(),
                self.name
            )),
            _ => Ok(()),
        }
    }
}

/// A verified layout of root's own, removed when dropped.
#[derive(Debug)]
pub(crate) struct Staged {
    dir: PathBuf,
    /// `sha256:...` of its manifest, checked.
    pub digest: String,
}

impl Staged {
    /// The layout's directory (tagged [`STAGED_TAG`]).
    pub(crate) fn layout(&self) -> PathBuf {
        self.dir.join("layout")
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The user the request's task runs as.
fn user_of(req: &ContainerRequest) -> Credentials {
    Credentials {
        uid: req.uid,
        gid: req.gid,
        groups: req.groups.clone(),
    }
}

/// Makes a local `source` (a layout or an archive) a verified layout of root's, reading the
/// user's files with the user's rights only. A registry reference is not local: an error.
pub(crate) fn import(
    req: &ContainerRequest,
    source: &Source,
    say: &mut dyn FnMut(&str),
) -> Result<Staged, ImageError> {
    let err = |message: String| ImageError::Pull {
        image: req.image.clone(),
        message,
    };
    let dir = staging_dir(&req.cache_dir)?;
    let mut staged = Staged {
        dir,
        digest: String::new(),
    };
    let layout = staged.layout();
    let who = user_of(req);
    let bound = Bound {
        bytes: (req.max_pull_mib > 0).then(|| req.max_pull_mib.saturating_mul(1 << 20)),
        name: format!("[containers] max_pull_mib = {}", req.max_pull_mib),
    };
    match source {
        Source::Layout { dir, tag } => {
            say(&format!("copying {} as uid {}", req.image, who.uid));
            copy_layout(&who, dir, tag, &layout, &bound).map_err(err)?;
        }
        Source::Archive { path, name } => {
            say(&format!("importing {} as uid {}", req.image, who.uid));
            import_archive(req, &who, path, name.as_deref(), &layout, &bound).map_err(err)?;
        }
        Source::Registry { reference, .. } => {
            return Err(err(format!("{reference} is not a local image")));
        }
    }
    staged.digest = verify_layout(&layout, STAGED_TAG).map_err(|e| ImageError::Unpack {
        image: req.image.clone(),
        message: format!("the image does not match its digests: {e}"),
    })?;
    Ok(staged)
}

/// A new private directory `<cache>/staging/<unique>` of root's (0700), with stale ones
/// of dead shims removed.
fn staging_dir(cache_dir: &Path) -> Result<PathBuf, ImageError> {
    let root = cache_dir.join("staging");
    let cache = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ImageError::Cache { path, source }
    };
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&root)
        .map_err(cache(&root))?;
    gantry_private_files::dir_with_mode(&root, 0o700).map_err(cache(&root))?;
    let now = SystemTime::now();
    for entry in fs::read_dir(&root).into_iter().flatten().flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age > STALE_STAGING);
        if old {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
    let unique = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = root.join(format!("{}-{unique}", std::process::id()));
    fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(cache(&dir))?;
    Ok(dir)
}

/// Opens `path` for reading as `who` and checks that it is a regular file.
fn open_file_as(who: &Credentials, path: &Path) -> Result<File, String> {
    let fd: OwnedFd =
        open_as(who, path, libc::O_RDONLY | libc::O_NONBLOCK).map_err(|e| e.to_string())?;
    let file = File::from(fd);
    let meta = file
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    Ok(file)
}

/// Copies the image tagged `tag` of the user's layout at `src` into `dst` (tagged
/// [`STAGED_TAG`]), opening each file as `who`. Not verified here: the caller checks `dst`.
fn copy_layout(
    who: &Credentials,
    src: &Path,
    tag: &str,
    dst: &Path,
    bound: &Bound,
) -> Result<(), String> {
    let index_path = src.join("index.json");
    let mut index = Vec::new();
    open_file_as(who, &index_path)?
        .take(MAX_INDEX_BYTES + 1)
        .read_to_end(&mut index)
        .map_err(|e| format!("{}: {e}", index_path.display()))?;
    if index.len() as u64 > MAX_INDEX_BYTES {
        return Err(format!(
            "{}: larger than {MAX_INDEX_BYTES} bytes",
            index_path.display()
        ));
    }
    let index: serde_json::Value = serde_json::from_slice(&index)
        .map_err(|e| format!("{}: not valid JSON: {e}", index_path.display()))?;
    let empty = Vec::new();
    let manifest = index["manifests"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"].as_str() == Some(tag))
        .ok_or_else(|| format!("no manifest tagged `{tag}` in {}", src.display()))?;
    let digest = manifest["digest"].as_str().unwrap_or("").to_string();
    let size = manifest["size"].as_u64().ok_or_else(|| {
        format!(
            "the manifest tagged `{tag}` in {} has no size",
            src.display()
        )
    })?;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dst.join("blobs/sha256"))
        .map_err(|e| format!("{}: {e}", dst.display()))?;
    bound.check(size, src)?;
    copy_blob(who, src, dst, &digest, size)?;
    let (config, layers) = manifest_blobs(dst, &digest).map_err(|e| e.to_string())?;
    let total = std::iter::once(&config)
        .chain(&layers)
        .fold(size, |sum, blob| sum.saturating_add(blob.size));
    bound.check(total, src)?;
    for blob in std::iter::once(&config).chain(&layers) {
        copy_blob(who, src, dst, &blob.digest, blob.size)?;
    }
    let media_type = manifest["mediaType"]
        .as_str()
        .unwrap_or("application/vnd.oci.image.manifest.v1+json");
    let index = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": media_type,
            "digest": digest,
            "size": size,
            "annotations": {"org.opencontainers.image.ref.name": STAGED_TAG},
        }],
    });
    write_new(&dst.join("index.json"), index.to_string().as_bytes())?;
    write_new(
        &dst.join("oci-layout"),
        br#"{"imageLayoutVersion":"1.0.0"}"#,
    )
}

/// Copies the blob `digest` of the user's layout `src` (opened as `who`) into `dst`, at
/// most `size` bytes: a longer or shorter file is refused. Done once per digest.
fn copy_blob(
    who: &Credentials,
    src: &Path,
    dst: &Path,
    digest: &str,
    size: u64,
) -> Result<(), String> {
    let hex = sha256_hex(digest).map_err(|e| e.to_string())?;
    let target = blob_path(dst, digest).map_err(|e| e.to_string())?;
    if target.exists() {
        return Ok(());
    }
    let from = src.join("blobs/sha256").join(hex);
    let mut input = open_file_as(who, &from)?.take(size + 1);
    let mut out = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&target)
        .map_err(|e| format!("{}: {e}", target.display()))?;
    let copied = std::io::copy(&mut input, &mut out)
        .map_err(|e| format!("copying {}: {e}", from.display()))?;
    if copied != size {
        return Err(format!(
            "{} is {}{copied} bytes, its descriptor says {size}",
            from.display(),
            if copied > size { "over " } else { "" }
        ));
    }
    Ok(())
}

fn write_new(path: &Path, bytes: &[u8]) -> Result<(), String> {
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Converts the user's `docker save` archive at `path` into the layout `dst` with skopeo,
/// which reads the descriptor opened as `who` (`/proc/<this process>/fd/N`), never the path.
fn import_archive(
    req: &ContainerRequest,
    who: &Credentials,
    path: &Path,
    name: Option<&str>,
    dst: &Path,
    bound: &Bound,
) -> Result<(), String> {
    let file = open_file_as(who, path)?;
    let size = file
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?
        .len();
    bound.check(size, path)?;
    let skopeo = super::find_tool("skopeo").ok_or("skopeo is not installed")?;
    let mut source = format!(
        "docker-archive:/proc/{}/fd/{}",
        std::process::id(),
        file.as_raw_fd()
    );
    if let Some(name) = name {
        source = format!("{source}:{name}");
    }
    let mut cmd = Command::new(skopeo);
    cmd.args(["copy", "--quiet"])
        .arg(source)
        .arg(format!("oci:{}:{STAGED_TAG}", dst.display()));
    // In the task's cgroups, with the pulls' deadline (`tool_run`).
    let watch = Watch {
        cgroups: &req.tool_cgroups,
        deadline: (req.pull_timeout_s > 0).then(|| Duration::from_secs(req.pull_timeout_s)),
        deadline_name: format!("[containers] pull_timeout_s = {}", req.pull_timeout_s),
    };
    let copied = tool_run::watch(cmd, &watch, |_, _| Ok(()));
    drop(file);
    copied
}

#[cfg(test)]
#[path = "local_import_tests.rs"]
mod tests;
