//! Issue 43, findings 2, 3 and 4: whatever root does with a path a user gave, it does with
//! that user's rights. A hostile local user (`nobody`, the account anonymous jobs run as)
//! names, under `[containers] image_dirs` and `allowed_mounts`, files and directories of
//! others it cannot read itself, and a layout that only claims another image's digest:
//!
//! - a `docker-archive:` file root owns with mode 0600, one in another owner's 0700
//!   directory, and a link to the first are refused for it, naming the kernel's refusal, and
//!   nothing of them is imported (`local_import`, `user_open`);
//! - an `oci:` layout of its own whose `index.json` claims the manifest digest of an image
//!   already unpacked in the cache does not get that image (`layout_verify`);
//! - a `--mount` of a directory under `allowed_mounts` that lies in another owner's 0700
//!   directory is refused, and a link out of `allowed_mounts` too; the data never appears in
//!   its job (`user_mounts`);
//! - its own readable archive, layout and mounts still run.
//!
//! Real daemon, real runc, skopeo and umoci, as `tests/tests/containers.rs`. Needs root (CI
//! runs it as root): without it the tests fail, they never skip.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::Daemon;
use gantry_e2e::as_user::NOBODY;
use gantry_e2e::images::{build_image, publish, run};
use gantry_e2e::root::{CgroupParent, open_dir, require_root};
use serde_json::{Value, json};
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// An owner other than root and nobody (no account needed: only the files' owner).
const ALICE: u32 = 4343;

/// A daemon whose tasks run as their users (anonymous jobs as nobody), with images allowed
/// from `images` and mounts from `shared`.
fn daemon(parent: &CgroupParent, images: &Path, shared: &Path) -> Daemon {
    Daemon::start_with_config(
        1,
        &format!(
            "[execution]\nrun_as_user = true\ncgroups = \"auto\"\ncgroup_parent = \"{}\"\n\
             [containers]\nimage_dirs = [\"{}\"]\nallowed_mounts = [\"{}\"]\n",
            parent.0,
            images.display(),
            shared.display()
        ),
    )
}

