//! What a task in an image gets for its GPUs besides their device nodes: the node's
//! Container Device Interface (CDI) spec when there is one, else the NVIDIA driver's user
//! libraries and tools found on the host.
//!
//! CDI (github.com/cncf-tags/container-device-interface, `SPEC.md`): `nvidia-ctk cdi
//! generate --output=/etc/cdi/nvidia.yaml` writes a spec of kind `nvidia.com/gpu` with a
//! device per GPU (named by index, `"0"`, `"1"`..., also by UUID, and `"all"`) and edits
//! common to them (control nodes, the driver's files, variables). Every `*.json` and
//! `*.yaml` file of `[containers] cdi_dirs` is read at each launch of a GPU task; for a name
//! in several specs the last directory's (then file's, by name) wins. Gantry selects devices
//! by the task's GPU indices only, never `"all"` nor a UUID, and merges each used spec's
//! common edits with the selected devices' own, less the nodes of any device not selected.
//!
//! Used: `env`; `deviceNodes` of type `c` (or none), numbers read from the host's node (the
//! spec's `major`, `minor`, `fileMode`, `permissions` are not used); `mounts` of type `bind`
//! (or none). Ignored, with a logged note: `hooks` (nvidia-ctk's update `ld.so.cache` and
//! make links in the image's root, which every task of that image shares and must not
//! change), other nodes and mounts, every other field (`additionalGids`, `intelRdt`...).
//!
//! Owns: reading and checking spec files (a bad one is logged with its path and skipped),
//! the selection, the fallback's `ldconfig -p`. Does not own which GPUs a task has, the
//! fence nor the host nodes' check (`executor`), nor `config.json` (`bundle`).

use gantry_api::model::container::is_clean_absolute;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The kind of NVIDIA GPUs in CDI specs.
pub const GPU_KIND: &str = "nvidia.com/gpu";

/// A spec file larger than this is refused (nvidia-ctk's for 8 GPUs is about 30 KiB).
const MAX_SPEC_BYTES: u64 = 4 << 20;

/// Where `ldconfig` is looked for; the driver's tools the fallback binds when present.
const LDCONFIG: [&str; 2] = ["/sbin/ldconfig", "/usr/sbin/ldconfig"];
const DRIVER_TOOLS: [&str; 2] = ["/usr/bin/nvidia-smi", "/usr/bin/nvidia-debugdump"];

/// Why a spec file was skipped.
#[derive(Debug, thiserror::Error)]
pub enum CdiError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a regular file of at most {MAX_SPEC_BYTES} bytes")]
    NotASpecFile { path: PathBuf },
    #[error("{path}: not a CDI specification: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: {field}: {message}")]
    Invalid {
        path: PathBuf,
        field: String,
        message: &'static str,
    },
}

/// A spec file: the fields Gantry reads (others are ignored).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    pub cdi_version: String,
    pub kind: String,
    #[serde(default)]
    pub devices: Vec<Device>,
    #[serde(default)]
    pub container_edits: Edits,
    /// The file it was read from.
    #[serde(skip)]
    pub path: PathBuf,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    pub name: String,
    #[serde(default)]
    pub container_edits: Edits,
}

/// `containerEdits`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Edits {
    pub env: Vec<String>,
    pub device_nodes: Vec<DeviceNode>,
    pub mounts: Vec<Mount>,
    pub hooks: Vec<serde::de::IgnoredAny>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceNode {
    pub path: PathBuf,
    pub host_path: Option<PathBuf>,
    #[serde(rename = "type")]
    pub typ: Option<String>,
}

