//! A task's OCI bundle: the `config.json` the runtime runs, written with `oci-spec`.
//!
//! What a container gets: the image's root file system read-only (shared by every task of
//! that image) with a private `/tmp`; the job's user, group and supplementary groups, never
//! a capability, `no_new_privileges`; its own mount, PID and IPC namespaces and the host's
//! network and host name (distributed training needs the node's addresses); the task's
//! cgroup; only the device nodes it was given (its GPUs), created inside and allowed by the
//! device rules (the runtime adds the usual `/dev/null`, `/dev/zero`...), at the path the
//! task's CDI spec gives when it gives one; the mounts the job asked for (checked against
//! `allowed_mounts` by the daemon) and the GPU driver's files (`cdi`), `nosuid` and
//! `nodev`; the variables of the CDI spec after the task's, which never replace
//! `CUDA_VISIBLE_DEVICES` nor a `GANTRY_*` variable.
//!
//! Owns: that mapping. Does not own the image (`image_store`) nor the runtime's call (the
//! shim).

use super::ContainerRequest;
use super::image_store::PreparedImage;
use oci_spec::runtime::{
    LinuxBuilder, LinuxCapabilities, LinuxDeviceBuilder, LinuxDeviceCgroupBuilder, LinuxDeviceType,
    LinuxNamespaceBuilder, LinuxNamespaceType, LinuxResourcesBuilder, Mount, MountBuilder,
    ProcessBuilder, RootBuilder, Spec, UserBuilder, get_default_mounts,
};
use std::collections::HashSet;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Why a bundle could not be written.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("the container's configuration: {0}")]
    Spec(#[from] oci_spec::OciSpecError),
    #[error("device {path}: {message}")]
    Device { path: PathBuf, message: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The environment inside: the image's, then the task's (which wins), less the host's
/// `PATH` unless the job set one (`job_path`).
pub fn merged_env(
    image: &[String],
    task: &[(String, String)],
    job_path: Option<&str>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut set = |kv: String| {
        let key = kv.split('=').next().unwrap_or("").to_string();
        out.retain(|e| e.split('=').next() != Some(key.as_str()));
        out.push(kv);
    };
    for kv in image {
        set(kv.clone());
    }
    for (k, v) in task {
        if k == "PATH" {
            continue;
        }
        set(format!("{k}={v}"));
    }
    if let Some(path) = job_path {
        set(format!("PATH={path}"));
    }
    if !out.iter().any(|e| e.starts_with("PATH=")) {
        out.push("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    }
    out
}

/// `env` with the GPU edits' variables (`extra`, a CDI spec's `NAME=value`) after it: each
/// replaces the one of its name, except a `CUDA_VISIBLE_DEVICES` or `GANTRY_*` already set.
pub fn with_gpu_env(mut env: Vec<String>, extra: &[String]) -> Vec<String> {
    for kv in extra {
        let Some((key, _)) = kv.split_once('=') else {
            continue;
        };
        let named = |e: &String| e.split('=').next() == Some(key);
        let protected = key == "CUDA_VISIBLE_DEVICES" || key.starts_with("GANTRY_");
        if protected && env.iter().any(named) {
            continue;
        }
        env.retain(|e| !named(e));
        env.push(kv.clone());
    }
    env
}

/// The options of a bind mount of the GPU driver's files: `bind` when asked, else `rbind`;
/// `nosuid`, `nodev`; `rw` when asked, else `ro`; `noexec` and propagation when asked.
/// Anything else (`suid`, `dev`, `exec`...) is dropped.
fn driver_mount_options(given: &[String]) -> Vec<String> {
    let has = |o: &str| given.iter().any(|g| g == o);
    let bind = if has("bind") { "bind" } else { "rbind" };
    let access = if has("rw") { "rw" } else { "ro" };
    let mut out: Vec<String> = vec![bind.into(), "nosuid".into(), "nodev".into(), access.into()];
    let kept = ["noexec", "private", "rprivate", "slave", "rslave"];
    out.extend(given.iter().filter(|o| kept.contains(&o.as_str())).cloned());
    out
}

/// The runtime configuration of one task.
pub fn spec(
    req: &ContainerRequest,
    image: &PreparedImage,
    argv: &[String],
    env: Vec<String>,
) -> Result<Spec, BundleError> {
    let user = UserBuilder::default()
        .uid(req.uid)
        .gid(req.gid)
        .additional_gids(req.groups.clone())
        .build()?;
    let no_caps: HashSet<_> = HashSet::new();
    let mut caps = LinuxCapabilities::default();
    caps.set_bounding(Some(no_caps.clone()))
        .set_effective(Some(no_caps.clone()))
        .set_inheritable(Some(no_caps.clone()))
        .set_permitted(Some(no_caps.clone()))
        .set_ambient(Some(no_caps));
    let process = ProcessBuilder::default()
        .terminal(req.terminal)
        .user(user)
        .args(argv.to_vec())
        .env(with_gpu_env(env, &req.gpu_env))
        .cwd(req.cwd.clone().unwrap_or_else(|| image.cwd.clone()))
        .no_new_privileges(true)
        .capabilities(caps)
        .build()?;
    let root = RootBuilder::default()
        .path(image.rootfs.clone())
        .readonly(true)
        .build()?;
    let mut mounts: Vec<Mount> = get_default_mounts()
        .into_iter()
        .filter(|m| m.destination() != Path::new("/sys/fs/cgroup"))
        .collect();
    mounts.push(
        MountBuilder::default()
            .destination("/tmp")
            .typ("tmpfs")
            .source("tmpfs")
            .options(vec!["nosuid".into(), "nodev".into(), "mode=1777".into()])
            .build()?,
    );
    for m in &req.mounts {
        let mut options = vec!["rbind".to_string(), "nosuid".into(), "nodev".into()];
        options.push(if m.read_only { "ro" } else { "rw" }.into());
        mounts.push(
            MountBuilder::default()
                .destination(&m.destination)
                .typ("bind")
                .source(&m.source)
                .options(options)
                .build()?,
        );
    }
    for m in &req.gpu_mounts {
        mounts.push(
            MountBuilder::default()
                .destination(&m.destination)
                .typ("bind")
                .source(&m.source)
                .options(driver_mount_options(&m.options))
                .build()?,
        );
    }
    let mut devices = Vec::new();
    let mut inside_paths = HashSet::new();
    let mut rules = vec![
        LinuxDeviceCgroupBuilder::default()
            .allow(false)
            .access("rwm")
            .build()?,
    ];
    for host in &req.devices {
        let inside = req.device_paths.get(host).unwrap_or(host);
        if !inside_paths.insert(inside) {
            continue;
        }
        let (major, minor, mode) = char_device(host)?;
        devices.push(
            LinuxDeviceBuilder::default()
                .path(inside.clone())
                .typ(LinuxDeviceType::C)
                .major(major)
                .minor(minor)
                .file_mode(mode)
                .uid(0u32)
                .gid(0u32)
                .build()?,
        );
        rules.push(
            LinuxDeviceCgroupBuilder::default()
                .allow(true)
                .typ(LinuxDeviceType::C)
                .major(major)
                .minor(minor)
                .access("rwm")
                .build()?,
        );
    }
    let namespaces = [
        LinuxNamespaceType::Pid,
        LinuxNamespaceType::Ipc,
        LinuxNamespaceType::Mount,
    ]
    .into_iter()
    .map(|typ| LinuxNamespaceBuilder::default().typ(typ).build())
    .collect::<Result<Vec<_>, _>>()?;
    let mut linux = LinuxBuilder::default()
        .namespaces(namespaces)
        .devices(devices)
        .resources(LinuxResourcesBuilder::default().devices(rules).build()?);
    if let Some(path) = &req.cgroups_path {
        linux = linux.cgroups_path(PathBuf::from(path));
    }
    let mut spec = Spec::default();
    spec.set_process(Some(process))
        .set_root(Some(root))
        .set_hostname(None)
        .set_mounts(Some(mounts))
        .set_linux(Some(linux.build()?));
    Ok(spec)
}

/// Writes `spec` as `config.json` in `dir` (created, private).
pub fn write(dir: &Path, spec: &Spec) -> Result<PathBuf, BundleError> {
    let io = |source| BundleError::Io {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    gantry_private_files::dir_with_mode(dir, 0o700).map_err(io)?;
    let path = dir.join("config.json");
    spec.save(&path)?;
    Ok(path)
}

fn char_device(path: &Path) -> Result<(i64, i64, u32), BundleError> {
    let meta = std::fs::metadata(path).map_err(|e| BundleError::Device {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    if !meta.file_type().is_char_device() {
        return Err(BundleError::Device {
            path: path.to_path_buf(),
            message: "not a character device".into(),
        });
    }
    let rdev = meta.rdev();
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    Ok((i64::from(major), i64::from(minor), meta.mode() & 0o777))
}

#[cfg(test)]
#[path = "bundle_tests.rs"]
mod tests;
