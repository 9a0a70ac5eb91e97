//! The executor's side of a task in an image: the request its shim reads
//! (`task-N.container`), and the shim's side: make the image ready, write the bundle, and
//! the runtime's command line that replaces the task's own.
//!
//! The shim runs the runtime as root (it needs to make namespaces and mounts); the runtime
//! starts the task's command as the job's user with no capability and
//! `no_new_privileges` (`container::bundle`). The runtime is in the task's cgroup; the
//! container is in a child of it (`ctr`), so the task's limits, usage and OOM count stay on
//! the task's cgroup, and the runtime removes only the child when the container ends.
//!
//! A GPU task's device nodes, driver files and variables are chosen here, where its GPUs
//! are known: from the node's CDI spec when one names them (`container::cdi`), else its
//! GPUs' nodes and the driver's files found on the host; never another GPU's node.
//!
//! Owns: that glue. Does not own the image cache (`container::image_store`), the bundle's
//! contents (`container::bundle`), the CDI files (`container::cdi`) nor the task's cgroup
//! (`cgroup`).

use super::devices::{DeviceId, char_device};
use super::{ExecError, TaskLaunch};
use crate::container::{self, ContainerRequest, Containers, cdi};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use crate::container::RUNTIME_STATE;

/// The control nodes a GPU task needs beside its GPUs' own, when the node has them.
const GPU_CONTROL_NODES: [&str; 4] = [
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/nvidia-modeset",
];

/// GPU indices whose nodes (`execution.gpu_device_pattern`) are kept from a task not given
/// them, whatever a CDI spec says (a node has fewer GPUs).
const MAX_GPU_INDEX: u32 = 64;

/// What a task's GPUs bring into its container.
#[derive(Debug, Default, PartialEq, Eq)]
struct GpuParts {
    /// Host device nodes; where one is made at another path inside.
    devices: Vec<PathBuf>,
    device_paths: BTreeMap<PathBuf, PathBuf>,
    mounts: Vec<cdi::DriverMount>,
    env: Vec<String>,
}

/// The device nodes, driver files and variables of a task given `gpus`: from the CDI specs
/// in `cdi_dirs` when one names one of them by index, else its GPUs' nodes (`gpu_device`)
/// and the driver's files found on the host; with the control nodes the host has. A node
/// that is missing, not a character device, or another GPU's is left out.
fn gpu_parts(cdi_dirs: &[PathBuf], gpus: &[u32], gpu_device: &dyn Fn(u32) -> PathBuf) -> GpuParts {
    let mut parts = GpuParts::default();
    if gpus.is_empty() {
        return parts;
    }
    let own = |g: &u32| (gpu_device(*g), gpu_device(*g));
    let mut nodes: Vec<(PathBuf, PathBuf)>;
    let mut others = HashSet::new();
    match cdi::select(&cdi::load(cdi_dirs, cdi::GPU_KIND), gpus) {
        Some(sel) => {
            if !sel.ignored.is_empty() {
                tracing::info!("CDI: left out {}", sel.ignored.join(", "));
            }
            if !sel.unnamed.is_empty() {
                let unnamed = &sel.unnamed;
                tracing::warn!(gpus = ?unnamed, "no CDI device is named by these indices");
            }
            nodes = sel.unnamed.iter().map(own).collect();
            nodes.extend(sel.device_nodes);
            (parts.mounts, parts.env, others) = (sel.mounts, sel.env, sel.others);
        }
        None => {
            nodes = gpus.iter().map(own).collect();
            parts.mounts = cdi::driver_files();
        }
    }
    nodes.extend(
        GPU_CONTROL_NODES
            .iter()
            .map(|p| (PathBuf::from(p), PathBuf::from(p))),
    );
    others.extend(
        (0..MAX_GPU_INDEX)
            .filter(|g| !gpus.contains(g))
            .map(gpu_device),
    );
    let denied: HashSet<DeviceId> = (others.iter())
        .filter(|p| p.exists())
        .filter_map(|p| char_device(p))
        .collect();
    let mut inside_paths = HashSet::new();
    for (host, inside) in nodes {
        if !host.exists() || parts.devices.contains(&host) || inside_paths.contains(&inside) {
            continue;
        }
        match char_device(&host) {
            Some(id) if !denied.contains(&id) && !others.contains(&host) => {}
            Some(id) => {
                tracing::warn!(node = %host.display(), "left out: {id} is another GPU's node");
                continue;
            }
            None => continue,
        }
        inside_paths.insert(inside.clone());
        if inside != host {
            parts.device_paths.insert(host.clone(), inside);
        }
        parts.devices.push(host);
    }
    parts
}