impl DeviceNode {
    /// The host's node (`hostPath`, else `path`).
    fn host(&self) -> PathBuf {
        self.host_path.clone().unwrap_or_else(|| self.path.clone())
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Mount {
    pub host_path: PathBuf,
    pub container_path: PathBuf,
    #[serde(default)]
    pub options: Vec<String>,
    #[serde(rename = "type")]
    pub typ: Option<String>,
}

/// A host file or directory bound inside (`bundle` adds `nosuid,nodev`, and `ro` unless
/// `options` has `rw`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverMount {
    pub source: PathBuf,
    pub destination: PathBuf,
    #[serde(default)]
    pub options: Vec<String>,
}

/// Parses (as YAML, which JSON is) and checks the spec read from `path`.
pub fn parse(path: &Path, text: &str) -> Result<Spec, CdiError> {
    let mut spec: Spec = serde_yaml::from_str(text).map_err(|e| CdiError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    check(&spec).map_err(|(field, message)| CdiError::Invalid {
        path: path.to_path_buf(),
        field,
        message,
    })?;
    spec.path = path.to_path_buf();
    Ok(spec)
}

fn check(spec: &Spec) -> Result<(), (String, &'static str)> {
    if spec.cdi_version.trim().is_empty() {
        return Err(("cdiVersion".into(), "empty"));
    }
    let kind = spec.kind.split_once('/');
    if !kind.is_some_and(|(vendor, class)| !vendor.is_empty() && !class.is_empty()) {
        return Err(("kind".into(), "not vendor/class"));
    }
    check_edits(&spec.container_edits).map_err(|(at, m)| (format!("containerEdits.{at}"), m))?;
    for (i, d) in spec.devices.iter().enumerate() {
        if d.name.is_empty() {
            return Err((format!("devices[{i}].name"), "empty"));
        }
        check_edits(&d.container_edits)
            .map_err(|(at, m)| (format!("devices[{i}].containerEdits.{at}"), m))?;
    }
    Ok(())
}

fn check_edits(e: &Edits) -> Result<(), (String, &'static str)> {
    for (i, kv) in e.env.iter().enumerate() {
        if kv.split_once('=').is_none_or(|(k, _)| k.is_empty()) || kv.contains('\0') {
            return Err((format!("env[{i}]"), "not NAME=value"));
        }
    }
    let nodes = e.device_nodes.iter().enumerate().flat_map(|(i, n)| {
        let at = format!("deviceNodes[{i}]");
        [
            (format!("{at}.path"), Some(&n.path)),
            (format!("{at}.hostPath"), n.host_path.as_ref()),
        ]
    });
    let mounts = e.mounts.iter().enumerate().flat_map(|(i, m)| {
        let at = format!("mounts[{i}]");
        let container_path = (format!("{at}.containerPath"), Some(&m.container_path));
        [
            (format!("{at}.hostPath"), Some(&m.host_path)),
            container_path,
        ]
    });
    for (field, path) in nodes.chain(mounts) {
        if path.is_some_and(|p| !p.to_str().is_some_and(is_clean_absolute)) {
            return Err((field, "not an absolute path without . or .."));
        }
    }
    Ok(())
}

/// Reads the spec file at `path`.
pub fn read(path: &Path) -> Result<Spec, CdiError> {
    let io = |source| CdiError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() || meta.len() > MAX_SPEC_BYTES {
        let path = path.to_path_buf();
        return Err(CdiError::NotASpecFile { path });
    }
    let mut text = String::new();
    file.take(MAX_SPEC_BYTES)
        .read_to_string(&mut text)
        .map_err(io)?;
    parse(path, &text)
}

/// Every spec of `kind` in `dirs`, lowest priority first (the directories in order, each
/// one's files by name); a file that cannot be read or checked is logged and skipped.
pub fn load(dirs: &[PathBuf], kind: &str) -> Vec<Spec> {
    let mut specs = Vec::new();
    for dir in dirs {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), "cannot read the CDI directory: {e}");
                continue;
            }
        };
        let mut files: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "json" || e == "yaml"))
            .collect();
        files.sort();
        for file in files {
            match read(&file) {
                Ok(spec) if spec.kind == kind => specs.push(spec),
                Ok(_) => {}
                Err(e) => tracing::warn!("CDI specification skipped: {e}"),
            }
        }
    }
    specs
}

/// What a task gets from the specs for its GPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Device nodes: the host's path and the path inside, one per path inside.
    pub device_nodes: Vec<(PathBuf, PathBuf)>,
    /// Bind mounts, one per destination.
    pub mounts: Vec<DriverMount>,
    /// `NAME=value`, in order (a later one replaces an earlier one of that name).
    pub env: Vec<String>,
    /// What was left out, for the log.
    pub ignored: Vec<String>,
    /// The task's GPUs no spec names by index.
    pub unnamed: Vec<u32>,
    /// Host paths of the nodes of the devices not selected (less the selected ones'),
    /// left out of `device_nodes` even where common edits list them.
    pub others: HashSet<PathBuf>,
}

impl Selection {
    fn add(&mut self, edits: &Edits, from: &Path) {
        self.env.extend(edits.env.iter().cloned());
        for n in &edits.device_nodes {
            let new = !self.device_nodes.iter().any(|(_, p)| *p == n.path);
            match n.typ.as_deref() {
                None | Some("c") if new => self.device_nodes.push((n.host(), n.path.clone())),
                None | Some("c") => {}
                Some(t) => {
                    let at = n.path.display();
                    self.ignored.push(format!("node {at} of type {t}"));
                }
            }
        }
        for m in &edits.mounts {
            let new = !self
                .mounts
                .iter()
                .any(|o| o.destination == m.container_path);
            match m.typ.as_deref() {
                None | Some("bind") if new => self.mounts.push(DriverMount {
                    source: m.host_path.clone(),
                    destination: m.container_path.clone(),
                    options: m.options.clone(),
                }),
                None | Some("bind") => {}
                Some(t) => {
                    let at = m.container_path.display();
                    self.ignored.push(format!("mount {at} of type {t}"));
                }
            }
        }
        if !edits.hooks.is_empty() {
            let (n, at) = (edits.hooks.len(), from.display());
            self.ignored.push(format!("{n} hooks of {at}"));
        }
    }
}

