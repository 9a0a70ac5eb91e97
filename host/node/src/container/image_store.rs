//! The node's image cache: an image named by a job becomes a root file system on this node,
//! once per manifest digest, shared read-only by every task that runs it.
//!
//! - A registry reference is copied by `skopeo` into an OCI layout of the cache
//!   (`layouts/<sha256 of the whole reference>`, injective; the reference in `.ref` beside
//!   it, one lock per entry), with TLS verification unless the registry is one of
//!   `insecure_registries`, and the credentials of `auth_file` when given; bounded by
//!   `pull_timeout_s` and `max_pull_mib` (`registry_pull`). A tag is looked up again at
//!   every launch (it may have moved); an entry for a digest is reused only when its
//!   manifest hashes to that digest.
//! - A local layout (`oci:/dir/layout:tag`) or `docker save` archive is read as the job's
//!   user, never by root through its path, into a private staging layout that is checked
//!   against its digests before anything is unpacked from it (`local_import`); the daemon
//!   checked that it lies under `image_dirs`.
//! - The manifest's digest names the unpacked image (`rootfs/<digest>`), reused only for a
//!   layout whose manifest hashes to it. Before it is made, every blob is checked against its
//!   digest (`layout_verify`), the layers' unpacked size is measured against
//!   `max_unpacked_mib` (`unpack_bounds`) and room made within `cache_max_mib` and the
//!   user's `cache_max_mib_per_user` (`cache_room`), else the image is refused with the
//!   reason and its entry removed. `umoci unpack` (in the task's cgroups, like every tool
//!   here: `tool_run`) writes it under a temporary name while holding a lock file, so two
//!   tasks of one image unpack it once; then `defuse` removes device nodes, FIFOs, sockets,
//!   setuid/setgid bits and `security.*`/`trusted.*` attributes (an image is hostile input),
//!   and the directory is renamed into place.
//!
//! Owns: the cache's layout and those steps. Does not own the bundle (`bundle`) nor running
//! anything in it (the shim).

use super::ContainerRequest;
use super::cache::lock_file;
use super::cache_room::{Room, make_room};
pub use super::defuse::defuse;
use super::error::{ImageError, cache_err};
use super::image_ref::Source;
use super::layout_verify::{manifest_blobs, verified_manifest_digest, verify_layout};
use super::tool_run::run_tool;
use super::unpack_bounds::{MeasureError, unpacked_bytes};
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// An image ready to run: its unpacked root and what its configuration says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedImage {
    /// `sha256:...` of the manifest.
    pub digest: String,
    /// The root file system (shared, read-only for tasks).
    pub rootfs: PathBuf,
    /// The image's environment (`KEY=VALUE`), its working directory.
    pub env: Vec<String>,
    pub cwd: String,
}

/// Makes `req.image` ready on this node (pull if needed, unpack once); `say` receives
/// progress lines for the task's log.
pub fn prepare(
    req: &ContainerRequest,
    say: &mut dyn FnMut(&str),
) -> Result<PreparedImage, ImageError> {
    // A local image's verified staging layout, removed once the image is unpacked.
    let mut staged = None;
    // A registry image's cache entry, locked until the image is unpacked; the digest the
    // reference named.
    let mut entry = None;
    let mut pinned = None;
    let (layout, tag) = match Source::parse(&req.image)? {
        source @ (Source::Layout { .. } | Source::Archive { .. }) => {
            let s = super::local_import::import(req, &source, say)?;
            let layout = s.layout();
            staged = Some(s);
            (layout, super::local_import::STAGED_TAG.to_string())
        }
        Source::Registry { reference, .. } => {
            let (layout, lock) = super::registry_pull::registry_entry(req, &reference, say)?;
            entry = Some((layout.clone(), lock));
            pinned = super::image_ref::pinned_digest(&reference).map(str::to_string);
            (layout, "image".to_string())
        }
    };
    // The manifest must hash to the digest the layout claims for it, and to the one the job
    // named, if it named one.
    let digest = verified_manifest_digest(&layout, &tag).map_err(|e| ImageError::Unpack {
        image: req.image.clone(),
        message: e.to_string(),
    })?;
    if let Some(named) = pinned.filter(|named| *named != digest) {
        return Err(ImageError::Unpack {
            image: req.image.clone(),
            message: format!("the image is {digest}, not the {named} the job named"),
        });
    }
    let hex = digest.trim_start_matches("sha256:");
    let roots = req.cache_dir.join("rootfs");
    fs::create_dir_all(&roots).map_err(cache_err(&roots))?;
    let bundle = roots.join(hex);
    if !bundle.join(".complete").is_file() {
        let _lock = lock_file(&roots.join(format!("{hex}.lock")))?;
        if !bundle.join(".complete").is_file() {
            let checked = checked_unpack(req, &layout, &tag, &digest, &bundle, say);
            if let (Err(_), Some((layout, _))) = (&checked, &entry) {
                // Nothing of a refused or broken image stays in the cache.
                super::registry_pull::remove_entry(layout);
            }
            checked?;
        }
    }
    drop(staged);
    drop(entry);
    super::cache::record_use(&bundle, &req.image).map_err(cache_err(&bundle))?;
    let (env, cwd) = image_config(&bundle.join("config.json"));
    Ok(PreparedImage {
        digest,
        rootfs: bundle.join("rootfs"),
        env,
        cwd,
    })
}

