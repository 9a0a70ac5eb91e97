//! Jobs in container images (issue 29), end to end with the distribution's parts: a test
//! image built with `umoci` from busybox-static into an OCI layout, served by a real
//! `docker-registry` on 127.0.0.1 and pulled by `skopeo`, run by `runc` as the job's user in
//! its task cgroup.
//!
//! Needs root (runc, cgroups) and runc, umoci, skopeo, busybox-static and docker-registry
//! (`.ci/run` installs them): without them the tests fail, they never skip.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::Daemon;
use gantry_e2e::images::{Registry, SlowProxy, build_image, run};
use gantry_e2e::root::require_root;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// A daemon whose tasks run as their users in cgroups of their own, with images allowed
/// from `images` and mounts from `shared`, and `registry` reachable over plain HTTP.
fn daemon(parent: &str, images: &Path, shared: &Path, registry: &str) -> Daemon {
    Daemon::start_with_config(
        1,
        &format!(
            "[execution]\nrun_as_user = true\ncgroups = \"auto\"\ncgroup_parent = \"{parent}\"\n\
             [containers]\nimage_dirs = [\"{}\"]\nallowed_mounts = [\"{}\"]\ninsecure_registries = [\"{registry}\"]\n",
            images.display(),
            shared.display()
        ),
    )
}

/// One test's scene: a daemon over its own directory with the test image (`images/`,
/// `image` names it), an allowed `shared/`, and a cgroup parent of its own. Keep it whole
/// while the test runs; it drops the daemon, then its cgroups, then the directory.
struct Scene {
    d: Daemon,
    _parent: gantry_e2e::root::CgroupParent,
    image: String,
    work: tempfile::TempDir,
}

/// A [`Scene`]; `prepare` may change the image's layout before the daemon starts.
fn scene(cgroup_prefix: &str, prepare: impl FnOnce(&Path, &Path)) -> Scene {
    require_root("runc and cgroups need root");
    let work = gantry_e2e::root::open_dir();
    let images = work.path().join("images");
    let shared = work.path().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    let layout = build_image(&images);
    prepare(&layout, work.path());
    gantry_e2e::images::publish(&layout);
    let parent = gantry_e2e::root::CgroupParent::new(cgroup_prefix);
    let d = daemon(&parent.0, &images, &shared, "127.0.0.1:1");
    Scene {
        d,
        _parent: parent,
        image: format!("oci:{}:test", layout.display()),
        work,
    }
}

fn log_of(d: &Daemon, id: u64) -> String {
    d.get_text(&format!("/v1/jobs/{id}/logs")).1
}

