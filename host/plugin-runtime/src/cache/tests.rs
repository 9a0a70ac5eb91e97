//! The compile cache loads only private files from a private directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

fn engine() -> Engine {
    Engine::default()
}

fn fifo() -> (&'static [u8], String) {
    let bytes = gantry_components::FIFO;
    (bytes, super::sha256_hex(bytes))
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Fills `dir` with the FIFO component's entry and returns its path.
fn cached(engine: &Engine, dir: &Path) -> PathBuf {
    let (bytes, sha) = fifo();
    let (_, origin) = compile_from(engine, Some(dir), &sha, bytes).unwrap();
    assert_eq!(origin, Origin::Compiled);
    let (_, origin) = compile_from(engine, Some(dir), &sha, bytes).unwrap();
    assert_eq!(origin, Origin::Cache, "a private entry is loaded");
    entry(dir, engine, &sha)
}

#[test]
fn a_new_cache_is_private() {
    let engine = engine();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a/compiled");
    let path = cached(&engine, &dir);
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&path), 0o600);
    let names: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(names.len(), 1, "no temporary file is left behind");
}

#[test]
fn an_other_writable_file_is_recompiled_and_replaced() {
    let engine = engine();
    let tmp = tempfile::tempdir().unwrap();
    let path = cached(&engine, tmp.path());
    chmod(&path, 0o666);
    let (bytes, sha) = fifo();
    let (_, origin) = compile_from(&engine, Some(tmp.path()), &sha, bytes).unwrap();
    assert_eq!(origin, Origin::Compiled, "a 0666 file must not be loaded");
    assert_eq!(mode(&path), 0o600, "it is replaced by a private file");
    let (_, origin) = compile_from(&engine, Some(tmp.path()), &sha, bytes).unwrap();
    assert_eq!(origin, Origin::Cache);
}

#[test]
fn a_symlink_is_not_followed() {
    let engine = engine();
    let tmp = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    // A perfectly good artifact, but reached through a symlink.
    let target = cached(&engine, elsewhere.path());
    let path = entry(tmp.path(), &engine, &fifo().1);
    std::os::unix::fs::symlink(&target, &path).unwrap();
    let (bytes, sha) = fifo();
    let (_, origin) = compile_from(&engine, Some(tmp.path()), &sha, bytes).unwrap();
    assert_eq!(origin, Origin::Compiled, "a symlink must not be followed");
    let meta = std::fs::symlink_metadata(&path).unwrap();
    assert!(
        meta.file_type().is_file(),
        "the symlink is replaced by a file"
    );
    assert_eq!(mode(&path), 0o600);
    assert!(target.is_file(), "the symlink's target is left alone");
}

#[test]
fn a_directory_in_place_of_a_file_is_not_loaded() {
    let engine = engine();
    let tmp = tempfile::tempdir().unwrap();
    let (bytes, sha) = fifo();
    std::fs::create_dir(entry(tmp.path(), &engine, &sha)).unwrap();
    let (_, origin) = compile_from(&engine, Some(tmp.path()), &sha, bytes).unwrap();
    assert_eq!(
        origin,
        Origin::Compiled,
        "compiled, though it cannot be stored"
    );
}

#[test]
fn an_other_writable_directory_is_not_used() {
    let engine = engine();
    let tmp = tempfile::tempdir().unwrap();
    let path = cached(&engine, tmp.path());
    chmod(tmp.path(), 0o777);
    let (bytes, sha) = fifo();
    let before = std::fs::metadata(&path).unwrap().modified().unwrap();
    let (_, origin) = compile_from(&engine, Some(tmp.path()), &sha, bytes).unwrap();
    assert_eq!(
        origin,
        Origin::InMemory,
        "nothing is loaded from a 0777 dir"
    );
    let after = std::fs::metadata(&path).unwrap().modified().unwrap();
    assert_eq!(before, after, "nor written into it");
    chmod(tmp.path(), 0o700);
}

#[test]
fn someone_elses_file_is_not_loaded() {
    // SAFETY: no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "only root can give a file away: this test needs root (CI runs it as root)"
    );
    let engine = engine();
    let tmp = tempfile::tempdir().unwrap();
    let path = cached(&engine, tmp.path());
    std::os::unix::fs::chown(&path, Some(4242), Some(4242)).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().uid(), 4242, "given away");
    let (bytes, sha) = fifo();
    let (_, origin) = compile_from(&engine, Some(tmp.path()), &sha, bytes).unwrap();
    assert_eq!(
        origin,
        Origin::Compiled,
        "another user's file must not be loaded"
    );
    assert_eq!(std::fs::metadata(&path).unwrap().uid(), 0, "it is replaced");
}
