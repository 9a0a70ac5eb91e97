//! The node's image cache: an image named by a job becomes a root file system on this node,
//! once per manifest digest, shared read-only by every task that runs it.
//!
//! - A registry reference is copied by `skopeo` into an OCI layout of the cache
//!   (`layouts/<reference, made a file name>`), with TLS verification unless the registry is
//!   one of `insecure_registries`, and the credentials of `auth_file` when given; a tag is
//!   looked up again at every launch (it may have moved), a digest is not.
//! - A local layout (`oci:/dir/layout:tag`) is read where it is (the daemon checked that it
//!   lies under `image_dirs`).
//! - The manifest's digest names the unpacked image (`rootfs/<digest>`): `umoci unpack`
//!   writes it under a temporary name while holding a lock file, so two tasks of one image
//!   unpack it once; then every device node, FIFO and socket is removed and every setuid
//!   and setgid bit cleared (an image is hostile input; the runtime's `no_new_privileges`
//!   and device rules stop them too), and the directory is renamed into place.
//!
//! Owns: the cache's layout and those steps. Does not own the bundle (`bundle`) nor running
//! anything in it (the shim).

use super::ContainerRequest;
use super::image_ref::{Source, file_name_of};
use super::{pull_progress, registry};
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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

/// Why an image could not be made ready (the task ends with it in its log).
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("pulling {image} failed: {message}")]
    Pull { image: String, message: String },
    #[error("unpacking {image} failed: {message}")]
    Unpack { image: String, message: String },
    #[error("the image cache at {path}: {source}")]
    Cache { path: PathBuf, source: io::Error },
    #[error("{0}")]
    Reference(String),
}

fn cache_err(path: &Path) -> impl FnOnce(io::Error) -> ImageError + '_ {
    move |source| ImageError::Cache {
        path: path.to_path_buf(),
        source,
    }
}

/// Makes `req.image` ready on this node (pull if needed, unpack once); `say` receives
/// progress lines for the task's log.
pub fn prepare(
    req: &ContainerRequest,
    say: &mut dyn FnMut(&str),
) -> Result<PreparedImage, ImageError> {
    let (layout, tag) = match Source::parse(&req.image)? {
        Source::Layout { dir, tag } => (dir, tag),
        Source::Registry {
            reference,
            by_digest,
        } => {
            let layout = req.cache_dir.join("layouts").join(file_name_of(&reference));
            // One pull of a name at a time on this node (ranks of a gang share it).
            let _lock = lock_file(&layout.with_extension("lock"))?;
            let have = by_digest && layout.join("index.json").is_file();
            if !have {
                say(&format!("pulling {reference}"));
                pull(req, &reference, &layout, say)?;
            }
            (layout, "image".to_string())
        }
        Source::Archive { path, name } => {
            let layout = req
                .cache_dir
                .join("layouts")
                .join(format!("archive-{}", file_name_of(&path.to_string_lossy())));
            let _lock = lock_file(&layout.with_extension("lock"))?;
            import_archive(req, &path, name.as_deref(), &layout, say)?;
            (layout, "image".to_string())
        }
    };
    let digest = manifest_digest(&layout, &tag).map_err(|message| ImageError::Unpack {
        image: req.image.clone(),
        message,
    })?;
    let hex = digest.trim_start_matches("sha256:");
    let roots = req.cache_dir.join("rootfs");
    fs::create_dir_all(&roots).map_err(cache_err(&roots))?;
    let bundle = roots.join(hex);
    if !bundle.join(".complete").is_file() {
        let _lock = lock_file(&roots.join(format!("{hex}.lock")))?;
        if !bundle.join(".complete").is_file() {
            say(&format!("unpacking {} ({digest})", req.image));
            unpack(req, &layout, &tag, &bundle)?;
        }
    }
    super::cache::record_use(&bundle, &req.image).map_err(cache_err(&bundle))?;
    let (env, cwd) = image_config(&bundle.join("config.json"));
    Ok(PreparedImage {
        digest,
        rootfs: bundle.join("rootfs"),
        env,
        cwd,
    })
}

/// Holds an exclusive lock on the file at `path` (made if missing) until dropped.
fn lock_file(path: &Path) -> Result<File, ImageError> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(cache_err(parent))?;
    }
    let file = File::create(path).map_err(cache_err(path))?;
    file.lock().map_err(cache_err(path))?;
    Ok(file)
}

/// Copies a `docker save` archive into the layout at `layout` when it is new or changed
/// since the last copy (its size and modification time, kept beside the layout).
fn import_archive(
    req: &ContainerRequest,
    path: &Path,
    name: Option<&str>,
    layout: &Path,
    say: &mut dyn FnMut(&str),
) -> Result<(), ImageError> {
    let err = |message: String| ImageError::Pull {
        image: req.image.clone(),
        message,
    };
    let meta = fs::metadata(path).map_err(|e| err(format!("{}: {e}", path.display())))?;
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let stamp = format!("{} {modified}", meta.len());
    let stamp_path = layout.with_extension("source");
    if fs::read_to_string(&stamp_path).is_ok_and(|s| s == stamp)
        && layout.join("index.json").is_file()
    {
        return Ok(());
    }
    let skopeo = super::find_tool("skopeo").ok_or_else(|| err("skopeo is not installed".into()))?;
    say(&format!("importing {}", req.image));
    let mut source = format!("docker-archive:{}", path.display());
    if let Some(name) = name {
        source = format!("{source}:{name}");
    }
    let mut cmd = Command::new(skopeo);
    cmd.args(["copy", "--quiet"])
        .arg(source)
        .arg(format!("oci:{}:image", layout.display()));
    watch_copy(cmd, |_, _| {}).map_err(err)?;
    fs::write(&stamp_path, stamp).map_err(cache_err(&stamp_path))
}

