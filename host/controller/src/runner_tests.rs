//! Guard of the one "run on a node" seam (issue 44, item 4): what acts on a task where it
//! runs — starting it, signalling it, writing its input, asking an agent for a port — is
//! called only from the two runners (`runner_local.rs`, `runner_agent.rs`); the rest of the
//! controller goes through `Runner` and never asks whether a node is local to do it. (A
//! service's port guard asks an agent who listens on a port, `service/remote_port.rs`: a
//! question about a machine, not an act on a task.) The check is textual, like `state_owner_tests.rs`: a call named outside the runners fails
//! the test with its file and line.

#![allow(clippy::unwrap_used)]

/// The calls that act on a task where it runs: the executor's and the agent client's.
const RUN_CALLS: &[&str] = &[
    "prepare_files(",
    "TaskOrder",
    "executor.launch(",
    "executor.kill_now(",
    "executor.terminate_with(",
    "executor.signal(",
    "task_input::deliver(",
    "agent.launch(",
    "agent.signal(",
    "agent.free_port(",
    "client.input(",
];

const RUNNERS: &[&str] = &["runner_local.rs", "runner_agent.rs"];

#[test]
fn tasks_are_acted_on_only_through_a_runner() {
    let lines = super::source_scan::code_lines(&[]);
    assert!(
        lines.iter().any(|(f, _, _)| f.ends_with("runner_agent.rs")),
        "the scan found no sources"
    );
    let mut found = Vec::new();
    for (file, n, line) in &lines {
        let code = line.split("//").next().unwrap_or_default();
        let name = std::path::Path::new(file)
            .file_name()
            .unwrap()
            .to_string_lossy();
        if RUNNERS.contains(&&*name) {
            continue;
        }
        if let Some(call) = RUN_CALLS.iter().find(|c| code.contains(*c)) {
            found.push(format!("{file}:{n}: {call} {}", line.trim()));
        }
    }
    assert!(
        found.is_empty(),
        "a task acted on outside its node's runner (runner.rs):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_guard_sees_a_call_outside_the_runners() {
    // The scan covers the runners themselves (they are only skipped by name above): each
    // call named in the list is found in them, so a pattern that no longer matches
    // anything would show here instead of passing quietly.
    let lines = super::source_scan::code_lines(&[]);
    for call in RUN_CALLS {
        assert!(
            lines.iter().any(|(f, _, l)| {
                RUNNERS.iter().any(|r| f.ends_with(r))
                    && l.split("//").next().unwrap().contains(call)
            }),
            "no runner makes the call {call}: the guard's list is stale"
        );
    }
}