/// The edits for GPUs `gpus` from `specs` (as [`load`] orders them); `None` when no spec
/// names any of them by its index.
pub fn select(specs: &[Spec], gpus: &[u32]) -> Option<Selection> {
    let mut chosen: Vec<(usize, usize)> = Vec::new();
    let mut out = Selection::default();
    for g in gpus {
        let name = g.to_string();
        let found = specs.iter().enumerate().rev().find_map(|(s, spec)| {
            let d = spec.devices.iter().position(|d| d.name == name)?;
            Some((s, d))
        });
        match found {
            Some(at) if !chosen.contains(&at) => chosen.push(at),
            Some(_) => {}
            None => out.unnamed.push(*g),
        }
    }
    if chosen.is_empty() {
        return None;
    }
    let mut used: Vec<usize> = chosen.iter().map(|(s, _)| *s).collect();
    used.sort_unstable();
    used.dedup();
    for s in used {
        out.add(&specs[s].container_edits, &specs[s].path);
    }
    for (s, d) in &chosen {
        out.add(&specs[*s].devices[*d].container_edits, &specs[*s].path);
    }
    let nodes_of = |s: usize, d: usize| {
        let device = &specs[s].devices[d];
        device
            .container_edits
            .device_nodes
            .iter()
            .map(DeviceNode::host)
    };
    let mine: HashSet<PathBuf> = chosen.iter().flat_map(|&(s, d)| nodes_of(s, d)).collect();
    for (s, spec) in specs.iter().enumerate() {
        for d in (0..spec.devices.len()).filter(|d| !chosen.contains(&(s, *d))) {
            out.others
                .extend(nodes_of(s, d).filter(|p| !mine.contains(p)));
        }
    }
    let others = &out.others;
    out.device_nodes.retain(|(host, _)| !others.contains(host));
    Some(out)
}

/// The fallback without a CDI spec: the driver's user libraries that `ldconfig -p` lists
/// and its tools, each bound read-only at the path the host has it (a link's target bound
/// at the link's path). Empty on a node without the driver.
pub fn driver_files() -> Vec<DriverMount> {
    let listed = (LDCONFIG.iter().map(Path::new))
        .find(|p| p.exists())
        .map(ldconfig_cache)
        .unwrap_or_default();
    let mut mounts: Vec<DriverMount> = Vec::new();
    let tools = DRIVER_TOOLS.iter().map(PathBuf::from);
    for path in driver_libraries(&listed).into_iter().chain(tools) {
        // The file a link names, bound at the link's path.
        let source = std::fs::canonicalize(&path).ok().filter(|p| p.is_file());
        if let Some(source) = source
            && !mounts.iter().any(|m| m.destination == path)
        {
            let options = vec!["ro".to_string()];
            mounts.push(DriverMount {
                source,
                destination: path,
                options,
            });
        }
    }
    mounts
}

/// `ldconfig -p`'s output; empty (and logged) when it fails.
fn ldconfig_cache(ldconfig: &Path) -> String {
    let mut cmd = std::process::Command::new(ldconfig);
    cmd.arg("-p")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    crate::process_hygiene::in_new_session(&mut cmd);
    match cmd.output() {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).into_owned(),
        failed => {
            let status = failed.map(|o| o.status);
            tracing::warn!("{} -p failed: {status:?}", ldconfig.display());
            String::new()
        }
    }
}

/// The paths of the driver's libraries in `ldconfig -p` output (lines `\tNAME (ABI) =>
/// PATH`): `libcuda.so*`, `libcudadebugger.so*`, `libnvidia-*.so*` (which includes
/// `libnvidia-ml` and `libnvidia-ptxjitcompiler`).
pub fn driver_libraries(ldconfig_output: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for line in ldconfig_output.lines() {
        let Some((left, right)) = line.split_once(" => ") else {
            continue;
        };
        let name = left.split_whitespace().next().unwrap_or("");
        let ours = ["libcuda.so", "libcudadebugger.so", "libnvidia-"]
            .iter()
            .any(|prefix| name.starts_with(prefix))
            && name.contains(".so");
        let path = right.trim();
        if ours && is_clean_absolute(path) && !out.iter().any(|p| p == Path::new(path)) {
            out.push(PathBuf::from(path));
        }
    }
    out
}

#[cfg(test)]
#[path = "cdi_tests.rs"]
mod tests;