fn image_job(image: &str, script: &str) -> Value {
    json!({"name": "in-image", "image": image, "argv": ["sh", "-c", script],
           "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 100, "memory_mib": 64}]})
}

#[test]
fn a_job_runs_in_its_image_as_its_user_in_its_cgroup_pulled_from_a_registry() {
    require_root("runc and cgroups need root");
    let work = gantry_e2e::root::open_dir();
    let images = work.path().join("images");
    let shared = work.path().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::write(shared.join("data.txt"), "from the host\n").unwrap();
    let layout = build_image(&images);
    let registry = Registry::start();
    let parent = gantry_e2e::root::CgroupParent::new("gantry-e2e-ctr");
    let d = daemon(&parent.0, &images, &shared, &registry.addr);
    let local = format!("oci:{}:test", layout.display());

    // The image's root, the job's user (the fallback account of an anonymous job), its
    // own task cgroup.
    let id = d.submit(&image_job(
        &local,
        "id -u; cat /etc/gantry-image; test -e /etc/debian_version && echo HOST-ROOT; cat /proc/self/cgroup",
    ));
    let job = d.wait_state(id, "succeeded");
    let log = log_of(&d, id);
    assert!(log.contains("65534\n"), "runs as nobody: {log}");
    assert!(log.contains("gantry-test-image"), "{log}");
    assert!(!log.contains("HOST-ROOT"), "sees the host's root: {log}");
    assert!(
        log.contains(&format!("job-{id}-task-0/ctr")),
        "not in its task's cgroup: {log}"
    );
    assert_eq!(job["exit_code"], 0, "{job}");

    // Its exit code.
    let id = d.submit(&image_job(&local, "exit 7"));
    let job = d.wait_state(id, "failed");
    assert_eq!(job["exit_code"], 7, "{job}");
    // A command's own 125 is its exit code, not a failed pull.
    let id = d.submit(&image_job(&local, "exit 125"));
    let job = d.wait_state(id, "failed");
    assert_eq!(job["exit_code"], 125, "{job}");
    assert_eq!(job["end_reason"], "exit-code", "{job}");

    // A mount the admin allows, read-only; one outside `allowed_mounts` is refused, naming
    // the field; so is a layout outside `image_dirs`.
    let mut spec = image_job(
        &local,
        "cat /data/data.txt; touch /data/new 2>/dev/null && echo WROTE; echo done",
    );
    spec["mounts"] =
        json!([{"source": shared.to_str().unwrap(), "destination": "/data", "read_only": true}]);
    let id = d.submit(&spec);
    d.wait_state(id, "succeeded");
    let log = log_of(&d, id);
    assert!(log.contains("from the host"), "{log}");
    assert!(!log.contains("WROTE"), "wrote to a read-only mount: {log}");
    spec["mounts"] = json!([{"source": "/etc", "destination": "/etc2"}]);
    let (status, body) = d.post("/v1/jobs", &spec);
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "mounts[0].source", "{body}");
    let (status, body) = d.post("/v1/jobs", &image_job("oci:/usr/share:x", "true"));
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "image", "{body}");

    // Cancel reaches the container, and nothing of it is left.
    let id = d.submit(&image_job(&local, "echo started; sleep 300"));
    d.wait_for("the container to start", Duration::from_secs(60), || {
        log_of(&d, id).contains("started").then_some(())
    });
    let (status, body) = d.post(&format!("/v1/jobs/{id}/cancel"), &json!({}));
    assert_eq!(status, 200, "{body}");
    d.wait_state(id, "cancelled");
    let left = Command::new("pgrep")
        .args(["-f", "sleep 300"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&left.stdout).trim().is_empty(),
        "processes left: {}",
        String::from_utf8_lossy(&left.stdout)
    );

    // From the registry, by tag and by digest; a missing image fails the job with the
    // registry's answer in its log.
    let pushed = format!("{}/gantry-test:v1", registry.addr);
    run(Command::new("skopeo").args([
        "copy",
        "--quiet",
        "--dest-tls-verify=false",
        &format!("oci:{}:test", layout.display()),
        &format!("docker://{pushed}"),
    ]));
    let id = d.submit(&image_job(&pushed, "cat /etc/gantry-image"));
    d.wait_state(id, "succeeded");
    let log = log_of(&d, id);
    assert!(log.contains("gantry-test-image"), "{log}");
    let digest = log
        .lines()
        .find_map(|l| l.split(" is ").nth(1))
        .expect("the log names the image's digest")
        .trim()
        .to_string();
    let by_digest = format!("{}/gantry-test@{digest}", registry.addr);
    let id = d.submit(&image_job(&by_digest, "cat /etc/gantry-image"));
    d.wait_state(id, "succeeded");
    // `gantry images`: one unpacked image for the three names it was asked by.
    let (status, cache) = d.get("/v1/images");
    assert_eq!(status, 200, "{cache}");
    let cached = cache["images"].as_array().unwrap();
    assert_eq!(cached.len(), 1, "one digest, unpacked once: {cache}");
    assert_eq!(cached[0]["digest"], digest.as_str(), "{cache}");
    let refs = cached[0]["references"].as_array().unwrap();
    for name in [&local, &pushed, &by_digest] {
        assert!(refs.contains(&json!(name)), "{name} not in {cache}");
    }
    assert_eq!(cached[0]["in_use"], false, "{cache}");
    let id = d.submit(&image_job(
        &format!("{}/no-such-image:v1", registry.addr),
        "true",
    ));
    let job = d.wait_state(id, "failed");
    assert_eq!(job["exit_code"], 125, "{job}");
    assert_eq!(job["end_reason"], "image-pull-failed", "{job}");
    assert_eq!(job["tasks"][0]["exit"], "ImageFailed", "{job}");
    assert!(log_of(&d, id).contains("pulling"), "{}", log_of(&d, id));
    drop(d);
    a_container_job_outlives_a_daemon_restart(&parent.0, &images, &shared, &local);
}

