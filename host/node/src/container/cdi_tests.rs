//! Tests of `cdi.rs`.

#![allow(clippy::unwrap_used)]
use super::*;

/// As nvidia-ctk writes it, with two GPUs, plus a node of GPU 1 in the common edits
/// that must not reach a task given GPU 0.
const SPEC: &str = r#"
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes: [{path: /dev/nvidia0}]
- name: "1"
  containerEdits:
    deviceNodes: [{path: /dev/nvidia1}]
- name: all
  containerEdits:
    deviceNodes: [{path: /dev/nvidia0}, {path: /dev/nvidia1}]
containerEdits:
  env: [NVIDIA_VISIBLE_DEVICES=void]
  deviceNodes: [{path: /dev/nvidiactl}, {path: /dev/nvidia1}, {path: /dev/sda, type: b}]
  hooks:
  - {hookName: createContainer, path: /usr/bin/nvidia-ctk, args: [nvidia-ctk, hook, update-ldcache]}
  mounts:
  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
    options: [ro, nosuid, nodev, bind]
  - {hostPath: /run, containerPath: /run, type: tmpfs}
"#;

fn nodes(s: &Selection) -> Vec<(&str, &str)> {
    fn text(p: &Path) -> &str {
        p.to_str().unwrap_or("")
    }
    s.device_nodes
        .iter()
        .map(|(h, p)| (text(h), text(p)))
        .collect()
}

#[test]
fn a_task_given_gpu_0_gets_its_node_the_common_edits_and_never_gpu_1s_node() {
    let spec = parse(Path::new("/etc/cdi/nvidia.yaml"), SPEC).unwrap();
    let sel = select(&[spec], &[0]).unwrap();
    assert_eq!(
        nodes(&sel),
        [
            ("/dev/nvidiactl", "/dev/nvidiactl"),
            ("/dev/nvidia0", "/dev/nvidia0")
        ]
    );
    assert!(sel.others.contains(Path::new("/dev/nvidia1")));
    assert_eq!(sel.env, ["NVIDIA_VISIBLE_DEVICES=void"]);
    assert_eq!(sel.mounts.len(), 1, "the tmpfs is left out: {sel:?}");
    assert_eq!(sel.mounts[0].options, ["ro", "nosuid", "nodev", "bind"]);
    let ignored = sel.ignored.join("; ");
    assert!(
        ignored.contains("1 hooks of /etc/cdi/nvidia.yaml"),
        "{ignored}"
    );
    assert!(ignored.contains("node /dev/sda of type b"), "{ignored}");
    assert!(ignored.contains("mount /run of type tmpfs"), "{ignored}");
    assert!(sel.unnamed.is_empty());
    // Both GPUs: both nodes; a GPU no spec names by index: none (the fallback).
    let spec = parse(Path::new("/etc/cdi/nvidia.yaml"), SPEC).unwrap();
    let both = select(std::slice::from_ref(&spec), &[1, 0]).unwrap();
    assert_eq!(both.device_nodes.len(), 3, "{both:?}");
    assert!(select(std::slice::from_ref(&spec), &[2]).is_none());
    assert_eq!(select(&[spec], &[0, 2]).unwrap().unnamed, [2]);
}

#[test]
fn specs_are_read_from_every_directory_the_later_winning_and_bad_files_skipped() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let json = |host: &str| {
        format!(
            r#"{{"cdiVersion": "0.6.0", "kind": "nvidia.com/gpu", "devices": [{{"name": "0",
            "containerEdits": {{"deviceNodes": [{{"path": "/dev/nvidia0", "hostPath": "{host}"}}]}}}}]}}"#
        )
    };
    std::fs::write(a.path().join("gpu.json"), json("/a/nvidia0")).unwrap();
    std::fs::write(a.path().join("broken.yaml"), "kind: [").unwrap();
    std::fs::write(
        a.path().join("net.yaml"),
        "cdiVersion: 0.6.0\nkind: x.com/net\n",
    )
    .unwrap();
    std::fs::write(a.path().join("notes.txt"), "not a spec").unwrap();
    std::fs::write(b.path().join("gpu.json"), json("/b/nvidia0")).unwrap();
    let dirs = [a.path().into(), "/nonexistent/cdi".into(), b.path().into()];
    let specs = load(&dirs, GPU_KIND);
    assert_eq!(specs.len(), 2);
    let sel = select(&specs, &[0]).unwrap();
    assert_eq!(nodes(&sel), [("/b/nvidia0", "/dev/nvidia0")]);
}

