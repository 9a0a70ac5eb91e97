//! `gantry plugin new --lang rust|python|js NAME` then `gantry plugin build`: each makes a
//! working project whose component passes `gantry plugin test` with its own scenario, with
//! the toolchains `scripts/test` installs (`scripts/plugin-toolchains`; run it first when
//! calling `cargo test` alone: the Python and JavaScript cases fail without them). A
//! broken project and a bad name fail with a message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Mutex;

/// One build at a time: a Rust build beside a conformance run would slow the latter's
/// timed checks (the 5,000-job call's deadline) on a small machine.
static ONE_BUILD: Mutex<()> = Mutex::new(());

fn gantry(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gantry"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn new_and_build(lang: &str, contract: &str) {
    let _one = ONE_BUILD.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let name = format!("my-{lang}-policy");
    let made = gantry(dir.path(), &["plugin", "new", "--lang", lang, &name]);
    assert!(made.status.success(), "{}", text(&made));
    let project = dir.path().join(&name);
    assert!(project.join("gantry-plugin.toml").is_file());
    assert!(project.join("scenarios/1-smallest-first.json").is_file());
    let built = gantry(&project, &["plugin", "build"]);
    let out = text(&built);
    assert!(built.status.success(), "{out}");
    assert!(project.join(format!("{name}.wasm")).is_file(), "{out}");
    assert!(
        out.contains("PASS  scenario smallest GPU request first"),
        "{out}"
    );
    assert!(out.contains(" 0 failed"), "{out}");
    assert!(out.contains(&format!("(contract {contract})")), "{out}");
    if contract != "0.1.0" {
        // The runner checks the SDK's view after a delta and after a full resend.
        assert!(
            out.contains("after a delta (incremental): the same as a fresh"),
            "{out}"
        );
    }
    // Made once: a second `new` into the same place is refused.
    let again = gantry(dir.path(), &["plugin", "new", "--lang", lang, &name]);
    assert!(!again.status.success());
    assert!(text(&again).contains("already exists"), "{}", text(&again));
}

#[test]
fn a_new_python_project_builds_and_passes_its_tests() {
    new_and_build("python", "0.2.0");
}

#[test]
fn a_new_javascript_project_builds_and_passes_its_tests() {
    new_and_build("js", "0.2.0");
}

#[test]
fn a_new_rust_project_builds_and_passes_its_tests() {
    new_and_build("rust", "0.3.0");
}

#[test]
fn bad_names_and_broken_projects_fail_with_a_message() {
    let _one = ONE_BUILD.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let bad = gantry(dir.path(), &["plugin", "new", "--lang", "js", "Bad Name"]);
    assert!(!bad.status.success());
    assert!(text(&bad).contains("a-z, 0-9 and -"), "{}", text(&bad));
    let none = gantry(dir.path(), &["plugin", "build"]);
    assert!(!none.status.success());
    assert!(
        text(&none).contains("gantry-plugin.toml"),
        "{}",
        text(&none)
    );
    let made = gantry(dir.path(), &["plugin", "new", "--lang", "js", "broken"]);
    assert!(made.status.success(), "{}", text(&made));
    let policy = dir.path().join("broken/policy.js");
    let mut source = std::fs::read_to_string(&policy).unwrap();
    source.push_str("\nexport const oops = ;\n");
    std::fs::write(&policy, source).unwrap();
    let broken = gantry(&dir.path().join("broken"), &["plugin", "build"]);
    assert!(!broken.status.success());
    assert!(
        text(&broken).contains("componentize-qjs failed"),
        "{}",
        text(&broken)
    );
}
