//! Issue 43, images (findings 1, 5, 6 and 7), end to end: a real daemon on 127.0.0.1 whose
//! tasks run as their users in cgroups of their own, real `docker-registry`s, `skopeo`,
//! `umoci` and `runc`, and a hostile user's images:
//!
//! - a tag spelt like the old lossy cache name of a digest reference never runs where the
//!   digest was named (one cache entry per reference, digests checked);
//! - a slow pull of one image holds no launch of another image of another 127.0.0.1
//!   registry, and is stopped at `pull_timeout_s` with the reason;
//! - a tiny image whose layer expands past `max_unpacked_mib` is refused with the reason
//!   and leaves nothing in the cache, and an image past the user's share of the cache is
//!   refused too;
//! - file capabilities and `trusted.*` attributes of a layer never reach the cache.
//!
//! Needs root (runc, cgroups) and runc, umoci, skopeo, busybox-static, docker-registry and
//! GNU tar: without them the tests fail, they never skip.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::Daemon;
use gantry_e2e::images::{Registry, SlowProxy, build_image, run};
use gantry_e2e::root::{CgroupParent, require_root};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A daemon whose tasks run as their users in their own cgroups, reaching `registries` over
/// plain HTTP, with `extra` more `[containers]` keys.
fn daemon(parent: &CgroupParent, registries: &[&str], extra: &str) -> Daemon {
    let list: Vec<String> = registries.iter().map(|r| format!("\"{r}\"")).collect();
    Daemon::start_with_config(
        1,
        &format!(
            "[execution]\nrun_as_user = true\ncgroups = \"auto\"\ncgroup_parent = \"{}\"\n\
             [containers]\ninsecure_registries = [{}]\n{extra}\n",
            parent.0,
            list.join(", ")
        ),
    )
}

/// The daemon's image cache (`<data_dir>/images`).
fn cache_of(d: &Daemon) -> PathBuf {
    d.out_dir().parent().unwrap().join("data/images")
}

fn image_job(image: &str, script: &str) -> Value {
    json!({"name": "in-image", "image": image, "argv": ["sh", "-c", script],
           "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 100, "memory_mib": 256}]})
}

fn log_of(d: &Daemon, id: u64) -> String {
    d.get_text(&format!("/v1/jobs/{id}/logs")).1
}

/// The test image at `dir/layout` with `/etc/owner` saying `marker`.
fn marked_image(dir: &Path, marker: &str) -> PathBuf {
    let layout = build_image(dir);
    let src = dir.join("marker");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("owner"), format!("{marker}\n")).unwrap();
    run(Command::new("umoci")
        .args(["insert", "--image", &format!("{}:test", layout.display())])
        .arg(src.join("owner"))
        .arg("/etc/owner"));
    layout
}

/// Pushes the layout's `test` tag to `reference` (`host:port/name:tag`).
fn push(layout: &Path, reference: &str) {
    run(Command::new("skopeo").args([
        "copy",
        "--quiet",
        "--dest-tls-verify=false",
        &format!("oci:{}:test", layout.display()),
        &format!("docker://{reference}"),
    ]));
}

/// The manifest digest `reference` names in its registry.
fn digest_of(reference: &str) -> String {
    let out = run(Command::new("skopeo").args([
        "inspect",
        "--tls-verify=false",
        "--format",
        "{{.Digest}}",
        &format!("docker://{reference}"),
    ]));
    let digest = out.trim().to_string();
    assert!(digest.starts_with("sha256:") && digest.len() == 71, "{out}");
    digest
}

/// Waits for job `id` to end in `state` (its log in the failure otherwise); its log.
fn ended(d: &Daemon, id: u64, state: &str) -> String {
    let job = d.wait_for("the job to end", Duration::from_secs(240), || {
        let job = d.job(id);
        matches!(
            job["state"].as_str(),
            Some("succeeded" | "failed" | "cancelled")
        )
        .then_some(job)
    });
    let log = log_of(d, id);
    assert_eq!(job["state"], state, "job {id}: {job}\nits log:\n{log}");
    log
}

/// Runs `image` to its end; its log.
fn run_image(d: &Daemon, image: &str, state: &str) -> String {
    let id = d.submit(&image_job(image, "cat /etc/owner"));
    ended(d, id, state)
}

#[test]
fn a_tag_spelt_like_a_digest_reference_never_runs_where_the_digest_was_named() {
    require_root("runc and cgroups need root");
    let work = gantry_e2e::root::open_dir();
    let registry = Registry::start();
    let victim = marked_image(&work.path().join("victim"), "VICTIM-IMAGE");
    let attacker = marked_image(&work.path().join("attacker"), "ATTACKER-IMAGE");
    push(&victim, &format!("{}/team/app:v1", registry.addr));
    let digest = digest_of(&format!("{}/team/app:v1", registry.addr));
    let hex = digest.trim_start_matches("sha256:");
    // The attacker's tag is the old cache name of the victim's digest reference
    // (`:` and `@` both became `_`).
    let by_digest = format!("{}/team/app@{digest}", registry.addr);
    let lookalike = format!("{}/team/app:sha256_{hex}", registry.addr);
    push(&attacker, &lookalike);
    let parent = CgroupParent::new("gantry-e2e-trust-img-names");
    let d = daemon(&parent, &[&registry.addr], "");

    // The attacker's tag first (it fills the entry the digest reference used to share),
    // then the victim's digest; then the other way round.
    for round in 0..2 {
        let log = run_image(&d, &lookalike, "succeeded");
        assert!(log.contains("ATTACKER-IMAGE"), "round {round}: {log}");
        let log = run_image(&d, &by_digest, "succeeded");
        assert!(
            log.contains("VICTIM-IMAGE") && !log.contains("ATTACKER-IMAGE"),
            "round {round}: the job that named {digest} ran another image: {log}"
        );
        assert!(log.contains(&format!("is {digest}")), "{log}");
    }
    // Two entries, each named by its whole reference.
    let layouts = cache_of(&d).join("layouts");
    let refs: Vec<String> = std::fs::read_dir(&layouts)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "ref"))
        .map(|e| {
            std::fs::read_to_string(e.path())
                .unwrap()
                .trim()
                .to_string()
        })
        .collect();
    assert!(
        refs.contains(&by_digest) && refs.contains(&lookalike),
        "{refs:?}"
    );
}

