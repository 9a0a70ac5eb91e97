//! Guard of the one "run on a node" seam (issue 44, item 4): what acts on a task where it
//! runs — starting it, signalling it, writing its input, finding it after a restart, asking
//! an agent for a port — is called only from the two runners (`runner_local.rs`,
//! `runner_agent.rs`); the rest of the controller goes through `Runner` and never asks whether a node is local to do it. (A
//! service's port guard asks an agent who listens on a port, `service/remote_port.rs`: a
//! question about a machine, not an act on a task.) The check is textual, like
//! `state_owner_tests.rs` (`source_scan::outside_owners`): a call named outside the runners
//! fails the test with its file and line.

#![allow(clippy::unwrap_used)]

use super::source_scan::{OwnerRule, outside_owners};

/// The calls that act on a task where it runs: the executor's and the agent client's.
const RUN_CALLS: &[&str] = &[
    "prepare_files(",
    "TaskOrder",
    "executor.launch(",
    "executor.kill_now(",
    "executor.terminate_with(",
    "executor.signal_scoped(",
    "task_input::deliver(",
    "executor.find_running(",
    "executor.exit_since(",
    "executor.adopt(",
    "agent.launch(",
    "agent.signal(",
    "agent.free_port(",
    "client.input(",
];

const RUNNERS: &[&str] = &["runner_local.rs", "runner_agent.rs"];

#[test]
fn tasks_are_acted_on_only_through_a_runner() {
    // One rule per call, so each must still be made by a runner (else the list is stale).
    let rules: Vec<OwnerRule> = RUN_CALLS
        .iter()
        .map(|call| (*call, std::slice::from_ref(call), RUNNERS))
        .collect();
    let (found, stale) = outside_owners(&rules);
    assert!(
        stale.is_empty(),
        "no runner makes the calls {stale:?}: the guard's list is stale"
    );
    assert!(
        found.is_empty(),
        "a task acted on outside its node's runner (runner.rs):\n{}",
        found.join("\n")
    );
}
