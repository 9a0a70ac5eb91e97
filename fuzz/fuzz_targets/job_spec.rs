//! Fuzz target `job_spec`: libFuzzer drives `checks/job_spec.rs` (where the check and what it
//! feeds are described; the suite replays the corpus through the same check).
#![no_main]

#[path = "../checks/job_spec.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
