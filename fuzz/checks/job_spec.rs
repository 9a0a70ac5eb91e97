//! The check of fuzz target `job_spec` (and of the suite's corpus replay,
//! `host/gantry/tests/fuzz_corpus.rs`): feeds arbitrary bytes to the job-spec parser the way
//! `POST /v1/jobs` does — `gantry_server::api::parse_json::<JobSpec>` (serde_json plus the
//! field locator that names `tasks[0].gpus` in a 400) — then `JobSpec::validate` on
//! whatever parses. Neither may panic.
use gantry_api::model::JobSpec;

/// Runs the check on one input; panics on a defect.
pub fn check(data: &[u8]) {
    if let Ok(mut spec) = gantry_server::api::parse_json::<JobSpec>(data) {
        let _ = spec.validate();
    }
    // The plain serde path (the simulator's workload lines use it).
    if let Ok(mut spec) = serde_json::from_slice::<JobSpec>(data) {
        let _ = spec.validate();
    }
}
