//! Fuzz target `sbatch`: libFuzzer drives `checks/sbatch.rs` (where the check and what it
//! feeds are described; the suite replays the corpus through the same check).
#![no_main]

#[path = "../checks/sbatch.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
