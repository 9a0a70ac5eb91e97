//! Fuzz target `job_spec`: feeds arbitrary bytes to the job-spec parser the way
//! `POST /v1/jobs` does — `gantry_server::api::parse_json::<JobSpec>` (serde_json plus the
//! field locator that names `tasks[0].gpus` in a 400) — then `JobSpec::validate` on
//! whatever parses. Neither may panic.
#![no_main]

use gantry_api::model::JobSpec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(mut spec) = gantry_server::api::parse_json::<JobSpec>(data) {
        let _ = spec.validate();
    }
    // The plain serde path (the simulator's workload lines use it).
    if let Ok(mut spec) = serde_json::from_slice::<JobSpec>(data) {
        let _ = spec.validate();
    }
});
