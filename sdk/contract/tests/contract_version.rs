//! One version of the contract everywhere: the Rust constant, the folder `wit/<version>/`
//! and its WIT `package` line, the changelog, the Python and JavaScript SDKs' constants, the
//! compatibility rule and the range the host's messages name. A version bump that misses one
//! of them fails here.

use gantry_contract::{
    CONTRACT_VERSION, SERVED_VERSIONS, compatible_versions, is_compatible, served_as,
};
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
fn the_changelog_names_every_served_version_and_the_sdks_a_served_one() {
    let changelog = read("wit/CHANGELOG.md");
    for v in SERVED_VERSIONS {
        assert!(
            changelog
                .lines()
                .any(|l| l.starts_with(&format!("## {v} "))),
            "wit/CHANGELOG.md has no `## {v}` entry"
        );
        assert!(
            repo().join(format!("wit/{v}/worlds.wit")).exists(),
            "wit/{v}/"
        );
    }
    assert_eq!(SERVED_VERSIONS.last(), Some(&CONTRACT_VERSION));
    let served = |text: &str, pattern: &dyn Fn(&str) -> String| {
        SERVED_VERSIONS.iter().any(|v| text.contains(&pattern(v)))
    };
    let python = read("sdk/python/lib/gantry.py");
    assert!(
        served(&python, &|v| format!("CONTRACT = \"{v}\"")),
        "sdk/python/lib/gantry.py names no served version"
    );
    let js = read("sdk/js/lib/gantry.js");
    assert!(
        served(&js, &|v| format!("export const CONTRACT = \"{v}\";"))
            && served(&js, &|v| format!("gantry:policy/host@{v}")),
        "sdk/js/lib/gantry.js names no served version"
    );
    let rust = read("sdk/rust/src/lib.rs");
    assert!(
        rust.contains(&format!("SDK_CONTRACT: &str = \"{CONTRACT_VERSION}\"")),
        "sdk/rust exports the newest version by default"
    );
}

#[test]
fn compatibility_follows_the_served_versions_and_messages_name_them() {
    for v in SERVED_VERSIONS {
        assert!(is_compatible(v));
        assert_eq!(served_as(v), Some(*v));
        let major_minor = v.rsplit_once('.').map(|(m, _)| m).unwrap();
        assert!(compatible_versions().contains(&format!("{major_minor}.x")));
        assert_eq!(served_as(&format!("{major_minor}.99")), Some(*v));
        assert!(!is_compatible(major_minor), "a version without a patch");
    }
    assert!(!is_compatible("99.0.0"));
    assert!(!is_compatible("0.9.0"));
}
