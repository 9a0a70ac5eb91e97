//! What the tests through nvml-wrapper share: where the built library is, the scenarios,
//! writing a scenario file the way a test should (a new file renamed over the old one),
//! and running one test of this binary as a child process with its own scenario (the
//! library reads `GANTRY_FAKE_NVML_SCENARIO` at init and is loaded once per process).
//!
//! Owns: the test plumbing. Does not own any check.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Set in a child process: the `child_*` tests do nothing without it.
const CHILD: &str = "GANTRY_FAKE_NVML_TEST_CHILD";

/// The error a `child_init_fails` run expects, as nvml-wrapper's `Debug` spells it.
pub const EXPECT: &str = "GANTRY_FAKE_NVML_TEST_EXPECT";

/// The built `libgantry_fake_nvml.so`: the one in this binary's own folder (`deps/`),
/// which `cargo test` has just built, else the one in the profile folder above it
/// (`cargo build` copies it there, but `cargo test` leaves that copy stale).
pub fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("the deps folder");
    let name = "libgantry_fake_nvml.so";
    let here = deps.join(name);
    match deps.parent() {
        Some(profile) if !here.exists() => profile.join(name),
        _ => here,
    }
}

/// The scenario path when this process is a child run, else `None`.
pub fn child() -> Option<PathBuf> {
    std::env::var_os(CHILD)?;
    Some(std::env::var_os(gantry_fake_nvml::SCENARIO_VAR).map_or_else(PathBuf::new, PathBuf::from))
}

/// Runs the test `name` of this binary alone in a child process, with the scenario
/// variable set to `scenario` (or unset); fails when the child fails.
pub fn run_child(name: &str, scenario: Option<&Path>, expect: &str) -> Output {
    run(child_command(name, scenario, expect))
}

/// The command [`run_child`] runs, for a test that adds to its environment.
pub fn child_command(name: &str, scenario: Option<&Path>, expect: &str) -> Command {
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", name, "--nocapture", "--test-threads", "1"])
        .env(CHILD, "1")
        .env(EXPECT, expect);
    match scenario {
        Some(path) => cmd.env(gantry_fake_nvml::SCENARIO_VAR, path),
        None => cmd.env_remove(gantry_fake_nvml::SCENARIO_VAR),
    };
    cmd
}

/// Runs `cmd` and fails with its output when it fails.
pub fn run(mut cmd: Command) -> Output {
    let out = cmd.output().expect("run the child test");
    assert!(
        out.status.success(),
        "child {cmd:?} failed\n--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The lines of the child's stderr that the library wrote.
pub fn library_messages(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with("fake NVML:"))
        .map(str::to_string)
        .collect()
}

/// Writes `text` to `path` through a new file renamed over it, so a reader never sees
/// half a file and every version is a new inode.
pub fn write_text(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write the scenario");
    std::fs::rename(&tmp, path).expect("rename the scenario");
}

pub fn write(path: &Path, scenario: &Value) {
    write_text(path, &scenario.to_string());
}

pub const UUID0: &str = "GPU-00000000-0000-0000-0000-000000000000";
pub const UUID1: &str = "GPU-11111111-1111-1111-1111-111111111111";
pub const MIG0: &str = "MIG-00000000-0000-0000-0000-0000000000a0";
pub const A100: &str = "NVIDIA A100-SXM4-80GB";

/// Two A100s linked by NVLink; GPU 0 in MIG mode with one MIG device and one Xid pending.
pub fn two_gpus() -> Value {
    json!({
        "driver_version": "550.54.15",
        "devices": [
            {
                "name": A100,
                "uuid": UUID0,
                "pci_bus_id": "00000000:07:00.0",
                "memory_mib": 81920,
                "used_memory_mib": 1000,
                "nvlinks": ["00000000:08:00.0"],
                "utilization": {"gpu": 40, "memory": 20},
                "processes": [{"pid": 1234, "used_memory_mib": 1000, "sm_util": 50, "mem_util": 10}],
                "ecc_uncorrected_volatile": 2,
                "retired_pages_pending": true,
                "remapped_rows": {"correctable": 1, "uncorrectable": 3, "pending": true, "failure": false},
                "mig": {"enabled": true, "devices": [
                    {"profile": "1g.10gb", "uuid": MIG0, "memory_mib": 9856,
                     "processes": [{"pid": 4321, "used_memory_mib": 500, "sm_util": 5, "mem_util": 1}]}
                ]}
            },
            {
                "name": A100,
                "uuid": UUID1,
                "pci_bus_id": "00000000:08:00.0",
                "memory_mib": 81920,
                "nvlinks": ["00000000:07:00.0"]
            }
        ],
        "xid_events": [{"id": 1, "gpu": 0, "xid": 79}]
    })
}
