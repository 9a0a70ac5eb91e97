//! Jobs in container images: the `[containers]` settings, the OCI runtime chosen at start,
//! and what a task's shim needs to run its command in an image ([`ContainerRequest`], a
//! private file beside the task's other files).
//!
//! The parts are the distribution's: `skopeo` pulls from a registry into the node's cache
//! (an OCI layout), `umoci` unpacks an image's layers once per manifest digest
//! (`image_store`), and `runc` (or `crun`) runs the task on a bundle whose `config.json`
//! Gantry writes with `oci-spec` (`bundle`): the job's user, its own mount, PID and IPC
//! namespaces, the host network, the task's cgroup, only its GPUs' device nodes.
//!
//! Owns: these settings, the runtime's detection, the request's format. Does not own which
//! job runs in an image (the daemon), the task's cgroup or user (`executor`).

pub mod bundle;
pub mod cache;
mod cache_room;
pub mod cdi;
mod defuse;
pub mod error;
pub mod image_ref;
pub mod image_store;
pub(crate) mod layout_verify;
mod local_import;
pub mod plain_registry;
pub mod pull_progress;
pub mod registry;
mod registry_pull;
mod tool_run;
mod unpack_bounds;
pub(crate) mod user_mounts;

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The `[containers]` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContainersConfig {
    /// `auto` (runc, else crun, from the distribution's directories), `runc`, `crun`, or
    /// an absolute path to either.
    pub runtime: String,
    /// The image cache (layouts and unpacked root file systems); `<data_dir>/images` when
    /// not given.
    pub cache_dir: Option<PathBuf>,
    /// Host directories a job may mount (`--mount`), each with what lies under it.
    pub allowed_mounts: Vec<PathBuf>,
    /// Directories holding OCI layouts jobs may name as `oci:/dir/layout:tag`.
    pub image_dirs: Vec<PathBuf>,
    /// Registries reached over plain HTTP or without verifying TLS (`host:port`).
    pub insecure_registries: Vec<String>,
    /// Registry credentials (the `containers-auth.json` format skopeo reads), never in
    /// job records.
    pub auth_file: Option<PathBuf>,
    /// Above this size the least recently used images not in use are removed (0: never);
    /// an image whose unpacked size would not fit, even after that, is refused.
    pub cache_max_mib: u64,
    /// The share of the cache the images one user's tasks brought may hold (0: no share,
    /// only `cache_max_mib`).
    pub cache_max_mib_per_user: u64,
    /// A pull that has not finished after this long is stopped and its task fails (0: never).
    pub pull_timeout_s: u64,
    /// The most bytes one pull may bring over the wire (0: no bound).
    pub max_pull_mib: u64,
    /// The most one image may take unpacked, measured from its layers before unpacking
    /// (0: no bound).
    pub max_unpacked_mib: u64,
    /// Directories of Container Device Interface specifications (`*.json`, `*.yaml`): a
    /// GPU task's device nodes, driver libraries and variables come from the `nvidia.com/gpu`
    /// one when there is one (`cdi`), a later directory's devices winning.
    pub cdi_dirs: Vec<PathBuf>,
}

impl Default for ContainersConfig {
    fn default() -> Self {
        Self {
            runtime: "auto".into(),
            cache_dir: None,
            allowed_mounts: Vec::new(),
            image_dirs: Vec::new(),
            insecure_registries: Vec::new(),
            auth_file: None,
            cache_max_mib: 51_200,
            cache_max_mib_per_user: 25_600,
            pull_timeout_s: 1800,
            max_pull_mib: 20_480,
            max_unpacked_mib: 30_720,
            cdi_dirs: vec!["/etc/cdi".into(), "/var/run/cdi".into()],
        }
    }
}

impl ContainersConfig {
    /// Range checks: absolute, clean directories; a known runtime name or an absolute path.
    pub fn check(&self) -> Result<(), String> {
        for (key, dirs) in [
            ("allowed_mounts", &self.allowed_mounts),
            ("image_dirs", &self.image_dirs),
            ("cdi_dirs", &self.cdi_dirs),
        ] {
            for d in dirs {
                let text = d.to_string_lossy();
                if !gantry_api::model::container::is_clean_absolute(&text) || text == "/" {
                    return Err(format!(
                        "containers.{key}: `{text}` must be an absolute path other than / without . or .."
                    ));
                }
            }
        }
        if !matches!(self.runtime.as_str(), "auto" | "runc" | "crun")
            && !self.runtime.starts_with('/')
        {
            return Err(format!(
                "containers.runtime: `{}` must be auto, runc, crun or an absolute path",
                self.runtime
            ));
        }
        Ok(())
    }
}