/// The daemon is SIGKILLed while a container job runs; the restarted daemon adopts it and
/// records its end.
fn a_container_job_outlives_a_daemon_restart(
    parent: &str,
    images: &Path,
    shared: &Path,
    local: &str,
) {
    let mut d = daemon(parent, images, shared, "127.0.0.1:1");
    let mut spec = image_job(
        local,
        "echo started; while [ ! -e /data/release ]; do sleep 0.1; done; echo released",
    );
    spec["mounts"] =
        json!([{"source": shared.to_str().unwrap(), "destination": "/data", "read_only": true}]);
    let id = d.submit(&spec);
    d.wait_for("the container to start", Duration::from_secs(60), || {
        log_of(&d, id).contains("started").then_some(())
    });
    d.restart_after_sigkill();
    std::fs::write(shared.join("release"), "").unwrap();
    d.wait_state(id, "succeeded");
    assert!(log_of(&d, id).contains("released"), "{}", log_of(&d, id));
}

/// A layer that tries every escape a tar can: `../` and absolute names, a write through a
/// symbolic link pointing at a host directory, a block device node for the host's disk, a
/// setuid file. Written with Python's `tarfile`, added with `umoci raw add-layer`.
fn add_hostile_layer(layout: &Path, dir: &Path, host_target: &Path) {
    let tar = dir.join("evil.tar");
    let script = format!(
        r##"
import io, tarfile
t = tarfile.open({tar:?}, "w")
def add(name, data=b"x", mode=0o644, kind=tarfile.REGTYPE, link="", major=0, minor=0):
    ti = tarfile.TarInfo(name); ti.mode = mode; ti.type = kind; ti.linkname = link
    ti.devmajor = major; ti.devminor = minor
    if kind == tarfile.REGTYPE:
        ti.size = len(data); t.addfile(ti, io.BytesIO(data))
    else:
        t.addfile(ti)
add("../../../../escaped-dotdot", b"dotdot")
add("/escaped-absolute", b"abs")
add("evil-link", kind=tarfile.SYMTYPE, link={target:?})
add("evil-link/through-link", b"through")
add("dev-sda", kind=tarfile.BLKTYPE, mode=0o666, major=8, minor=0)
add("suid-sh", b"#!/bin/sh\n", mode=0o4755)
t.close()
"##,
        tar = tar.to_str().unwrap(),
        target = host_target.to_str().unwrap(),
    );
    run(Command::new("python3").arg("-c").arg(script));
    run(Command::new("umoci")
        .args(["raw", "add-layer", "--image"])
        .arg(format!("{}:test", layout.display()))
        .arg(&tar));
}

#[test]
fn a_hostile_layer_writes_nothing_outside_the_image_and_gives_no_device_nor_setuid() {
    let sc = scene("gantry-e2e-ctr-hostile", |layout, dir| {
        let host_target = dir.join("host-dir");
        std::fs::create_dir_all(&host_target).unwrap();
        add_hostile_layer(layout, dir, &host_target);
    });
    let (d, image, work) = (&sc.d, &sc.image, &sc.work);
    let host_target = work.path().join("host-dir");
    let id = d.submit(&image_job(
        image,
        "ls -l /; test -e /dev-sda && echo HAS-DEVICE; ls -l /suid-sh",
    ));
    d.wait_state(id, "succeeded");
    let log = log_of(d, id);
    assert!(
        !log.contains("HAS-DEVICE"),
        "a device node from a layer: {log}"
    );
    let suid = log
        .lines()
        .find(|l| l.ends_with("/suid-sh"))
        .unwrap_or_else(|| panic!("no suid-sh: {log}"));
    assert!(
        suid.starts_with("-rwxr-xr-x"),
        "the setuid bit survived: {suid}"
    );
    // Nothing was written outside the unpacked image: not through the link, not above it.
    assert_eq!(
        std::fs::read_dir(&host_target).unwrap().count(),
        0,
        "written through the layer's link"
    );
    let data_dir = d.out_dir().parent().unwrap().to_path_buf();
    for root in [work.path(), data_dir.as_path(), Path::new("/")] {
        for name in ["escaped-dotdot", "escaped-absolute"] {
            assert!(
                !root.join(name).exists(),
                "{} escaped the image",
                root.join(name).display()
            );
        }
    }
}

