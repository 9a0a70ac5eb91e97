//! A task's OCI bundle: the `config.json` the runtime runs, written with `oci-spec`.
//!
//! What a container gets: the image's root file system read-only (shared by every task of
//! that image) with a private `/tmp`; the job's user, group and supplementary groups, never
//! a capability, `no_new_privileges`; its own mount, PID and IPC namespaces and the host's
//! network and host name (distributed training needs the node's addresses); the task's
//! cgroup; only the device nodes it was given (its GPUs), created inside and allowed by the
//! device rules (the runtime adds the usual `/dev/null`, `/dev/zero`...); the mounts the
//! job asked for (checked against `allowed_mounts` by the daemon), `nosuid` and `nodev`.
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
        .env(env)
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
    let mut devices = Vec::new();
    let mut rules = vec![
        LinuxDeviceCgroupBuilder::default()
            .allow(false)
            .access("rwm")
            .build()?,
    ];
    for path in &req.devices {
        let (major, minor, mode) = char_device(path)?;
        devices.push(
            LinuxDeviceBuilder::default()
                .path(path.clone())
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

    #[test]
    fn a_task_gets_its_user_no_capabilities_its_namespaces_and_only_its_devices() {
        let req = ContainerRequest {
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
            cgroups_path: Some("/gantry/job-1-task-0".into()),
            runtime: "/usr/sbin/runc".into(),
            cache_dir: "/tmp/c".into(),
            insecure: false,
            auth_file: None,
            cache_max_mib: 0,
            name: "gantry-1-0".into(),
            bundle_dir: "/tmp/b".into(),
        };
        let image = PreparedImage {
            digest: "sha256:0".into(),
            rootfs: "/tmp/c/rootfs/0/rootfs".into(),
            env: vec![],
            cwd: "/work".into(),
        };
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
}