/// Where the OCI runtime keeps its containers' state on a node (root only).
pub const RUNTIME_STATE: &str = "/run/gantry-runc";

/// Where the distribution's tools are looked for (not the daemon's `PATH`).
const TOOL_DIRS: [&str; 4] = ["/usr/sbin", "/usr/bin", "/sbin", "/bin"];

/// The first executable named `name` in [`TOOL_DIRS`] (or `name` itself when absolute).
pub fn find_tool(name: &str) -> Option<PathBuf> {
    let candidates: Vec<PathBuf> = if name.starts_with('/') {
        vec![PathBuf::from(name)]
    } else {
        TOOL_DIRS.iter().map(|d| Path::new(d).join(name)).collect()
    };
    candidates.into_iter().find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Containers as this node runs them: the settings and the tools found at start.
#[derive(Debug, Clone)]
pub struct Containers {
    pub config: ContainersConfig,
    pub cache_dir: PathBuf,
    /// The OCI runtime; none when neither runc nor crun is installed (image jobs are refused).
    pub runtime: Option<PathBuf>,
}

impl Containers {
    /// Resolves the runtime of `config` (`data_dir/images` as the default cache).
    pub fn detect(config: &ContainersConfig, data_dir: &Path) -> Self {
        let runtime = match config.runtime.as_str() {
            "auto" => find_tool("runc").or_else(|| find_tool("crun")),
            name => find_tool(name),
        };
        Self {
            cache_dir: config
                .cache_dir
                .clone()
                .unwrap_or_else(|| data_dir.join("images")),
            config: config.clone(),
            runtime,
        }
    }

    /// Why an image job cannot run here, if it cannot: no runtime, or no skopeo/umoci.
    pub fn unavailable(&self) -> Option<String> {
        if self.runtime.is_none() {
            return Some(format!(
                "no OCI runtime: `[containers] runtime = \"{}\"` found neither runc nor crun in {}",
                self.config.runtime,
                TOOL_DIRS.join(", ")
            ));
        }
        for tool in ["umoci", "skopeo"] {
            if find_tool(tool).is_none() {
                return Some(format!("`{tool}` is not installed on this node"));
            }
        }
        None
    }

    /// Whether `source` lies under one of `allowed_mounts` (component-wise).
    pub fn mount_allowed(&self, source: &str) -> bool {
        let source = Path::new(source);
        self.config
            .allowed_mounts
            .iter()
            .any(|dir| source.starts_with(dir))
    }

    /// Whether a local layout `oci:PATH[:TAG]` lies under one of `image_dirs`.
    pub fn layout_allowed(&self, layout: &Path) -> bool {
        self.config
            .image_dirs
            .iter()
            .any(|dir| layout.starts_with(dir))
    }

    /// Whether `image`'s registry is one of `insecure_registries`.
    pub fn insecure(&self, image: &str) -> bool {
        let host = image.split('/').next().unwrap_or("");
        image.contains('/') && self.config.insecure_registries.iter().any(|r| r == host)
    }
}

/// Where a job's script (`task_files::command` writes it in the job's directory) appears
/// inside its image: on the container's private `/tmp`, so nothing is made in the shared
/// image.
pub const SCRIPT_IN_IMAGE: &str = "/tmp/gantry-script";

/// The mounts of a task in an image: the job's, and its script (read-only) when `argv`
/// runs one from `job_dir`, whose path in `argv` becomes [`SCRIPT_IN_IMAGE`].
pub fn task_mounts(
    job_mounts: &[gantry_api::model::ContainerMount],
    argv: &mut [String],
    job_dir: &Path,
) -> Vec<gantry_api::model::ContainerMount> {
    let mut mounts = job_mounts.to_vec();
    let script = job_dir.join("script");
    let script = script.to_string_lossy();
    let mut uses_script = false;
    for arg in argv.iter_mut() {
        if *arg == script {
            *arg = SCRIPT_IN_IMAGE.to_string();
            uses_script = true;
        }
    }
    if uses_script {
        mounts.push(gantry_api::model::ContainerMount {
            source: script.into_owned(),
            destination: SCRIPT_IN_IMAGE.into(),
            read_only: true,
        });
    }
    mounts
}

/// What a task's shim needs to run its command in an image, written by the executor as a
/// private file (`task-N.container`, JSON) and read by the shim (as root) before it starts
/// the runtime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerRequest {
    /// The image reference as the job gave it.
    pub image: String,
    /// Host paths mounted inside (already checked against `allowed_mounts`).
    pub mounts: Vec<gantry_api::model::ContainerMount>,
    /// The command's user, group and supplementary groups inside (never 0 unless allowed).
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    /// Working directory inside; the image's when `None`.
    pub cwd: Option<String>,
    /// Device nodes the task may use (its GPUs' and the driver's control nodes), as the
    /// host names them; each is created inside at the same path unless `device_paths` says.
    pub devices: Vec<PathBuf>,
    /// The path inside of a node of `devices` made elsewhere (a CDI `deviceNode` whose
    /// `hostPath` differs from its `path`): host path to path inside.
    #[serde(default)]
    pub device_paths: std::collections::BTreeMap<PathBuf, PathBuf>,
    /// The GPU driver's files bound inside (from a CDI specification, or its libraries and
    /// tools found on the node), `nosuid,nodev`, read-only unless `rw` is asked.
    #[serde(default)]
    pub gpu_mounts: Vec<cdi::DriverMount>,
    /// Variables of the CDI specification (`K=V`), after the task's; they never replace
    /// `CUDA_VISIBLE_DEVICES` nor a `GANTRY_*` variable.
    #[serde(default)]
    pub gpu_env: Vec<String>,
    /// The task's cgroup, relative to each hierarchy's root (`None`: the runtime's own).
    pub cgroups_path: Option<String>,
    /// The OCI runtime binary.
    pub runtime: PathBuf,
    /// The node's image cache.
    pub cache_dir: PathBuf,
    /// The registry is reached without TLS verification (`insecure_registries`).
    pub insecure: bool,
    /// Registry credentials file.
    pub auth_file: Option<PathBuf>,
    /// `allowed_mounts` of the node that wrote the request: where a mount's source, opened
    /// as the user with its links followed, must still lie (`user_mounts`).
    #[serde(default)]
    pub allowed_mounts: Vec<PathBuf>,
    /// The cache's size limit (`cache_max_mib`; 0: none).
    #[serde(default)]
    pub cache_max_mib: u64,
    /// A user's share of it (`cache_max_mib_per_user`; 0: none).
    #[serde(default)]
    pub cache_max_mib_per_user: u64,
    /// A pull's deadline (`pull_timeout_s`; 0: none).
    #[serde(default)]
    pub pull_timeout_s: u64,
    /// Bytes one pull may bring (`max_pull_mib`; 0: no bound).
    #[serde(default)]
    pub max_pull_mib: u64,
    /// Bytes one image may take unpacked (`max_unpacked_mib`; 0: no bound).
    #[serde(default)]
    pub max_unpacked_mib: u64,
    /// The task's `cgroup.procs` files, which the cache's tools (skopeo, umoci, the
    /// decompressors) join so that their use is the job's: set by the shim from its own
    /// arguments, never read from the file.
    #[serde(skip)]
    pub tool_cgroups: Vec<PathBuf>,
    /// The task has a terminal (`gantry run` from one): the runtime makes one inside and
    /// relays it to the shim's, so the command has a controlling terminal (job control).
    #[serde(default)]
    pub terminal: bool,
    /// The container's name for the runtime, unique on the node.
    pub name: String,
    /// The bundle directory (its `config.json`); the root file system is the cache's.
    pub bundle_dir: PathBuf,
}

