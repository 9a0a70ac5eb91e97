//! Where `gantry plugin new` and `build` find the SDKs and toolchains: a checkout above the
//! binary, else a package's `../share/gantry` beside it; a checkout's toolchains, else `PATH`.
//!
//! Owns these lookups' tests. Does not own the end-to-end builds (`host/gantry/tests/plugin_project.rs`).
#![allow(clippy::unwrap_used)]

use super::*;
use std::os::unix::fs::PermissionsExt;

/// Makes `dir` a home: the contract's `worlds.wit` and the Rust SDK's manifest.
fn make_home(dir: &Path) {
    std::fs::create_dir_all(dir.join("wit").join(CONTRACT)).unwrap();
    std::fs::write(dir.join("wit").join(CONTRACT).join("worlds.wit"), "").unwrap();
    std::fs::create_dir_all(dir.join("sdk/rust")).unwrap();
    std::fs::write(dir.join("sdk/rust/Cargo.toml"), "").unwrap();
}

fn executable(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_checkout_above_the_binary_is_its_home() {
    let root = tempfile::tempdir().unwrap();
    make_home(root.path());
    let exe = root.path().join("target/debug/gantry");
    assert_eq!(home_of_exe(&exe).unwrap(), root.path());
}

#[test]
fn an_installed_binary_finds_the_package_share_directory() {
    let root = tempfile::tempdir().unwrap();
    let share = root.path().join("usr/share/gantry");
    make_home(&share);
    let exe = root.path().join("usr/bin/gantry");
    executable(&exe);
    assert_eq!(
        home_of_exe(&exe).unwrap(),
        std::fs::canonicalize(&share).unwrap()
    );
    // Without it there is none.
    std::fs::remove_dir_all(&share).unwrap();
    assert_eq!(home_of_exe(&exe), None);
}

#[test]
fn a_new_rust_project_depends_on_the_sdk_of_its_home() {
    let root = tempfile::tempdir().unwrap();
    let share = root.path().join("usr/share/gantry");
    make_home(&share);
    let project = root.path().join("work/my-policy");
    new_in(&share, "my-policy", Lang::Rust, &project).unwrap();
    let cargo = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
    let sdk = share.join("sdk/rust");
    assert!(
        cargo.contains(&format!("gantry-sdk = {{ path = \"{}\" }}", sdk.display())),
        "{cargo}"
    );
    assert!(project.join(MANIFEST).is_file());
    manifest(&project).unwrap();
}

#[test]
fn toolchains_come_from_the_checkout_else_from_path() {
    let root = tempfile::tempdir().unwrap();
    let home = root.path().join("home");
    let bin = root.path().join("bin");
    let in_home = "target/toolchains/py/bin/componentize-py";
    let path = std::env::join_paths([root.path().join("empty"), bin.clone()]).unwrap();
    // Neither: a package says how to install it.
    std::fs::create_dir_all(&home).unwrap();
    let missing = toolchain(&home, in_home, "pip install it", Some(&path)).unwrap_err();
    assert!(
        missing
            .to_string()
            .contains("componentize-py is not on PATH")
            && missing.to_string().contains("pip install it"),
        "{missing}"
    );
    // A checkout names its setup script.
    executable(&home.join("scripts/plugin-toolchains"));
    let missing = toolchain(&home, in_home, "pip install it", Some(&path)).unwrap_err();
    assert!(
        missing
            .to_string()
            .contains("scripts/plugin-toolchains once"),
        "{missing}"
    );
    // A file that is not executable on PATH is not taken; an executable one is.
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("componentize-py"), "").unwrap();
    assert!(toolchain(&home, in_home, "", Some(&path)).is_err());
    executable(&bin.join("componentize-py"));
    assert_eq!(
        toolchain(&home, in_home, "", Some(&path)).unwrap(),
        bin.join("componentize-py")
    );
    // The checkout's own comes first.
    executable(&home.join(in_home));
    assert_eq!(
        toolchain(&home, in_home, "", Some(&path)).unwrap(),
        home.join(in_home)
    );
}