fn image_job(image: &str, script: &str) -> Value {
    json!({"name": "user-paths", "image": image, "argv": ["sh", "-c", script],
           "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 100, "memory_mib": 64}]})
}

fn log_of(d: &Daemon, id: u64) -> String {
    d.get_text(&format!("/v1/jobs/{id}/logs")).1
}

/// Waits for job `id` to end; its final state and its log.
fn ended(d: &Daemon, id: u64) -> (String, String) {
    let state = d.wait_for(
        &format!("job {id} to end"),
        Duration::from_secs(120),
        || {
            let state = d.job(id)["state"].as_str().unwrap_or("").to_string();
            ["succeeded", "failed", "cancelled"]
                .contains(&state.as_str())
                .then_some(state)
        },
    );
    (state, log_of(d, id))
}

fn mode(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// Gives `path` and everything under it to `uid` (no link followed).
fn chown_tree(path: &Path, uid: u32) {
    run(Command::new("chown")
        .args(["-R", "-h", &format!("{uid}:{uid}")])
        .arg(path));
}

/// Adds a file `/etc/<name>` holding `text` to the image tagged `test` in `layout`.
fn add_marker(layout: &Path, scratch: &Path, name: &str, text: &str) {
    let file = scratch.join(name);
    fs::write(&file, text).unwrap();
    run(Command::new("umoci")
        .args(["insert", "--image", &format!("{}:test", layout.display())])
        .arg(&file)
        .arg(format!("/etc/{name}")));
    publish(layout);
}

/// A `docker save` archive of the image tagged `test` in `layout`, at `archive`.
fn save_archive(layout: &Path, archive: &Path) {
    run(Command::new("skopeo").args([
        "copy",
        "--quiet",
        &format!("oci:{}:test", layout.display()),
        &format!("docker-archive:{}:gantry/private:v1", archive.display()),
    ]));
}

/// The references the node's cache was asked by.
fn cached_references(d: &Daemon) -> String {
    let (status, cache) = d.get("/v1/images");
    assert_eq!(status, 200, "{cache}");
    cache.to_string()
}

#[test]
fn archives_root_or_another_user_may_read_and_nobody_may_not_are_refused_for_nobody() {
    require_root("runc, cgroups and switching users need root");
    let work = open_dir();
    let images = work.path().join("images");
    let shared = work.path().join("shared");
    fs::create_dir_all(&shared).unwrap();
    let layout = build_image(&images.join("base"));
    add_marker(
        &layout,
        work.path(),
        "private-marker",
        "root-private-image\n",
    );
    // Root's archive, 0600; Alice's, readable, in her 0700 directory; a link to root's.
    let secret = images.join("root-only.tar");
    save_archive(&layout, &secret);
    mode(&secret, 0o600);
    let alice = images.join("alice");
    fs::create_dir(&alice).unwrap();
    let alices = alice.join("private.tar");
    save_archive(&layout, &alices);
    mode(&alices, 0o644);
    chown_tree(&alice, ALICE);
    mode(&alice, 0o700);
    let link = images.join("nobody-link.tar");
    symlink(&secret, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(NOBODY), Some(NOBODY)).unwrap();
    // Nobody's own archive of the same image, in a directory of its own: runs.
    let own_dir = images.join("nobody");
    fs::create_dir(&own_dir).unwrap();
    let own = own_dir.join("mine.tar");
    save_archive(&layout, &own);
    chown_tree(&own_dir, NOBODY);
    mode(&own_dir, 0o700);

    let parent = CgroupParent::new("gantry-e2e-userpaths-a");
    let d = daemon(&parent, &images, &shared);
    for path in [&secret, &alices, &link] {
        let image = format!("docker-archive:{}", path.display());
        let id = d.submit(&image_job(&image, "cat /etc/private-marker"));
        let (state, log) = ended(&d, id);
        assert_eq!(state, "failed", "{image} ran for nobody: {log}");
        assert!(
            log.contains("Permission denied") && log.contains("uid 65534"),
            "{image}: the refusal is not named: {log}"
        );
        assert!(!log.contains("root-private-image"), "{image}: {log}");
        let cached = cached_references(&d);
        assert!(!cached.contains(&image), "{image} was imported: {cached}");
    }
    let image = format!("docker-archive:{}", own.display());
    let id = d.submit(&image_job(&image, "cat /etc/private-marker"));
    let (state, log) = ended(&d, id);
    assert_eq!(state, "succeeded", "nobody's own archive: {log}");
    assert!(log.contains("root-private-image"), "{log}");
}

#[test]
fn a_layout_that_only_claims_a_cached_digest_does_not_get_that_image() {
    require_root("runc, cgroups and switching users need root");
    let work = open_dir();
    let images = work.path().join("images");
    let shared = work.path().join("shared");
    fs::create_dir_all(&shared).unwrap();
    // The victim's image, unpacked in the cache by a job that could read it.
    let victim = build_image(&images.join("victim"));
    add_marker(
        &victim,
        work.path(),
        "victim-marker",
        "victims-private-data\n",
    );
    let parent = CgroupParent::new("gantry-e2e-userpaths-b");
    let d = daemon(&parent, &images, &shared);
    let victims = format!("oci:{}:test", victim.display());
    let id = d.submit(&image_job(&victims, "cat /etc/victim-marker"));
    let (state, log) = ended(&d, id);
    assert_eq!(state, "succeeded", "the victim's own job: {log}");
    let digest = log
        .lines()
        .find_map(|l| l.split(" is sha256:").nth(1))
        .map(|hex| format!("sha256:{}", hex.trim()))
        .expect("the log names the image's digest");
    // Then its layout is made private to another owner.
    chown_tree(&images.join("victim"), ALICE);
    mode(&images.join("victim"), 0o700);

    // Nobody's layout: its own image, its index.json claiming the victim's digest (and
    // the tag `claim`), its own manifest renamed to that digest.
    let mine_dir = images.join("nobody");
    let mine = build_image(&mine_dir);
    let index_path = mine.join("index.json");
    let mut index: Value = serde_json::from_slice(&fs::read(&index_path).unwrap()).unwrap();
    let own = index["manifests"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    index["manifests"][0]["digest"] = json!(digest);
    index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"] = json!("claim");
    fs::write(&index_path, index.to_string()).unwrap();
    let blobs = mine.join("blobs/sha256");
    fs::rename(
        blobs.join(own.trim_start_matches("sha256:")),
        blobs.join(digest.trim_start_matches("sha256:")),
    )
    .unwrap();
    chown_tree(&mine_dir, NOBODY);
    let claim = format!("oci:{}:claim", mine.display());
    let id = d.submit(&image_job(
        &claim,
        "cat /etc/victim-marker; cat /etc/gantry-image",
    ));
    let (state, log) = ended(&d, id);
    assert!(
        !log.contains("victims-private-data"),
        "a claimed digest got the victim's image: {log}"
    );
    assert_eq!(state, "failed", "{log}");
    assert!(
        log.contains("does not match") || log.contains("hashes to"),
        "the refusal is not named: {log}"
    );
    // The victim's layout, now Alice's, is refused for nobody too.
    let id = d.submit(&image_job(&victims, "cat /etc/victim-marker"));
    let (state, log) = ended(&d, id);
    assert_eq!(state, "failed", "{log}");
    assert!(!log.contains("victims-private-data"), "{log}");
    assert!(log.contains("Permission denied"), "{log}");
}

#[test]
fn a_mount_nobody_cannot_reach_itself_is_refused_and_its_data_never_appears() {
    require_root("runc, cgroups and switching users need root");
    let work = open_dir();
    let images = work.path().join("images");
    let shared = work.path().join("shared");
    let layout = build_image(&images);
    let open = shared.join("open");
    fs::create_dir_all(&open).unwrap();
    fs::write(open.join("data.txt"), "shared-data\n").unwrap();
    // Alice's project, readable itself, under her 0700 home inside allowed_mounts.
    let home = shared.join("alice");
    let project = home.join("project");
    fs::create_dir_all(&project).unwrap();
    fs::write(project.join("secret.txt"), "alices-project-secret\n").unwrap();
    mode(&project.join("secret.txt"), 0o644);
    mode(&project, 0o755);
    chown_tree(&home, ALICE);
    mode(&home, 0o700);
    // A link of nobody's under allowed_mounts to a directory outside it.
    let outside = work.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("o.txt"), "outside-data\n").unwrap();
    symlink(&outside, open.join("out")).unwrap();

    let parent = CgroupParent::new("gantry-e2e-userpaths-c");
    let d = daemon(&parent, &images, &shared);
    let image = format!("oci:{}:test", layout.display());
    let with_mount = |source: &Path| {
        let mut spec = image_job(&image, "cat /m/*.txt");
        spec["mounts"] =
            json!([{"source": source.to_str().unwrap(), "destination": "/m", "read_only": true}]);
        spec
    };
    let id = d.submit(&with_mount(&project));
    let (state, log) = ended(&d, id);
    assert!(
        !log.contains("alices-project-secret"),
        "another user's private project was mounted: {log}"
    );
    assert_eq!(state, "failed", "{log}");
    assert!(
        log.contains("mounts[0].source") && log.contains("Permission denied"),
        "the refusal is not named: {log}"
    );
    let id = d.submit(&with_mount(&open.join("out")));
    let (state, log) = ended(&d, id);
    assert!(!log.contains("outside-data"), "{log}");
    assert_eq!(state, "failed", "{log}");
    assert!(log.contains("allowed_mounts"), "{log}");
    // What nobody may reach is mounted, through the descriptor it opened.
    let id = d.submit(&with_mount(&open));
    let (state, log) = ended(&d, id);
    assert_eq!(state, "succeeded", "{log}");
    assert!(log.contains("shared-data"), "{log}");
}
