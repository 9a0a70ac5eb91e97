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
        .terminal(false)
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
    crate::private_files::dir_with_mode(dir, 0o700).map_err(io)?;
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
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_tasks_variables_win_but_the_hosts_path_does_not_replace_the_images() {
        let image = vec!["PATH=/opt/conda/bin:/bin".to_string(), "LANG=C".into()];
        let task = vec![
            ("PATH".to_string(), "/usr/bin".to_string()),
            ("CUDA_VISIBLE_DEVICES".into(), "0".into()),
            ("LANG".into(), "C.UTF-8".into()),
        ];
        let env = merged_env(&image, &task, None);
        assert!(env.contains(&"PATH=/opt/conda/bin:/bin".to_string()));
        assert!(env.contains(&"CUDA_VISIBLE_DEVICES=0".to_string()));
        assert!(env.contains(&"LANG=C.UTF-8".to_string()));
        assert!(!env.contains(&"LANG=C".to_string()));
        let own = merged_env(&image, &task, Some("/mine"));
        assert!(own.contains(&"PATH=/mine".to_string()));
        assert_eq!(own.iter().filter(|e| e.starts_with("PATH=")).count(), 1);
    }

    /// A request as the executor writes it, with `/dev/null` for a device node.
    fn request() -> ContainerRequest {
        ContainerRequest {
            image: "x".into(),
            mounts: vec![gantry_api::model::ContainerMount {
                source: "/datasets".into(),
                destination: "/data".into(),
                read_only: true,
            }],
            uid: 1000,
            gid: 100,
            groups: vec![44],
            cwd: None,
            devices: vec!["/dev/null".into()],
            device_paths: Default::default(),
            gpu_mounts: Vec::new(),
            gpu_env: Vec::new(),
            cgroups_path: Some("/gantry/job-1-task-0".into()),
            runtime: "/usr/sbin/runc".into(),
            cache_dir: "/tmp/c".into(),
            insecure: false,
            auth_file: None,
            cache_max_mib: 0,
            name: "gantry-1-0".into(),
            bundle_dir: "/tmp/b".into(),
        }
    }

    fn image() -> PreparedImage {
        PreparedImage {
            digest: "sha256:0".into(),
            rootfs: "/tmp/c/rootfs/0/rootfs".into(),
            env: vec![],
            cwd: "/work".into(),
        }
    }

    #[test]
    fn a_task_gets_its_user_no_capabilities_its_namespaces_and_only_its_devices() {
        let (req, image) = (request(), image());
        let spec = spec(&req, &image, &["id".into()], vec!["A=1".into()]).unwrap();
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(json["process"]["user"]["uid"], 1000);
        assert_eq!(json["process"]["user"]["additionalGids"][0], 44);
        assert_eq!(json["process"]["noNewPrivileges"], true);
        assert_eq!(json["process"]["cwd"], "/work");
        assert_eq!(
            json["process"]["capabilities"]["bounding"],
            serde_json::json!([])
        );
        assert_eq!(json["root"]["readonly"], true);
        let ns: Vec<&str> = json["linux"]["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["type"].as_str().unwrap())
            .collect();
        assert_eq!(ns, ["pid", "ipc", "mount"], "host network and host name");
        assert_eq!(json["linux"]["cgroupsPath"], "/gantry/job-1-task-0");
        let dev = &json["linux"]["devices"][0];
        assert_eq!(
            (dev["major"].as_i64(), dev["minor"].as_i64()),
            (Some(1), Some(3))
        );
        let rules = json["linux"]["resources"]["devices"].as_array().unwrap();
        assert_eq!(rules[0]["allow"], false);
        assert_eq!(rules[1]["allow"], true);
        let data = json["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["destination"] == "/data")
            .unwrap();
        assert!(data["options"].as_array().unwrap().contains(&"ro".into()));
        assert!(
            data["options"]
                .as_array()
                .unwrap()
                .contains(&"nosuid".into())
        );
    }

    #[test]
    fn a_gpu_tasks_cdi_node_mount_and_variables_reach_it_but_never_replace_its_gpus() {
        let mut req = request();
        req.device_paths = [("/dev/null".into(), "/dev/nvidia0".into())].into();
        req.gpu_mounts = vec![crate::container::cdi::DriverMount {
            source: "/opt/driver/libcuda.so.1".into(),
            destination: "/usr/lib/libcuda.so.1".into(),
            options: vec!["bind".into(), "dev".into(), "suid".into()],
        }];
        req.gpu_env = [
            "CUDA_VISIBLE_DEVICES=all",
            "GANTRY_JOB_ID=9",
            "GANTRY_TEST_CDI=yes",
        ]
        .into_iter()
        .chain(["NVIDIA_VISIBLE_DEVICES=void", "A=2"])
        .map(String::from)
        .collect();
        let env = ["A=1", "CUDA_VISIBLE_DEVICES=0", "GANTRY_JOB_ID=1"].map(String::from);
        let spec = spec(&req, &image(), &["id".into()], env.to_vec()).unwrap();
        let json = serde_json::to_value(&spec).unwrap();
        let dev = &json["linux"]["devices"];
        assert_eq!(dev.as_array().unwrap().len(), 1, "{dev}");
        assert_eq!(
            dev[0]["path"], "/dev/nvidia0",
            "made inside at the spec's path"
        );
        assert_eq!(
            (dev[0]["major"].as_i64(), dev[0]["minor"].as_i64()),
            (Some(1), Some(3))
        );
        let lib = (json["mounts"].as_array().unwrap().iter())
            .find(|m| m["destination"] == "/usr/lib/libcuda.so.1")
            .unwrap();
        assert_eq!(lib["source"], "/opt/driver/libcuda.so.1");
        assert_eq!(
            lib["options"],
            serde_json::json!(["bind", "nosuid", "nodev", "ro"])
        );
        let env: Vec<&str> = (json["process"]["env"].as_array().unwrap().iter())
            .map(|e| e.as_str().unwrap())
            .collect();
        for kept in [
            "CUDA_VISIBLE_DEVICES=0",
            "GANTRY_JOB_ID=1",
            "GANTRY_TEST_CDI=yes",
            "A=2",
        ] {
            assert!(env.contains(&kept), "{kept} not in {env:?}");
        }
        assert!(env.contains(&"NVIDIA_VISIBLE_DEVICES=void"), "{env:?}");
        assert!(!env.contains(&"CUDA_VISIBLE_DEVICES=all") && !env.contains(&"A=1"));
        assert_eq!(
            driver_mount_options(&[]),
            ["rbind", "nosuid", "nodev", "ro"]
        );
        assert!(driver_mount_options(&["rw".into()]).contains(&"rw".to_string()));
    }

    #[test]
    fn a_request_written_by_an_older_binary_still_reads() {
        let mut old = serde_json::to_value(request()).unwrap();
        for field in ["device_paths", "gpu_mounts", "gpu_env"] {
            old.as_object_mut().unwrap().remove(field);
        }
        let req: ContainerRequest = serde_json::from_value(old).unwrap();
        assert!(req.device_paths.is_empty() && req.gpu_mounts.is_empty() && req.gpu_env.is_empty());
    }
}
