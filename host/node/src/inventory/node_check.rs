//! The node check that returns a faulty GPU to service: the administrator's command
//! (`[node] health_check`, e.g. `["dcgmi", "diag", "-r", "1"]`) run for one GPU, with
//! the GPU named in its environment, bounded by a timeout. Exit status 0 returns the GPU
//! to service; anything else (a failure, a signal, the timeout, a command that does not
//! start) keeps it out, with the reason and the end of the command's output.
//!
//! The command comes from root's configuration file and runs as the daemon's user
//! (root on a site): it is the administrator's tool, never a user's.
//!
//! Owns: running the command and judging its result. Does not own when it runs (the
//! watcher in `nvml_watch.rs`) or what a pass or failure changes (the controller's
//! `gpu_health.rs`, the agent's heartbeat).

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Bytes of the command's output kept in a result (its end: where diagnostics say why).
const OUTPUT_TAIL: usize = 400;

/// The configured check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeCheck {
    /// Program and arguments (never through a shell unless the program is one).
    pub argv: Vec<String>,
    /// How long one run may take before it is killed and counted as failed.
    pub timeout: Duration,
    /// How long after a failed check the next one runs.
    pub every: Duration,
}

/// The GPU a check runs for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedGpu<'a> {
    /// Its index on the node.
    pub index: u32,
    /// Its UUID, when known.
    pub uuid: Option<&'a str>,
    /// Why it was taken out of service.
    pub fault: &'a str,
}

/// What one run of the check said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResult {
    /// Exit status 0 within the timeout.
    pub passed: bool,
    /// How it ended and the end of its output, for events and `gantry nodes -l`.
    pub detail: String,
}

impl NodeCheck {
    /// Runs the check for `gpu` (environment `GANTRY_GPU_INDEX`, `GANTRY_GPU_UUID`,
    /// `GANTRY_GPU_FAULT`), waiting at most the timeout.
    pub fn run(&self, gpu: &CheckedGpu<'_>) -> CheckResult {
        let Some((program, args)) = self.argv.split_first() else {
            return failed("node.health_check is empty".into());
        };
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env("GANTRY_GPU_INDEX", gpu.index.to_string())
            .env("GANTRY_GPU_UUID", gpu.uuid.unwrap_or(""))
            .env("GANTRY_GPU_FAULT", gpu.fault)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group: a timeout kills what it started too, so nothing
            // keeps the output pipes open after it.
            .process_group(0);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return failed(format!("the node check {program} did not start: {e}")),
        };
        let readers = [
            child.stdout.take().map(|s| read_in_thread(Box::new(s))),
            child.stderr.take().map(|s| read_in_thread(Box::new(s))),
        ];
        let deadline = Instant::now() + self.timeout;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() >= deadline => {
                    if let Ok(group) = i32::try_from(child.id()) {
                        // SAFETY: kill(2) with a negative pid signals the process group
                        // the child leads (made above); no memory is involved.
                        unsafe { libc::kill(-group, libc::SIGKILL) };
                    }
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => return failed(format!("waiting for the node check failed: {e}")),
            }
        };
        let mut output = Vec::new();
        for reader in readers.into_iter().flatten() {
            output.extend(reader.join().unwrap_or_default());
        }
        let tail = tail_text(&output);
        let (passed, how) = match status {
            Some(s) if s.success() => (true, "passed".to_string()),
            Some(s) => (false, format!("failed ({s})")),
            None => (
                false,
                format!("killed after its timeout of {} s", self.timeout.as_secs()),
            ),
        };
        let detail = if tail.is_empty() {
            format!("node check {how}")
        } else {
            format!("node check {how}: {tail}")
        };
        CheckResult { passed, detail }
    }
}

fn failed(detail: String) -> CheckResult {
    CheckResult {
        passed: false,
        detail,
    }
}

/// Reads `source` to its end (at most 64 KiB kept) on a thread of its own, so a command
/// that fills one pipe while the other is read cannot stall.
fn read_in_thread(source: Box<dyn Read + Send>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = source.take(64 * 1024).read_to_end(&mut buf);
        buf
    })
}

/// The last [`OUTPUT_TAIL`] bytes of `output` as one line of text.
fn tail_text(output: &[u8]) -> String {
    let text = String::from_utf8_lossy(output);
    let one_line: String = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    let skip = one_line.chars().count().saturating_sub(OUTPUT_TAIL);
    one_line.chars().skip(skip).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(argv: &[&str], timeout_ms: u64) -> NodeCheck {
        NodeCheck {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            timeout: Duration::from_millis(timeout_ms),
            every: Duration::from_secs(1),
        }
    }

    const GPU: CheckedGpu<'static> = CheckedGpu {
        index: 3,
        uuid: Some("GPU-3"),
        fault: "critical Xid error 79",
    };

    #[test]
    fn exit_zero_passes_and_the_gpu_is_named_in_the_environment() {
        let r = check(
            &[
                "sh",
                "-c",
                "echo gpu $GANTRY_GPU_INDEX $GANTRY_GPU_UUID: $GANTRY_GPU_FAULT",
            ],
            10_000,
        )
        .run(&GPU);
        assert!(r.passed, "{r:?}");
        assert_eq!(
            r.detail,
            "node check passed: gpu 3 GPU-3: critical Xid error 79"
        );
    }

    #[test]
    fn a_failure_keeps_the_gpu_out_with_the_output_tail() {
        let r = check(&["sh", "-c", "echo diag says no >&2; exit 4"], 10_000).run(&GPU);
        assert!(!r.passed);
        assert!(r.detail.contains("exit status: 4"), "{}", r.detail);
        assert!(r.detail.ends_with("diag says no"), "{}", r.detail);
    }

    #[test]
    fn a_hung_check_is_killed_at_its_timeout() {
        let r = check(&["sh", "-c", "sleep 30; echo late"], 200).run(&GPU);
        assert!(!r.passed);
        assert!(r.detail.contains("timeout"), "{}", r.detail);
    }

    #[test]
    fn a_missing_program_or_empty_command_fails_with_a_reason() {
        let r = check(&["/nonexistent/dcgmi"], 1_000).run(&GPU);
        assert!(!r.passed);
        assert!(r.detail.contains("did not start"), "{}", r.detail);
        assert!(!check(&[], 1_000).run(&GPU).passed);
    }

    #[test]
    fn long_output_keeps_its_end() {
        let long = format!("{} END", "x".repeat(2_000));
        assert!(tail_text(long.as_bytes()).ends_with("END"));
        assert_eq!(tail_text(long.as_bytes()).chars().count(), OUTPUT_TAIL);
    }
}
