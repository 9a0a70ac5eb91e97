//! The real task shim for tests: the test binary re-executes itself, filtered to one test
//! function that calls [`act_as_shim_if_asked`], through a small wrapper script. Used by the
//! executor's tests here and (with the `test-support` feature) by the daemon's agent tests.
//!
//! Owns only test support; it is not compiled into the `gantry` binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{SHIM_SUBCOMMAND, run_shim, shim};

/// Environment variable through which the wrapper script hands the shim's arguments to the
/// entry test, joined with `SEP` (the test harness would take them for filters).
pub const SHIM_ARGS_ENV: &str = "GANTRY_EXECUTOR_TEST_SHIM_ARGS";
/// Separator of the shim's arguments in [`SHIM_ARGS_ENV`].
pub const SEP: char = '\u{1f}';

/// For a `#[test] fn shim_entry()`: when the test binary was re-executed by the wrapper
/// script, acts as the shim and exits; otherwise returns at once.
pub fn act_as_shim_if_asked() {
    let Ok(joined) = std::env::var(SHIM_ARGS_ENV) else {
        return;
    };
    let args: Vec<String> = joined.split(SEP).map(str::to_owned).collect();
    let code = match args.split_first() {
        Some((sub, rest)) if sub == SHIM_SUBCOMMAND => run_shim(rest),
        _ => shim::USAGE_CODE,
    };
    std::process::exit(code);
}

/// Writes an executable script.
pub fn write_script(path: &Path, body: &str) {
    fs::write(path, body).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// A script in `dir` that runs the real shim: this test binary, filtered to `entry_test`
/// (the path of a test that calls [`act_as_shim_if_asked`], without the crate name).
pub fn real_shim(dir: &Path, entry_test: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = dir.join("real-shim");
    write_script(
        &path,
        &format!(
            "#!/bin/sh\nIFS=$(printf '\\037')\n{SHIM_ARGS_ENV}=\"$*\"\nexport {SHIM_ARGS_ENV}\n\
             exec '{}' --exact '{entry_test}' --nocapture --test-threads=1 -q\n",
            exe.display()
        ),
    );
    path
}