#[test]
fn archives_slow_pulls_and_a_gang_on_one_digest() {
    require_root("runc and cgroups need root");
    let work = gantry_e2e::root::open_dir();
    let images = work.path().join("images");
    let shared = work.path().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    let layout = build_image(&images);
    let registry = Registry::start();
    // A slow way to the same registry: 8 MiB of noise arrive in about 3 s.
    let slow = SlowProxy::start(&registry.addr, 3 << 20);
    let parent = gantry_e2e::root::CgroupParent::new("gantry-e2e-ctr-more");
    let d = Daemon::start_with_config(
        1,
        &format!(
            "[execution]\nrun_as_user = true\ncgroups = \"auto\"\ncgroup_parent = \"{}\"\n\
             [containers]\nimage_dirs = [\"{}\"]\ninsecure_registries = [\"{}\", \"{}\"]\n",
            parent.0,
            images.display(),
            registry.addr,
            slow.addr
        ),
    );

    // A `docker save` archive under image_dirs runs; one elsewhere is refused at submit.
    let archive = images.join("test.tar");
    run(Command::new("skopeo").args([
        "copy",
        "--quiet",
        &format!("oci:{}:test", layout.display()),
        &format!("docker-archive:{}:gantry/test:v1", archive.display()),
    ]));
    let id = d.submit(&image_job(
        &format!("docker-archive:{}", archive.display()),
        "cat /etc/gantry-image",
    ));
    d.wait_state(id, "succeeded");
    assert!(
        log_of(&d, id).contains("gantry-test-image"),
        "{}",
        log_of(&d, id)
    );
    let (status, body) = d.post(
        "/v1/jobs",
        &image_job("docker-archive:/var/tmp/elsewhere.tar", "true"),
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "image", "{body}");

    // While its node pulls, a started job says so, with the layers and the rate.
    let noise = work.path().join("noise");
    std::fs::create_dir_all(&noise).unwrap();
    run(Command::new("head")
        .args(["-c", "8388608", "/dev/urandom"])
        .stdout(std::fs::File::create(noise.join("noise.bin")).unwrap()));
    run(Command::new("umoci")
        .args(["insert", "--image", &format!("{}:test", layout.display())])
        .arg(noise.join("noise.bin"))
        .arg("/noise.bin"));
    run(Command::new("skopeo").args([
        "copy",
        "--quiet",
        "--dest-tls-verify=false",
        &format!("oci:{}:test", layout.display()),
        &format!("docker://{}/gantry-big:v1", registry.addr),
    ]));
    let id = d.submit(&image_job(
        &format!("{}/gantry-big:v1", slow.addr),
        "ls -l /noise.bin",
    ));
    let reason = d.wait_for("the pull's progress", Duration::from_secs(60), || {
        let job = d.job(id);
        let message = job["reason"]["message"].as_str().unwrap_or("").to_string();
        // The layers are known once the registry's manifest answered (asked beside the copy).
        (job["state"] == "running" && message.contains("of 2 layers")).then_some(message)
    });
    assert!(reason.starts_with("pulling image"), "{reason}");
    assert!(reason.contains("MiB/s"), "{reason}");
    d.wait_state(id, "succeeded");
    let after = d.job(id);
    assert!(
        !after["reason"]["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("pulling"),
        "{after}"
    );

    // Both ranks of a gang run the digest the tag named when it started.
    let tag = format!("{}/gantry-big:v1", registry.addr);
    let mut gang = image_job(&tag, "cat /etc/gantry-image");
    gang["tasks"][0]["count"] = json!(2);
    let id = d.submit(&gang);
    d.wait_state(id, "succeeded");
    let events = d.get(&format!("/v1/jobs/{id}/events")).1;
    let pinned = events
        .as_array()
        .and_then(|e| e.iter().find(|e| e["kind"] == "image-pinned"))
        .unwrap_or_else(|| panic!("no image-pinned event: {events}"));
    let message = pinned["message"].as_str().unwrap();
    let digest = message
        .rsplit('@')
        .next()
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    assert!(digest.starts_with("sha256:"), "{message}");
    for task in 0..2 {
        let log = d.get_text(&format!("/v1/jobs/{id}/logs?task={task}")).1;
        assert!(
            log.contains(&format!("gantry-big@{digest}")),
            "rank {task} did not run the pinned digest: {log}"
        );
    }
}

#[test]
fn an_interactive_job_in_an_image_has_a_controlling_terminal() {
    let sc = scene("gantry-e2e-ctr-tty", |_, _| {});
    let (d, image) = (&sc.d, &sc.image);
    let mut spec = image_job(
        image,
        "tty; stty size; (exec 3</dev/tty) && echo has-ctty; read line; stty size; echo \"got:$line\"",
    );
    spec["kind"] = json!("interactive");
    spec["tty"] = json!({"rows": 30, "cols": 90});
    let id = d.submit(&spec);
    d.wait_for("the shell in the image", Duration::from_secs(60), || {
        log_of(d, id).contains("has-ctty").then_some(())
    });
    d.send_input(id, &json!({"resize": {"rows": 50, "cols": 132}}));
    d.send_input(id, &json!({"data": "dHlwZWQK"}));
    d.wait_state(id, "succeeded");
    let log = log_of(d, id);
    assert!(log.contains("/dev/pts/"), "{log:?}");
    assert!(log.contains("30 90"), "{log:?}");
    assert!(log.contains("50 132\r\ngot:typed"), "{log:?}");
}

#[test]
fn arrays_and_services_run_in_an_image() {
    let sc = scene("gantry-e2e-ctr-kinds", |_, _| {});
    let (d, image) = (&sc.d, &sc.image);

    // Every member of an array runs in the image with its own index.
    let mut array = image_job(
        image,
        "cat /etc/gantry-image; echo index=$GANTRY_ARRAY_INDEX",
    );
    array["array"] = json!({"indices": [0, 1, 2]});
    let (status, body) = d.post("/v1/jobs", &array);
    assert_eq!(status, 201, "{body}");
    for (i, id) in body["array_job_ids"].as_array().unwrap().iter().enumerate() {
        let id = id.as_u64().unwrap();
        d.wait_state(id, "succeeded");
        let log = log_of(d, id);
        assert!(log.contains("gantry-test-image"), "{log}");
        assert!(log.contains(&format!("index={i}")), "{log}");
    }

    // A service in the image (busybox's httpd on the port Gantry gives it) is checked
    // healthy over HTTP on the host's network, and stops on cancel.
    let mut service = image_job(
        image,
        "echo '<p>up</p>' > /tmp/index.html; exec httpd -f -p \"$PORT\" -h /tmp",
    );
    service["kind"] = json!("service");
    service["service"] = json!({"health": {"http_path": "/index.html", "interval_s": 1, "failures": 3, "initial_delay_s": 1}});
    let id = d.submit(&service);
    let job = d.wait_for(
        "a healthy service in an image",
        Duration::from_secs(60),
        || {
            let j = d.job(id);
            (j["health"]["state"] == "healthy").then_some(j)
        },
    );
    let port = job["service_port"].as_u64().unwrap();
    let page = ureq::get(&format!("http://127.0.0.1:{port}/index.html"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    assert!(page.contains("up"), "{page}");
    let (status, body) = d.post(&format!("/v1/jobs/{id}/cancel"), &json!({}));
    assert_eq!(status, 200, "{body}");
    d.wait_state(id, "cancelled");
}

#[test]
fn the_controller_lists_an_agents_image_cache() {
    require_root("runc and cgroups need root");
    const TOKEN: &str = "e2e-cluster-token-0123456789abcdef";
    let work = gantry_e2e::root::open_dir();
    let images = work.path().join("images");
    let layout = build_image(&images);
    let containers = format!("[containers]\nimage_dirs = [\"{}\"]\n", images.display());
    let d = Daemon::start_with_config(
        0,
        &format!(
            "[cluster]\ntoken = \"{TOKEN}\"\nlocal_node = false\nheartbeat_interval_ms = 200\nnode_down_after_ms = 1500\n{containers}"
        ),
    );
    let parent = gantry_e2e::root::CgroupParent::new("gantry-e2e-ctr-agent");
    let _agent = gantry_e2e::agents::Agent::start_with(
        &d,
        d.url(),
        "node-a",
        1,
        TOKEN,
        &format!(
            "[execution]\nrun_as_user = true\ncgroups = \"auto\"\ncgroup_parent = \"{}\"\n{containers}",
            parent.0
        ),
    );
    let image = format!("oci:{}:test", layout.display());
    let id = d.submit(&image_job(&image, "cat /etc/gantry-image"));
    let job = d.wait_state(id, "succeeded");
    assert_eq!(job["tasks"][0]["node"], "node-a", "{job}");
    let (status, listed) = d.get("/v1/images");
    assert_eq!(status, 200, "{listed}");
    let agent = &listed["agents"][0];
    assert_eq!(agent["node"], "node-a", "{listed}");
    assert_eq!(agent["enabled"], true, "{listed}");
    let refs = &agent["images"][0]["references"];
    assert!(refs.as_array().unwrap().contains(&json!(image)), "{listed}");
    // The controller's own cache (no local node) stays empty.
    assert_eq!(listed["images"], json!([]), "{listed}");
}
