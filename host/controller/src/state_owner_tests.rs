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

#![allow(clippy::unwrap_used)]

/// (kind of state, the store's write methods for it, the files that own it).
const OWNERS: &[(&str, &[&str], &[&str])] = &[
    (
        "services and their revisions",
        &["put_service("],
        &["service_sets.rs", "service_rollout.rs"],
    ),
    (
        "plugins and pipelines",
        &["put_plugin(", "put_pipeline("],
        &["policy_ops.rs"],
    ),
    (
        "accounting records and the ledger",
        &[
            "put_accounting_seq(",
            "queue_accounting(",
            "unqueue_accounting(",
        ],
        &["accounting.rs"],
    ),
    (
        "forgetting what retention lets go",
        &[
            "delete_job(",
            "delete_job_history(",
            "delete_accounting_before(",
            "delete_events_before(",
            "put_job_decisions(",
            "release_free_space(",
        ],
        &["retention.rs"],
    ),
    (
        "ended jobs moved to history",
        &["archive_jobs(", "archive_ended_before("],
        &["job_table.rs"],
    ),
    ("the leader's fence", &["set_fence("], &["lib.rs"]),
    (
        "meta keys: drains, the node table, the pipeline, the ledger, retention",
        &["set_meta("],
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
    let lines = super::source_scan::code_lines(&[]);
    assert!(
        lines.iter().any(|(f, _, _)| f.ends_with("service_sets.rs")),
        "the scan found no sources"
    );
    let mut found = Vec::new();
    for (file, n, line) in &lines {
        let code = line.split("//").next().unwrap_or_default();
        let name = std::path::Path::new(file)
            .file_name()
            .unwrap()
            .to_string_lossy();
        for (kind, methods, owners) in OWNERS {
            if methods.iter().any(|m| code.contains(&format!(".{m}"))) && !owners.contains(&&*name)
            {
                found.push(format!("{file}:{n}: {kind}: {}", line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "state written outside its owner (ARCHITECTURE.md, \"Who may change what\"):\n{}",
        found.join("\n")
    );
}