/// Writes `req` to `path` (mode 0600, replacing an older file, never through a link).
pub fn write_request(path: &Path, req: &ContainerRequest) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let json = serde_json::to_vec(req).map_err(std::io::Error::other)?;
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    f.write_all(&json)
}

/// Reads the request the executor wrote.
pub fn read_request(path: &Path) -> std::io::Result<ContainerRequest> {
    let bytes = std::fs::read(path)?;
    serde_json::from_slice(&bytes).map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn mounts_and_layouts_are_allowed_by_whole_components_only() {
        let c = Containers {
            config: ContainersConfig {
                allowed_mounts: vec!["/datasets".into()],
                image_dirs: vec!["/srv/images".into()],
                insecure_registries: vec!["127.0.0.1:5000".into()],
                ..Default::default()
            },
            cache_dir: "/tmp/x".into(),
            runtime: None,
        };
        assert!(c.mount_allowed("/datasets/imagenet"));
        assert!(c.mount_allowed("/datasets"));
        assert!(!c.mount_allowed("/datasets-private"));
        assert!(!c.mount_allowed("/etc"));
        assert!(c.layout_allowed(Path::new("/srv/images/busybox")));
        assert!(!c.layout_allowed(Path::new("/srv/imagesX")));
        assert!(c.insecure("127.0.0.1:5000/test:v1"));
        assert!(!c.insecure("127.0.0.1:5001/test:v1"));
        assert!(!c.insecure("busybox"));
        assert!(c.unavailable().is_some());
    }
}