#[test]
fn a_bad_spec_is_an_error_naming_its_field() {
    let field = |text: &str| match parse(Path::new("/x.yaml"), text) {
        Err(CdiError::Invalid { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    let head = "cdiVersion: 0.6.0\nkind: nvidia.com/gpu\n";
    assert_eq!(field("cdiVersion: ''\nkind: a/b\n"), "cdiVersion");
    assert_eq!(field("cdiVersion: 0.6.0\nkind: gpu\n"), "kind");
    let relative =
        format!("{head}containerEdits:\n  mounts: [{{hostPath: lib, containerPath: /l}}]\n");
    assert_eq!(field(&relative), "containerEdits.mounts[0].hostPath");
    let env = format!("{head}devices: [{{name: '0', containerEdits: {{env: [NOEQUALS]}}}}]\n");
    assert_eq!(field(&env), "devices[0].containerEdits.env[0]");
    let dots = format!("{head}containerEdits:\n  deviceNodes: [{{path: /dev/../etc}}]\n");
    assert_eq!(field(&dots), "containerEdits.deviceNodes[0].path");
    assert!(matches!(
        parse(Path::new("/x.json"), "{\"kind\": 1}"),
        Err(CdiError::Parse { .. })
    ));
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        read(dir.path()),
        Err(CdiError::NotASpecFile { .. })
    ));
}

#[test]
fn cdi_dirs_must_be_clean_absolute_paths() {
    let mut c = super::super::ContainersConfig::default();
    assert!(c.check().is_ok());
    c.cdi_dirs = vec!["etc/cdi".into()];
    assert!(c.check().unwrap_err().contains("containers.cdi_dirs"));
}

#[test]
fn the_fallback_finds_the_drivers_libraries_in_ldconfig_output() {
    let out = "1234 libs found in cache `/etc/ld.so.cache'\n\
        \tlibnvidia-ml.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnvidia-ml.so.1\n\
        \tlibnvidia-ptxjitcompiler.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1\n\
        \tlibcudart.so.12 (libc6,x86-64) => /usr/local/cuda/lib64/libcudart.so.12\n\
        \tlibcudadebugger.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcudadebugger.so.1\n\
        \tlibcuda.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so.1\n\
        \tlibcuda.so.1 (libc6) => /lib/i386-linux-gnu/libcuda.so.1\n\
        \tlibcuda.so (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so\n\
        \tlibnvidia-evil.so.1 (libc6,x86-64) => ../relative/libnvidia-evil.so.1\n\
        \tlibc.so.6 (libc6,x86-64, OS ABI: Linux 3.2.0) => /lib/x86_64-linux-gnu/libc.so.6\n\
        Cache generated by: ldconfig (GNU libc) stable release version 2.36\n";
    let libs = driver_libraries(out);
    let names: Vec<&str> = libs.iter().map(|p| p.to_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
            "/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1",
            "/lib/x86_64-linux-gnu/libcudadebugger.so.1",
            "/lib/x86_64-linux-gnu/libcuda.so.1",
            "/lib/i386-linux-gnu/libcuda.so.1",
            "/lib/x86_64-linux-gnu/libcuda.so",
        ]
    );
    // Without the driver (this machine), nothing; never a panic.
    for m in driver_files() {
        assert!(m.source.is_file() && m.options == ["ro"], "{m:?}");
    }
}
