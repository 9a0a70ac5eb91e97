//! Job state names as users type them: SLURM's codes and names (`PD`, `R`, `CD`,
//! `completed`, `all`) and Gantry's own (`pending`, `timed_out`), read into the states the
//! API filters on. Used by `gantry jobs -t` and SLURM's `squeue`, `sacct` and `scancel`.
//!
//! Owns that reading. Does not own how states are shown (`slurm::job_fields`).

/// The Gantry states a state name selects: SLURM's codes and names (`PD`, `R`, `CD`,
/// `completed`, `all`) or Gantry's own (`pending`, `timed_out`), without case.
pub fn gantry_states(name: &str) -> anyhow::Result<Vec<&'static str>> {
    let s = name.trim().to_ascii_uppercase();
    Ok(match s.as_str() {
        "PD" | "PENDING" => vec!["pending"],
        "R" | "RUNNING" | "CG" | "COMPLETING" => vec!["running"],
        "CD" | "COMPLETED" | "SUCCEEDED" => vec!["succeeded"],
        "F" | "FAILED" | "OOM" | "OUT_OF_MEMORY" | "NF" | "NODE_FAIL" => vec!["failed"],
        "CA" | "CANCELLED" => vec!["cancelled"],
        "TO" | "TIMEOUT" | "TIMED_OUT" => vec!["timed_out"],
        "PR" | "PREEMPTED" => vec!["preempted"],
        "ALL" => vec![
            "pending",
            "running",
            "succeeded",
            "failed",
            "cancelled",
            "timed_out",
            "preempted",
        ],
        _ => anyhow::bail!(
            "invalid job state specified: {name} (PD, R, CD, F, CA, TO, PR, OOM, NF or all; \
             or pending, running, succeeded, failed, cancelled, timed_out, preempted)"
        ),
    })
}
