//! Fuzz target `trace_csv`: libFuzzer drives `checks/trace_csv.rs` (where the check and what it
//! feeds are described; the suite replays the corpus through the same check).
#![no_main]

#[path = "../checks/trace_csv.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
