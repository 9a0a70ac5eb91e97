//! `gantry-task-shim`: the task shim alone. The daemon starts it once per task instead of
//! executing the whole `gantry` binary again (an exec of that binary cost about 1.9 ms of CPU
//! per task before the shim did anything: `docs/benchmarks/core-loop.md`). The code is the
//! same as `gantry task-shim` (`host/node/src/executor/shim.rs`); the daemon uses this file
//! when it lies beside its own executable and no one else can write it
//! (`host/node/src/executor/shim_exe.rs`).
//!
//! Owns: nothing but the entry point. The arguments are those of `gantry task-shim`, with
//! `task-shim` first, so that a shim found after a restart looks the same either way.

use gantry_node::executor::{SHIM_SUBCOMMAND, run_shim};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) != Some(SHIM_SUBCOMMAND) {
        eprintln!("gantry-task-shim is started by the gantry daemon for each task, not by hand");
        std::process::exit(2);
    }
    std::process::exit(run_shim(&args[2..]));
}