/// The container's cgroup below the task's (`cgroup_name`, e.g. `gantry/job-1-task-0`).
pub(crate) fn container_cgroup(cgroup_name: &str) -> String {
    format!("/{cgroup_name}/{}", super::naming::CONTAINER_CHILD)
}

/// Writes the request for task `l` beside its exit file; returns its path.
pub(crate) fn write_request(
    containers: &Containers,
    l: &TaskLaunch,
    image: &str,
    cgroup_name: Option<&str>,
    allow_root: bool,
    gpu_device: impl Fn(u32) -> PathBuf,
) -> Result<PathBuf, ExecError> {
    let (uid, gid, groups) = match &l.identity {
        Some(i) => (i.uid, i.gid, i.groups.clone()),
        // The daemon's own ids, as a host task run as the daemon's user has.
        None => (
            gantry_private_files::daemon_uid(),
            gantry_private_files::daemon_gid(),
            Vec::new(),
        ),
    };
    let script = l.exit_path.with_file_name("script");
    refuse_outside_config(containers, image, &l.mounts, &script)?;
    if uid == 0 && !allow_root {
        return Err(ExecError::Container(
            "the task would run as root inside its image (tasks keep the daemon's user: \
             execution.run_as_user is off); set execution.allow_root to allow it"
                .into(),
        ));
    }
    let gpus = gpu_parts(&containers.config.cdi_dirs, &l.gpus, &gpu_device);
    let dir = l.exit_path.with_extension("bundle");
    let unique = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let name = format!("gantry-{}-{}-{unique}", l.job_id, l.task_index);
    let req = ContainerRequest {
        image: image.to_string(),
        mounts: l.mounts.clone(),
        uid,
        gid,
        groups,
        cwd: l.workdir.as_ref().map(|w| w.to_string_lossy().into_owned()),
        devices: gpus.devices,
        device_paths: gpus.device_paths,
        gpu_mounts: gpus.mounts,
        gpu_env: gpus.env,
        cgroups_path: cgroup_name.map(container_cgroup),
        runtime: containers.runtime.clone().ok_or_else(|| {
            ExecError::Container(
                containers
                    .unavailable()
                    .unwrap_or_else(|| "no OCI runtime".into()),
            )
        })?,
        cache_dir: containers.cache_dir.clone(),
        insecure: containers.insecure(image),
        auth_file: containers.config.auth_file.clone(),
        allowed_mounts: containers.config.allowed_mounts.clone(),
        cache_max_mib: containers.config.cache_max_mib,
        cache_max_mib_per_user: containers.config.cache_max_mib_per_user,
        pull_timeout_s: containers.config.pull_timeout_s,
        max_pull_mib: containers.config.max_pull_mib,
        max_unpacked_mib: containers.config.max_unpacked_mib,
        tool_cgroups: Vec::new(),
        terminal: matches!(l.input, super::TaskInput::Tty { .. }),
        name,
        bundle_dir: dir,
    };
    let path = l.exit_path.with_extension("container");
    container::write_request(&path, &req).map_err(|source| ExecError::Prepare {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// This node's own `[containers]` decide what it mounts and reads, whatever the controller
/// checked at submit (its settings may differ from an agent's): a mount outside
/// `allowed_mounts` (other than the job's own `script`) or a local image outside
/// `image_dirs` is refused here too.
fn refuse_outside_config(
    containers: &Containers,
    image: &str,
    mounts: &[gantry_api::model::ContainerMount],
    script: &Path,
) -> Result<(), ExecError> {
    let own_script = |m: &gantry_api::model::ContainerMount| {
        m.destination == container::SCRIPT_IN_IMAGE && Path::new(&m.source) == script
    };
    if let Some(m) = mounts
        .iter()
        .find(|m| !own_script(m) && !containers.mount_allowed(&m.source))
    {
        return Err(ExecError::Container(format!(
            "{} is not under a directory of this node's [containers] allowed_mounts",
            m.source
        )));
    }
    let source = container::image_ref::Source::parse(image)
        .map_err(|e| ExecError::Container(e.to_string()))?;
    if let Some(path) = source.local_path()
        && !containers.layout_allowed(path)
    {
        return Err(ExecError::Container(format!(
            "{} is not under a directory of this node's [containers] image_dirs",
            path.display()
        )));
    }
    Ok(())
}

/// In the shim: makes the image ready and writes the bundle for `argv` with the task's
/// environment `env`; returns the runtime's command line. `say` writes to the task's log.
/// The cache's tools (pull, unpack) run in the task's cgroups (`cgroup_procs`), so that
/// what they use is the job's.
pub(crate) fn prepare_in_shim(
    request: &Path,
    argv: &[String],
    env: &[(String, String)],
    cgroup_procs: &[PathBuf],
    say: &mut dyn FnMut(&str),
) -> Result<Vec<String>, String> {
    let mut req = container::read_request(request)
        .map_err(|e| format!("cannot read {}: {e}", request.display()))?;
    req.tool_cgroups = cgroup_procs.to_vec();
    // Mount sources are opened as the user first; the bundle binds those descriptors.
    container::user_mounts::open_as_user(&mut req).map_err(|e| e.to_string())?;
    let image = container::image_store::prepare(&req, say).map_err(|e| e.to_string())?;
    say(&format!("image {} is {}", req.image, image.digest));
    collect_cache(&req, say);
    let job_path = env
        .iter()
        .find(|(k, _)| k == "GANTRY_JOB_PATH")
        .map(|(_, v)| v.as_str());
    let env = container::bundle::merged_env(&image.env, env, job_path);
    let spec = container::bundle::spec(&req, &image, argv, env).map_err(|e| e.to_string())?;
    container::bundle::write(&req.bundle_dir, &spec).map_err(|e| e.to_string())?;
    let _ = std::fs::create_dir_all(RUNTIME_STATE);
    Ok(vec![
        req.runtime.to_string_lossy().into_owned(),
        "--root".into(),
        RUNTIME_STATE.into(),
        "run".into(),
        "--bundle".into(),
        req.bundle_dir.to_string_lossy().into_owned(),
        req.name,
    ])
}

/// After a task in an image ended (its processes are gone): removes what its runtime keeps
/// of it, which a runtime killed with its task leaves (`runc delete --force`); nothing for a
/// host task.
pub(crate) fn forget_container(exit_path: &Path) {
    let Ok(req) = container::read_request(&exit_path.with_extension("container")) else {
        return;
    };
    if !Path::new(RUNTIME_STATE).join(&req.name).exists() {
        return;
    }
    let out = std::process::Command::new(&req.runtime)
        .args(["--root", RUNTIME_STATE, "delete", "--force", &req.name])
        .stdin(std::process::Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) => tracing::warn!(
            container = %req.name,
            "cannot delete the container's runtime state: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => {
            tracing::warn!(container = %req.name, "cannot run {}: {e}", req.runtime.display())
        }
    }
}

/// Past `cache_max_mib`, removes the least recently used images (one collector at a time
/// per node, under `.gc.lock`); a failure is logged, never fatal to the task.
fn collect_cache(req: &ContainerRequest, say: &mut dyn FnMut(&str)) {
    let lock_path = req.cache_dir.join(".gc.lock");
    let Ok(lock) = std::fs::File::create(&lock_path) else {
        return;
    };
    if lock.try_lock().is_err() {
        return;
    }
    match container::cache::collect(&req.cache_dir, Path::new(RUNTIME_STATE), req.cache_max_mib) {
        Ok(removed) if !removed.is_empty() => say(&format!(
            "image cache over {} MiB: removed {}",
            req.cache_max_mib,
            removed.join(", ")
        )),
        Ok(_) => {}
        Err(e) => say(&format!("image cache collection failed: {e}")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_node_refuses_mounts_and_images_its_own_settings_do_not_allow() {
        let containers = Containers {
            config: container::ContainersConfig {
                allowed_mounts: vec!["/datasets".into()],
                image_dirs: vec!["/srv/images".into()],
                ..Default::default()
            },
            cache_dir: "/tmp/cache".into(),
            runtime: None,
        };
        let mount = |source: &str, destination: &str| gantry_api::model::ContainerMount {
            source: source.into(),
            destination: destination.into(),
            read_only: true,
        };
        let script = Path::new("/data/jobs/7/script");
        let ok = [
            mount("/datasets/a", "/a"),
            mount("/data/jobs/7/script", container::SCRIPT_IN_IMAGE),
        ];
        refuse_outside_config(&containers, "reg/x:v1", &ok, script).unwrap();
        refuse_outside_config(&containers, "oci:/srv/images/x:v1", &[], script).unwrap();
        for (image, mounts) in [
            ("reg/x:v1", vec![mount("/etc", "/etc2")]),
            (
                "reg/x:v1",
                vec![mount("/data/jobs/8/script", container::SCRIPT_IN_IMAGE)],
            ),
            ("oci:/var/images/x:v1", vec![]),
            ("docker-archive:/tmp/x.tar", vec![]),
        ] {
            let refused = refuse_outside_config(&containers, image, &mounts, script);
            assert!(refused.is_err(), "{image} {mounts:?}");
        }
    }

    /// `/dev/null` and `/dev/zero` stand for GPUs 0 and 1.
    fn fake_gpu(g: u32) -> PathBuf {
        match g {
            0 => "/dev/null".into(),
            1 => "/dev/zero".into(),
            _ => format!("/nonexistent/nvidia{g}").into(),
        }
    }

    #[test]
    fn a_gpu_task_gets_its_cdi_nodes_and_edits_and_never_another_gpus_node() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("zero-link");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let spec = format!(
            "cdiVersion: 0.6.0\nkind: nvidia.com/gpu\ndevices:\n\
             - {{name: '0', containerEdits: {{deviceNodes: [{{path: /dev/nvidia0, hostPath: /dev/null}}]}}}}\n\
             - {{name: '1', containerEdits: {{deviceNodes: [{{path: /dev/nvidia1, hostPath: /dev/zero}}]}}}}\n\
             containerEdits:\n  \
               env: [GANTRY_TEST_CDI=yes]\n  \
               mounts: [{{hostPath: /etc/hostname, containerPath: /usr/lib/libcuda-fake.so}}]\n  \
               deviceNodes:\n  \
               - {{path: /dev/nvidia-uvm, hostPath: /dev/full}}\n  \
               - {{path: /dev/sneaky, hostPath: {}}}\n  \
               - {{path: /dev/missing, hostPath: /nonexistent/x}}\n",
            link.display()
        );
        std::fs::write(dir.path().join("nvidia.yaml"), spec).unwrap();
        let dirs = [dir.path().to_path_buf()];
        let parts = gpu_parts(&dirs, &[0], &fake_gpu);
        assert_eq!(
            parts.devices,
            [PathBuf::from("/dev/full"), "/dev/null".into()]
        );
        let inside: Vec<&PathBuf> = parts.device_paths.values().collect();
        assert_eq!(
            inside,
            [Path::new("/dev/nvidia-uvm"), Path::new("/dev/nvidia0")]
        );
        assert_eq!(
            parts.mounts[0].destination,
            Path::new("/usr/lib/libcuda-fake.so")
        );
        assert_eq!(parts.env, ["GANTRY_TEST_CDI=yes"]);
        assert_eq!(gpu_parts(&dirs, &[], &fake_gpu), GpuParts::default());
        // No spec names GPU 1's kind here: its own node, no variable.
        let empty = tempfile::tempdir().unwrap();
        let fallback = gpu_parts(&[empty.path().to_path_buf()], &[1], &fake_gpu);
        assert_eq!(fallback.devices, [PathBuf::from("/dev/zero")]);
        assert!(fallback.device_paths.is_empty() && fallback.env.is_empty());
    }
}