/// Checks every blob of the layout against its digest, measures what its layers take
/// unpacked against `max_unpacked_mib`, makes room in the cache for it (`cache_room`), then
/// unpacks it; refused with the reason when it does not fit.
fn checked_unpack(
    req: &ContainerRequest,
    layout: &Path,
    tag: &str,
    digest: &str,
    bundle: &Path,
    say: &mut dyn FnMut(&str),
) -> Result<(), ImageError> {
    const MIB: u64 = 1 << 20;
    let refused = |reason: String| ImageError::Refused {
        image: req.image.clone(),
        reason,
    };
    let unpack_err = |message: String| ImageError::Unpack {
        image: req.image.clone(),
        message,
    };
    let verified = verify_layout(layout, tag).map_err(|e| unpack_err(e.to_string()))?;
    if verified != digest {
        return Err(unpack_err(format!(
            "the layout changed while it was read ({digest}, then {verified})"
        )));
    }
    let (_, layers) = manifest_blobs(layout, digest).map_err(|e| unpack_err(e.to_string()))?;
    let limit = match req.max_unpacked_mib {
        0 => u64::MAX,
        mib => mib.saturating_mul(MIB),
    };
    let need = unpacked_bytes(layout, &layers, limit, &req.tool_cgroups).map_err(|e| match e {
        MeasureError::Over { .. } => refused(format!(
            "{e}: past [containers] max_unpacked_mib = {}",
            req.max_unpacked_mib
        )),
        MeasureError::Sparse(_) => refused(e.to_string()),
        other => unpack_err(other.to_string()),
    })?;
    let room = Room {
        total: req.cache_max_mib.saturating_mul(MIB),
        per_user: req.cache_max_mib_per_user.saturating_mul(MIB),
    };
    let hex = digest.trim_start_matches("sha256:");
    let (removed, _reserved) = make_room(
        &req.cache_dir,
        Path::new(super::RUNTIME_STATE),
        hex,
        need,
        req.uid,
        room,
    )
    .map_err(refused)?;
    if !removed.is_empty() {
        say(&format!(
            "image cache: removed {} to make room",
            removed.join(", ")
        ));
    }
    say(&format!(
        "unpacking {} ({digest}, {} MiB)",
        req.image,
        need.div_ceil(MIB)
    ));
    unpack(req, layout, tag, bundle)?;
    super::cache::record_owner(bundle, req.uid).map_err(cache_err(bundle))
}

fn unpack(
    req: &ContainerRequest,
    layout: &Path,
    tag: &str,
    bundle: &Path,
) -> Result<(), ImageError> {
    let err = |message: String| ImageError::Unpack {
        image: req.image.clone(),
        message,
    };
    let umoci = super::find_tool("umoci").ok_or_else(|| err("umoci is not installed".into()))?;
    let tmp = bundle.with_extension(format!("tmp-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    let mut cmd = Command::new(umoci);
    cmd.arg("unpack")
        .arg("--image")
        .arg(format!("{}:{tag}", layout.display()))
        .arg(&tmp);
    run_tool(cmd, &req.tool_cgroups).map_err(err)?;
    defuse(&tmp.join("rootfs")).map_err(|e| err(format!("cleaning the unpacked image: {e}")))?;
    shared_tmp(&tmp.join("rootfs"))
        .map_err(|e| err(format!("making /tmp in the unpacked image: {e}")))?;
    let _ = fs::remove_dir_all(bundle);
    fs::rename(&tmp, bundle).map_err(cache_err(bundle))?;
    File::create(bundle.join(".complete")).map_err(cache_err(bundle))?;
    Ok(())
}

/// The image's environment and working directory, from the bundle umoci wrote.
fn image_config(path: &Path) -> (Vec<String>, String) {
    let Ok(spec) = oci_spec::runtime::Spec::load(path) else {
        return (Vec::new(), "/".into());
    };
    let process = spec.process().clone().unwrap_or_default();
    let env = process.env().clone().unwrap_or_default();
    let cwd = process.cwd().to_string_lossy().into_owned();
    (env, if cwd.is_empty() { "/".into() } else { cwd })
}

/// Gives an image without `/tmp` one of mode 1777: the runtime gives the task's private
/// `/tmp` (a tmpfs) the mode of the directory it is mounted on, and one it makes itself is
/// 0755, which only root could write. An image's own `/tmp` (or a link there) is left as
/// the image has it.
fn shared_tmp(root: &Path) -> io::Result<()> {
    let tmp = root.join("tmp");
    match fs::symlink_metadata(&tmp) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::create_dir(&tmp)?;
            fs::set_permissions(&tmp, fs::Permissions::from_mode(0o1777))
        }
        Err(e) => Err(e),
    }
}