/// Copies `reference` into the layout at `layout` with skopeo, writing its progress to
/// `task-N.pull` beside the task's bundle every quarter second, and to the task's log every
/// few seconds; the progress file is removed at the end.
fn pull(
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
    let mut cmd = Command::new(&skopeo);
    cmd.args(["copy", "--quiet", "--retry-times", "2"]);
    registry::flags(&mut cmd, "src-", req.insecure, req.auth_file.as_deref());
    cmd.arg(format!("docker://{reference}"))
        .arg(format!("oci:{}:image", layout.display()));
    let progress_file = req.bundle_dir.with_extension("pull");
    let result = watch_copy(cmd, |elapsed_ms, last_said_ms| {
        if asking.as_ref().is_some_and(|t| t.is_finished())
            && let Some(t) = asking.take()
        {
            layers = t.join().unwrap_or_default();
        }
        let progress = pull_progress::measure(&req.image, layout, &layers, elapsed_ms);
        let _ = pull_progress::write(&progress_file, &progress);
        if elapsed_ms >= *last_said_ms + 5000 {
            *last_said_ms = elapsed_ms;
            say(&progress.message());
        }
    });
    let _ = fs::remove_file(&progress_file);
    result.map_err(err)
}

/// Runs `cmd` to its end, calling `tick(elapsed ms, last time it spoke)` every quarter
/// second meanwhile (its end is seen at once, not at the next tick); its stderr (cut) is
/// the error.
fn watch_copy(mut cmd: Command, mut tick: impl FnMut(u64, &mut u64)) -> Result<(), String> {
    let started = Instant::now();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let mut last_said = 0;
    let out = loop {
        tick(
            u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            &mut last_said,
        );
        match rx.recv_timeout(Duration::from_millis(250)) {
            Ok(out) => break out.map_err(|e| format!("waiting for skopeo: {e}"))?,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err("skopeo's waiter ended without an answer".into());
            }
        }
    };
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stderr);
    let text: String = text.trim().chars().take(2000).collect();
    Err(format!("{text} ({})", out.status))
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
    run_tool(cmd).map_err(err)?;
    defuse(&tmp.join("rootfs")).map_err(|e| err(format!("cleaning the unpacked image: {e}")))?;
    shared_tmp(&tmp.join("rootfs"))
        .map_err(|e| err(format!("making /tmp in the unpacked image: {e}")))?;
    let _ = fs::remove_dir_all(bundle);
    fs::rename(&tmp, bundle).map_err(cache_err(bundle))?;
    File::create(bundle.join(".complete")).map_err(cache_err(bundle))?;
    Ok(())
}

/// Runs a tool to its end; its stderr (cut) is the error.
fn run_tool(mut cmd: Command) -> Result<(), String> {
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stderr);
    let text: String = text.trim().chars().take(2000).collect();
    Err(format!("{} ({})", text, out.status))
}

/// The digest of the manifest tagged `tag` in the layout at `dir`.
fn manifest_digest(dir: &Path, tag: &str) -> Result<String, String> {
    let path = dir.join("index.json");
    let text = fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let index: serde_json::Value =
        serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let manifests = index["manifests"].as_array().cloned().unwrap_or_default();
    let found = manifests
        .iter()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"].as_str() == Some(tag));
    let digest = found
        .and_then(|m| m["digest"].as_str())
        .ok_or_else(|| format!("no manifest tagged `{tag}` in {}", dir.display()))?;
    let hex = digest.strip_prefix("sha256:").unwrap_or("");
    if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!("`{digest}` is not a sha256 digest"));
    }
    Ok(digest.to_string())
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

/// Removes device nodes, FIFOs and sockets under `root` and clears setuid/setgid bits,
/// never following a symbolic link.
pub fn defuse(root: &Path) -> io::Result<()> {
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir)? {
            let entry = entry?;
            let path = entry.path();
            let meta = fs::symlink_metadata(&path)?;
            let ft = meta.file_type();
            if ft.is_symlink() {
                continue;
            }
            if ft.is_block_device() || ft.is_char_device() || ft.is_fifo() || ft.is_socket() {
                fs::remove_file(&path)?;
                continue;
            }
            let mode = meta.permissions().mode();
            if mode & 0o6000 != 0 {
                fs::set_permissions(&path, fs::Permissions::from_mode(mode & 0o1777))?;
            }
            if ft.is_dir() {
                stack.push(path);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn defuse_removes_special_files_and_setuid_bits_without_following_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("rootfs");
        fs::create_dir_all(root.join("bin")).unwrap();
        let suid = root.join("bin/su");
        fs::write(&suid, b"x").unwrap();
        fs::set_permissions(&suid, fs::Permissions::from_mode(0o4755)).unwrap();
        // A link out of the root to a setuid file outside: left alone, target untouched.
        let outside = dir.path().join("outside");
        fs::write(&outside, b"y").unwrap();
        fs::set_permissions(&outside, fs::Permissions::from_mode(0o4755)).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("bin/out")).unwrap();
        let fifo = std::ffi::CString::new(root.join("fifo").to_str().unwrap()).unwrap();
        // SAFETY: a valid C string; mkfifo only creates a file.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        defuse(&root).unwrap();
        assert_eq!(
            fs::metadata(&suid).unwrap().permissions().mode() & 0o7777,
            0o755
        );
        assert_eq!(
            fs::metadata(&outside).unwrap().permissions().mode() & 0o7777,
            0o4755
        );
        assert!(!root.join("fifo").exists());
    }
}
