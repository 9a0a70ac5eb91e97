//! Tests of `bundle.rs`.

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
        allowed_mounts: Vec::new(),
        cache_max_mib: 0,
        cache_max_mib_per_user: 0,
        pull_timeout_s: 0,
        max_pull_mib: 0,
        max_unpacked_mib: 0,
        tool_cgroups: Vec::new(),
        name: "gantry-1-0".into(),
        terminal: false,
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
