//! Running the image cache's tools (`skopeo`, `umoci`, a decompressor) as the task's shim
//! does: in the task's cgroups (joined between fork and exec, so what they use, memory and
//! page cache included, is charged to the job that asked, never to the node's account), with
//! a deadline after which the tool is killed, and a check on every tick that may stop it
//! (a pull past its byte bound).
//!
//! Owns: spawning, joining cgroups, deadlines, the tool's error text. Does not own what the
//! tools are asked to do (`image_store`, `unpack_bounds`).

use std::ffi::CString;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Makes `cmd`'s process join the cgroups whose `cgroup.procs` files are `procs` before it
/// execs; a cgroup it cannot join makes the spawn fail (never run unaccounted).
pub(crate) fn in_cgroups(cmd: &mut Command, procs: &[PathBuf]) -> io::Result<()> {
    let paths = procs
        .iter()
        .map(|p| {
            CString::new(p.as_os_str().as_bytes())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if paths.is_empty() {
        return Ok(());
    }
    // SAFETY: the closure runs in the child between fork and exec and makes only
    // async-signal-safe calls (`join_cgroup`: open, write, close) on C strings prepared
    // before the fork.
    unsafe {
        cmd.pre_exec(move || {
            for path in &paths {
                crate::cgroup_join::join_cgroup(path)?;
            }
            Ok(())
        });
    }
    Ok(())
}

/// Runs a tool to its end in `cgroups`; its stderr (cut) is the error.
pub(crate) fn run_tool(mut cmd: Command, cgroups: &[PathBuf]) -> Result<(), String> {
    in_cgroups(&mut cmd, cgroups).map_err(|e| format!("{:?}: {e}", cmd.get_program()))?;
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!("{} ({})", cut(&out.stderr), out.status))
}

fn cut(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    text.trim().chars().take(2000).collect()
}

/// How a watched tool is bounded.
#[derive(Debug, Clone)]
pub(crate) struct Watch<'a> {
    /// The task's `cgroup.procs` files.
    pub cgroups: &'a [PathBuf],
    /// Killed past this (`None`: no deadline).
    pub deadline: Option<Duration>,
    /// What the deadline is called in the error (`[containers] pull_timeout_s = 1800`).
    pub deadline_name: String,
}

/// Runs `cmd` to its end, calling `tick(elapsed ms, last time it spoke)` every quarter
/// second meanwhile (its end is seen at once, not at the next tick). A tick that answers
/// `Err` stops the tool (killed) with that error; so does the deadline. Otherwise the
/// tool's stderr (cut) is the error when it fails.
pub(crate) fn watch(
    mut cmd: Command,
    bounds: &Watch<'_>,
    mut tick: impl FnMut(u64, &mut u64) -> Result<(), String>,
) -> Result<(), String> {
    let started = Instant::now();
    in_cgroups(&mut cmd, bounds.cgroups).map_err(|e| format!("{:?}: {e}", cmd.get_program()))?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    let (tx, rx) = std::sync::mpsc::channel();
    if let Some(mut stderr) = child.stderr.take() {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = stderr.read_to_end(&mut text);
            let _ = tx.send(text);
        });
    }
    let mut last_said = 0;
    let stop = |child: &mut std::process::Child, why: String| {
        let _ = child.kill();
        let _ = child.wait();
        Err(why)
    };
    let stderr = loop {
        let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        if let Err(why) = tick(elapsed, &mut last_said) {
            return stop(&mut child, why);
        }
        if let Some(limit) = bounds.deadline
            && started.elapsed() >= limit
        {
            let why = format!(
                "stopped after {} s ({})",
                limit.as_secs(),
                bounds.deadline_name
            );
            return stop(&mut child, why);
        }
        match rx.recv_timeout(Duration::from_millis(250)) {
            Ok(text) => break text,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break Vec::new(),
        }
    };
    let status = child
        .wait()
        .map_err(|e| format!("waiting for {:?}: {e}", cmd.get_program()))?;
    if status.success() {
        return Ok(());
    }
    Err(format!("{} ({status})", cut(&stderr)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn quiet() -> Watch<'static> {
        Watch {
            cgroups: &[],
            deadline: Some(Duration::from_millis(500)),
            deadline_name: "test_timeout_s".into(),
        }
    }

    #[test]
    fn a_tool_past_its_deadline_or_stopped_by_a_tick_is_killed_with_the_reason() {
        let started = Instant::now();
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let err = watch(cmd, &quiet(), |_, _| Ok(())).unwrap_err();
        assert!(err.contains("test_timeout_s"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(10));
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let err = watch(cmd, &quiet(), |_, _| Err("too many bytes".into())).unwrap_err();
        assert_eq!(err, "too many bytes");
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo nope >&2; exit 3"]);
        let err = watch(cmd, &quiet(), |_, _| Ok(())).unwrap_err();
        assert!(err.starts_with("nope ("), "{err}");
        watch(Command::new("true"), &quiet(), |_, _| Ok(())).unwrap();
    }

    #[test]
    fn a_cgroup_that_cannot_be_joined_stops_the_tool() {
        let bad = [PathBuf::from("/nonexistent/cgroup.procs")];
        let err = run_tool(Command::new("true"), &bad).unwrap_err();
        assert!(err.contains("cannot run"), "{err}");
    }
}
