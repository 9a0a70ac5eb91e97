//! The fuzz targets' checks (`fuzz/checks/`), in the suite on the stable toolchain: every
//! input of each target's corpus (`fuzz/corpus/<target>/`), then a bounded number of
//! mutations of them (bytes flipped, cut, repeated, spliced with another seed, replaced by
//! bytes parsers trip on), from a fixed seed so a failure is repeated by running the test
//! again. A panic in a check is a defect the fuzzers would have found: the test names the
//! target, the seed file and the mutation.
//!
//! This is the cheap half of fuzzing, run by `.ci/run` with the rest of the suite;
//! `scripts/fuzz` runs libFuzzer with AddressSanitizer for as long as one wants
//! (`docs/fuzzing.md`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../../fuzz/checks/job_spec.rs"]
mod job_spec;
#[path = "../../../fuzz/checks/pipeline.rs"]
mod pipeline;
#[path = "../../../fuzz/checks/sbatch.rs"]
mod sbatch;
#[path = "../../../fuzz/checks/trace_csv.rs"]
mod trace_csv;
#[path = "../../../fuzz/checks/workload.rs"]
mod workload;

use std::path::PathBuf;

/// Mutations tried per target (on top of the corpus itself).
const MUTATIONS: usize = 4_000;

/// Bytes and strings parsers trip on.
const TRICKY: &[&[u8]] = &[
    b"\0",
    b"\xff\xfe",
    b"\"",
    b"\\",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b"\n",
    b"\r\n",
    b"=",
    b"%",
    b"-1",
    b"18446744073709551616",
    b"1e309",
    b"NaN",
    b"null",
    b"#SBATCH --",
    b"\xe2\x80\x8b",
];

/// A small deterministic generator (xorshift64*): the same mutations on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let seeds: Vec<_> = files
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    assert!(
        !seeds.is_empty(),
        "no corpus for {target} in {}",
        dir.display()
    );
    seeds
}

/// One mutation of `seed` (another seed, `other`, for splices); what was done, and the bytes.
fn mutate(rng: &mut Rng, seed: &[u8], other: &[u8]) -> (String, Vec<u8>) {
    let mut out = seed.to_vec();
    let at = rng.below(out.len() + 1);
    let how = match rng.below(6) {
        0 if !out.is_empty() => {
            let i = rng.below(out.len());
            out[i] ^= 1 << rng.below(8);
            format!("flip a bit of byte {i}")
        }
        1 => {
            out.truncate(at);
            format!("cut at {at}")
        }
        2 => {
            let len = rng.below(32).min(out.len() - at.min(out.len()));
            let piece = out[at..at + len].to_vec();
            for _ in 0..1 + rng.below(8) {
                out.splice(at..at, piece.iter().copied());
            }
            format!("repeat {len} bytes at {at}")
        }
        3 => {
            let from = rng.below(other.len() + 1);
            out.truncate(at);
            out.extend_from_slice(&other[from..]);
            format!("splice at {at} with another seed from {from}")
        }
        _ => {
            let tricky = TRICKY[rng.below(TRICKY.len())];
            out.splice(at..at, tricky.iter().copied());
            format!("insert {:?} at {at}", String::from_utf8_lossy(tricky))
        }
    };
    (how, out)
}

/// Runs `check` on the corpus of `target` and on [`MUTATIONS`] mutations of it.
fn replay(target: &str, check: fn(&[u8])) {
    let seeds = corpus(target);
    let run = |what: &str, input: &[u8]| {
        if std::panic::catch_unwind(|| check(input)).is_err() {
            panic!(
                "fuzz check {target} panicked on {what} ({} bytes: {:?})",
                input.len(),
                String::from_utf8_lossy(input)
            );
        }
    };
    for (name, bytes) in &seeds {
        run(&format!("corpus file {name}"), bytes);
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ target.len() as u64);
    for n in 0..MUTATIONS {
        let (name, seed) = &seeds[rng.below(seeds.len())];
        let (_, other) = &seeds[rng.below(seeds.len())];
        let (how, input) = mutate(&mut rng, seed, other);
        run(&format!("mutation {n} of {name}: {how}"), &input);
    }
}

#[test]
fn job_spec_corpus_and_mutations() {
    replay("job_spec", job_spec::check);
}

#[test]
fn pipeline_corpus_and_mutations() {
    replay("pipeline", pipeline::check);
}

#[test]
fn sbatch_corpus_and_mutations() {
    replay("sbatch", sbatch::check);
}

#[test]
fn trace_csv_corpus_and_mutations() {
    replay("trace_csv", trace_csv::check);
    for file in trace_csv::scratch_files() {
        let _ = std::fs::remove_file(file);
    }
}

#[test]
fn workload_corpus_and_mutations() {
    replay("workload", workload::check);
    for file in workload::scratch_files() {
        let _ = std::fs::remove_file(file);
    }
}
