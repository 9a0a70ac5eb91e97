//! One version of the contract everywhere: the Rust constant, the folder `wit/<version>/`
//! and its WIT `package` line, the changelog, the Python and JavaScript SDKs' constants, the
//! compatibility rule and the range the host's messages name. A version bump that misses one
//! of them fails here.

use gantry_contract::{CONTRACT_VERSION, compatible_versions, is_compatible};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[test]
fn the_current_version_has_its_wit_folder_and_package_line() {
    let worlds = read(&format!("wit/{CONTRACT_VERSION}/worlds.wit"));
    let package = format!("package gantry:policy@{CONTRACT_VERSION};");
    assert!(
        worlds.lines().any(|l| l.trim() == package),
        "wit/{CONTRACT_VERSION}/worlds.wit has no `{package}`"
    );
}

#[test]
fn every_released_folder_declares_its_own_version() {
    let mut folders = 0;
    for entry in std::fs::read_dir(repo().join("wit")).expect("wit/") {
        let entry = entry.expect("a wit/ entry");
        if !entry.path().is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let worlds = std::fs::read_to_string(entry.path().join("worlds.wit"))
            .unwrap_or_else(|e| panic!("wit/{name}/worlds.wit: {e}"));
        let package = format!("package gantry:policy@{name};");
        assert!(
            worlds.lines().any(|l| l.trim() == package),
            "wit/{name}/ is not version {name}"
        );
        folders += 1;
    }
    assert!(folders >= 1, "no released contract folder in wit/");
}

#[test]
fn the_changelog_and_the_sdks_name_the_same_version() {
    let changelog = read("wit/CHANGELOG.md");
    assert!(
        changelog
            .lines()
            .any(|l| l.starts_with(&format!("## {CONTRACT_VERSION} "))),
        "wit/CHANGELOG.md has no `## {CONTRACT_VERSION}` entry"
    );
    let python = read("sdk/python/lib/gantry.py");
    assert!(
        python.contains(&format!("CONTRACT = \"{CONTRACT_VERSION}\"")),
        "sdk/python/lib/gantry.py"
    );
    let js = read("sdk/js/lib/gantry.js");
    assert!(
        js.contains(&format!("export const CONTRACT = \"{CONTRACT_VERSION}\";"))
            && js.contains(&format!("gantry:policy/host@{CONTRACT_VERSION}")),
        "sdk/js/lib/gantry.js"
    );
}

#[test]
fn compatibility_follows_the_version_and_messages_name_the_same_range() {
    assert!(is_compatible(CONTRACT_VERSION));
    let range = compatible_versions();
    let major_minor = range.strip_suffix(".x").expect("a range like 0.1.x");
    assert!(CONTRACT_VERSION.starts_with(&format!("{major_minor}.")));
    assert!(is_compatible(&format!("{major_minor}.99")));
    assert!(!is_compatible(major_minor), "a version without a patch");
    assert!(!is_compatible("99.0.0"));
}
