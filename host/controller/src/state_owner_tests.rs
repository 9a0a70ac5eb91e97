//! Guard of "one owner per kind of state" (issue 44, item 2) for the store's writes: each
//! kind of durable state is written only from the files of its owner, as `ARCHITECTURE.md`'s
//! table "Who may change what" says. Job records have their own, finer guard
//! (`job_edit_tests.rs`); the event log is append-only and any owner records its events, so
//! `event(` is not checked here.
//!
//! The check is textual: a write method of the store named outside its owner's files fails
//! the test, with the file and line. `set_meta` is shared by several owners (each with its
//! own keys: a node's drain, the node table, the active pipeline, the ledger's cursor,
//! retention's marks), so it is allowed in those owners' files only.
//!
//! In memory the same holds for the node table (only `members.rs` and the node files may take
//! a member mutably; every other file reads members through `&Member`), services and the runs
//! in flight: a second test names the calls that change each and the files that may make them.

#![allow(clippy::unwrap_used)]

use super::source_scan::{OwnerRule, outside_owners};

/// (kind of state, the store's write methods for it, the files that own it).
const OWNERS: &[OwnerRule] = &[
    (
        "services and their revisions",
        &[".put_service("],
        &["service_sets.rs", "service_rollout.rs"],
    ),
    (
        "plugins and pipelines",
        &[".put_plugin(", ".put_pipeline("],
        &["policy_ops.rs"],
    ),
    (
        "accounting records and the ledger",
        &[
            ".put_accounting_seq(",
            ".queue_accounting(",
            ".unqueue_accounting(",
        ],
        &["accounting.rs"],
    ),
    (
        "forgetting what retention lets go",
        &[
            ".delete_job(",
            ".delete_job_history(",
            ".delete_accounting_before(",
            ".delete_events_before(",
            ".put_job_decisions(",
            ".release_free_space(",
        ],
        &["retention.rs"],
    ),
    (
        "ended jobs moved to history",
        &[".archive_jobs(", ".archive_ended_before("],
        &["job_table.rs"],
    ),
    ("the leader's fence", &[".set_fence("], &["lib.rs"]),
    (
        "meta keys: drains, the node table, the pipeline, the ledger, retention",
        &[".set_meta("],
        &[
            "nodes.rs",
            "node_down.rs",
            "members.rs",
            "policy_ops.rs",
            "accounting.rs",
            "retention.rs",
        ],
    ),
];

#[test]
fn each_kind_of_state_is_written_only_by_its_owner() {
    let (found, stale) = outside_owners(OWNERS);
    assert!(
        stale.is_empty(),
        "no code writes {stale:?} any more: the guard's list is stale"
    );
    assert!(
        found.is_empty(),
        "state written outside its owner (ARCHITECTURE.md, \"Who may change what\"):\n{}",
        found.join("\n")
    );
}

/// (kind of in-memory state, the calls that change it, the files that own it).
const MEMORY_OWNERS: &[OwnerRule] = &[
    (
        "the node table: membership, liveness, unwanted tasks, drains and GPU faults",
        &["by_name_mut(", "all_mut(", ".push(Member"],
        &[
            "members.rs",
            "remote.rs",
            "node_down.rs",
            "nodes.rs",
            "reconcile.rs",
        ],
    ),
    (
        "services: records, revisions, rollouts, endpoints",
        &["inner.services"],
        &["service_sets.rs", "service_rollout.rs"],
    ),
    (
        "runs in flight on agents",
        &["inner.remote_runs"],
        &["launch.rs", "image_pin.rs", "reconcile.rs"],
    ),
];

#[test]
fn each_kind_of_in_memory_state_is_changed_only_by_its_owner() {
    let (found, stale) = outside_owners(MEMORY_OWNERS);
    assert!(
        stale.is_empty(),
        "no code changes {stale:?} any more: the guard's list is stale"
    );
    assert!(
        found.is_empty(),
        "in-memory state changed outside its owner (ARCHITECTURE.md, \"Who may change what\"):\n{}",
        found.join("\n")
    );
}