#[test]
fn a_slow_pull_holds_no_other_registrys_launch_and_stops_at_its_deadline() {
    require_root("runc and cgroups need root");
    let work = gantry_e2e::root::open_dir();
    let slow_registry = Registry::start();
    let fast_registry = Registry::start();
    // 8 MiB of noise at 64 KiB/s: about two minutes, past the deadline of 45 s.
    let slow = SlowProxy::start(&slow_registry.addr, 64 << 10);
    let big = marked_image(&work.path().join("big"), "BIG-IMAGE");
    let noise = work.path().join("noise.bin");
    run(Command::new("head")
        .args(["-c", "8388608", "/dev/urandom"])
        .stdout(std::fs::File::create(&noise).unwrap()));
    run(Command::new("umoci")
        .args(["insert", "--image", &format!("{}:test", big.display())])
        .arg(&noise)
        .arg("/noise.bin"));
    push(&big, &format!("{}/team/big:v1", slow_registry.addr));
    let small = marked_image(&work.path().join("small"), "SMALL-IMAGE");
    push(&small, &format!("{}/team/small:v1", fast_registry.addr));
    let parent = CgroupParent::new("gantry-e2e-trust-img-lock");
    let d = daemon(
        &parent,
        &[&slow.addr, &fast_registry.addr],
        "pull_timeout_s = 45",
    );

    let slow_id = d.submit(&image_job(
        &format!("{}/team/big:v1", slow.addr),
        "cat /etc/owner",
    ));
    d.wait_for("the slow pull to start", Duration::from_secs(60), || {
        let job = d.job(slow_id);
        let message = job["reason"]["message"].as_str().unwrap_or("");
        (job["state"] == "running" && message.starts_with("pulling image")).then_some(())
    });
    // The pull runs in the task's cgroups: what it uses is the job's.
    let in_task_cgroup = d.wait_for(
        "skopeo in the task's cgroup",
        Duration::from_secs(30),
        || {
            let copying = std::fs::read_dir("/proc").ok()?.flatten().find(|p| {
                std::fs::read(p.path().join("cmdline")).is_ok_and(|c| {
                    let c = String::from_utf8_lossy(&c);
                    c.contains("skopeo") && c.contains("copy") && c.contains(&slow.addr)
                })
            })?;
            std::fs::read_to_string(copying.path().join("cgroup")).ok()
        },
    );
    assert!(
        in_task_cgroup.contains(&format!("job-{slow_id}-task-0")),
        "the pull runs outside its task's cgroups: {in_task_cgroup}"
    );
    // Another image from another 127.0.0.1 port launches meanwhile (its entry has its own
    // lock: the two names once shared `127.0.0.lock`).
    let fast_id = d.submit(&image_job(
        &format!("{}/team/small:v1", fast_registry.addr),
        "cat /etc/owner",
    ));
    let log = ended(&d, fast_id, "succeeded");
    assert!(log.contains("SMALL-IMAGE"), "{log}");
    let still = d.job(slow_id);
    assert_eq!(
        still["state"], "running",
        "the fast launch waited for the slow pull to end: {still}"
    );
    // The slow pull is stopped at its deadline, and the task says why.
    let log = ended(&d, slow_id, "failed");
    assert!(log.contains("pull_timeout_s = 45"), "{log}");
    assert!(!log.contains("BIG-IMAGE"), "{log}");
    let left = std::fs::read_dir(cache_of(&d).join("layouts"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .count();
    assert_eq!(left, 1, "only the small image's entry stays");
}

#[test]
fn an_image_past_the_unpacked_bound_or_the_users_share_is_refused_and_leaves_nothing() {
    require_root("runc and cgroups need root");
    let work = gantry_e2e::root::open_dir();
    let registry = Registry::start();
    // A layer of 512 MiB of zeros: a few hundred KiB of gzip.
    let bomb = marked_image(&work.path().join("bomb"), "BOMB-IMAGE");
    let zeros = work.path().join("zeros");
    std::fs::File::create(&zeros)
        .unwrap()
        .set_len(512 << 20)
        .unwrap();
    run(Command::new("umoci")
        .args(["insert", "--image", &format!("{}:test", bomb.display())])
        .arg(&zeros)
        .arg("/zeros"));
    let bomb_ref = format!("{}/team/bomb:v1", registry.addr);
    push(&bomb, &bomb_ref);
    let blobs = bomb.join("blobs/sha256");
    let biggest = std::fs::read_dir(&blobs)
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().len())
        .max()
        .unwrap();
    assert!(biggest < 4 << 20, "the bomb's blobs are small: {biggest}");
    let plain = marked_image(&work.path().join("plain"), "PLAIN-IMAGE");
    let plain_ref = format!("{}/team/plain:v1", registry.addr);
    push(&plain, &plain_ref);
    let parent = CgroupParent::new("gantry-e2e-trust-img-bound");
    let d = daemon(
        &parent,
        &[&registry.addr],
        "max_unpacked_mib = 64\ncache_max_mib_per_user = 1",
    );

    let id = d.submit(&image_job(&bomb_ref, "cat /etc/owner"));
    let log = ended(&d, id, "failed");
    assert!(log.contains("max_unpacked_mib = 64"), "{log}");
    assert!(log.contains("refused"), "{log}");
    assert!(!log.contains("BOMB-IMAGE"), "{log}");
    let cache = cache_of(&d);
    let dirs = |sub: &str| -> Vec<String> {
        std::fs::read_dir(cache.join(sub))
            .map(|r| {
                r.flatten()
                    .filter(|e| e.path().is_dir())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(dirs("rootfs"), Vec::<String>::new(), "nothing unpacked");
    assert_eq!(dirs("layouts"), Vec::<String>::new(), "no layout kept");

    // The plain image (about 2 MiB unpacked) passes the bound but not the user's 1 MiB.
    let id = d.submit(&image_job(&plain_ref, "cat /etc/owner"));
    let log = ended(&d, id, "failed");
    assert!(log.contains("cache_max_mib_per_user = 1"), "{log}");
    assert_eq!(dirs("rootfs"), Vec::<String>::new(), "nothing unpacked");
}

/// The names of the extended attributes of `path` itself.
fn xattrs(path: &Path) -> Vec<String> {
    use std::os::unix::ffi::OsStrExt;
    let p = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    let mut buf = vec![0u8; 4096];
    // SAFETY: a NUL-terminated path and a writable buffer of its length.
    let n = unsafe { libc::llistxattr(p.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    assert!(n >= 0, "{}", std::io::Error::last_os_error());
    buf.truncate(n as usize);
    buf.split(|b| *b == 0)
        .filter(|n| !n.is_empty())
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect()
}

#[test]
fn file_capabilities_in_a_layer_never_reach_the_cache() {
    require_root("runc, cgroups and setting security.capability need root");
    let work = gantry_e2e::root::open_dir();
    let registry = Registry::start();
    let layout = marked_image(&work.path().join("caps"), "CAPS-IMAGE");
    // A layer (GNU tar, PAX xattr records) whose /bin/pinger has CAP_NET_RAW.
    let src = work.path().join("layer-src");
    std::fs::create_dir_all(src.join("bin")).unwrap();
    std::fs::copy("/bin/busybox", src.join("bin/pinger")).unwrap();
    run(Command::new("setcap")
        .arg("cap_net_raw+ep")
        .arg(src.join("bin/pinger")));
    assert!(xattrs(&src.join("bin/pinger")).contains(&"security.capability".to_string()));
    let tar = work.path().join("layer.tar");
    run(Command::new("tar")
        .args(["--xattrs", "--xattrs-include=*", "--format=pax", "-cf"])
        .arg(&tar)
        .arg("-C")
        .arg(&src)
        .arg("bin"));
    let bytes = std::fs::read(&tar).unwrap();
    let needle = b"SCHILY.xattr.security.capability";
    assert!(
        bytes.windows(needle.len()).any(|w| w == needle),
        "the layer carries the capability"
    );
    run(Command::new("umoci")
        .args([
            "raw",
            "add-layer",
            "--image",
            &format!("{}:test", layout.display()),
        ])
        .arg(&tar));
    let reference = format!("{}/team/caps:v1", registry.addr);
    push(&layout, &reference);
    let parent = CgroupParent::new("gantry-e2e-trust-img-caps");
    let d = daemon(&parent, &[&registry.addr], "");
    let log = run_image(&d, &reference, "succeeded");
    assert!(log.contains("CAPS-IMAGE"), "{log}");
    let roots: Vec<PathBuf> = std::fs::read_dir(cache_of(&d).join("rootfs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(roots.len(), 1, "{roots:?}");
    let pinger = roots[0].join("rootfs/bin/pinger");
    assert!(pinger.is_file(), "{}", pinger.display());
    let left = xattrs(&pinger);
    assert!(
        !left
            .iter()
            .any(|n| n.starts_with("security.") || n.starts_with("trusted.")),
        "the cache's copy keeps {left:?}"
    );
}
