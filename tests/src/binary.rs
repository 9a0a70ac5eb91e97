//! Finding the `gantry` binary, and building it with `cargo build -p gantry` when it is missing
//! or older than the workspace sources; the same for the fake NVML library
//! (`cargo build -p gantry-fake-nvml`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::SystemTime;

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// `<target>/<profile>`: from `CARGO_TARGET_DIR` when set, else from where this test
/// executable lives (`<target>/<profile>/deps/`), else `<workspace>/target/debug`.
fn profile_dir() -> PathBuf {
    let from_exe = std::env::current_exe().ok().and_then(|exe| {
        let deps = exe.parent()?;
        (deps.file_name()? == "deps").then(|| deps.parent().map(Path::to_path_buf))?
    });
    let profile = from_exe
        .as_deref()
        .and_then(Path::file_name)
        .map_or_else(|| "debug".into(), |p| p.to_os_string());
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(t) => workspace().join(t).join(profile),
        None => from_exe.unwrap_or_else(|| workspace().join("target").join(profile)),
    }
}

/// Newest modification time of the files under `path`, skipping `target` and hidden dirs.
fn newest_mtime(path: &Path) -> SystemTime {
    let Ok(meta) = fs::metadata(path) else {
        return SystemTime::UNIX_EPOCH;
    };
    if !meta.is_dir() {
        return meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    }
    fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            name != "target" && !name.to_string_lossy().starts_with('.')
        })
        .map(|e| newest_mtime(&e.path()))
        .max()
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// Whether `bin` is missing or older than the sources it is built from.
fn is_stale(bin: &Path) -> bool {
    let Ok(built) = fs::metadata(bin).and_then(|m| m.modified()) else {
        return true;
    };
    let ws = workspace();
    ["host", "sdk", "plugins", "wit", "Cargo.toml", "Cargo.lock"]
        .iter()
        .map(|p| newest_mtime(&ws.join(p)))
        .any(|t| t > built)
}

/// The `gantry` binary, built first if needed (once per test binary).
pub fn gantry_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("GANTRY_E2E_BIN") {
            return PathBuf::from(bin);
        }
        let dir = profile_dir();
        let bin = dir.join("gantry");
        if std::env::var_os("GANTRY_E2E_NO_BUILD").is_none() && is_stale(&bin) {
            let profile = match dir.file_name().and_then(|p| p.to_str()) {
                Some("debug") | None => "dev".to_string(),
                Some(p) => p.to_string(),
            };
            let target = dir.parent().expect("the profile dir has a parent");
            eprintln!(
                "gantry-e2e: building {} (cargo build -p gantry)",
                bin.display()
            );
            let status = Command::new(env!("CARGO"))
                .args([
                    "build",
                    "-p",
                    "gantry",
                    "--profile",
                    &profile,
                    "--target-dir",
                ])
                .arg(target)
                .current_dir(workspace())
                .stdin(Stdio::null())
                .status()
                .expect("cannot run cargo");
            assert!(status.success(), "cargo build -p gantry failed: {status}");
        }
        assert!(bin.is_file(), "no gantry binary at {}", bin.display());
        bin
    })
}

/// The fake NVML library (`host/fake-nvml`), built first if it is missing or older than its
/// sources (once per test binary).
pub fn fake_nvml_library() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let dir = profile_dir();
        let lib = dir.join("libgantry_fake_nvml.so");
        let built = fs::metadata(&lib).and_then(|m| m.modified()).ok();
        let ws = workspace();
        let stale = built.is_none_or(|b| {
            ["host/fake-nvml", "Cargo.lock"]
                .iter()
                .any(|p| newest_mtime(&ws.join(p)) > b)
        });
        if std::env::var_os("GANTRY_E2E_NO_BUILD").is_none() && stale {
            let profile = match dir.file_name().and_then(|p| p.to_str()) {
                Some("debug") | None => "dev".to_string(),
                Some(p) => p.to_string(),
            };
            let target = dir.parent().expect("the profile dir has a parent");
            let status = Command::new(env!("CARGO"))
                .args(["build", "-p", "gantry-fake-nvml", "--profile", &profile])
                .arg("--target-dir")
                .arg(target)
                .current_dir(&ws)
                .stdin(Stdio::null())
                .status()
                .expect("cannot run cargo");
            assert!(
                status.success(),
                "cargo build -p gantry-fake-nvml failed: {status}"
            );
        }
        assert!(lib.is_file(), "no fake NVML library at {}", lib.display());
        lib
    })
}
