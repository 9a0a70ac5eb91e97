//! Snapshots over several nodes: each node's free GPUs, CPU and memory count only the tasks
//! placed on it (nodes share GPU indices 0..n), running tasks are booked on their own node's
//! number, tasks on a node left out (down) keep an allocation no booking can use, and the
//! engine never places a task where a GPU is already held.

#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use gantry_api::model::{GpuShareView, JobSpec, TaskRecord};
use gantry_node::inventory::GpuInfo;

fn node(name: &str, gpus: u32) -> NodeInfo {
    NodeInfo {
        name: name.into(),
        cpu_milli: 8_000,
        memory_mib: 8_192,
        gpus: (0..gpus)
            .map(|i| GpuInfo::configured(i, "fake", 1024))
            .collect(),
        labels: Default::default(),
        gpu_source: "config".into(),
    }
}

fn running(id: u64, placed: &[(&str, u32, u32)]) -> JobRecord {
    let mut spec: JobSpec =
        serde_json::from_value(serde_json::json!({"name": "j", "argv": ["true"]})).unwrap();
    spec.validate().unwrap();
    let mut j = JobRecord::new(id, spec, 0);
    j.state = JobState::Running;
    j.start_ms = Some(1);
    j.tasks = placed
        .iter()
        .map(|&(node, index, milli)| TaskRecord {
            node: node.into(),
            gpus: vec![GpuShareView { index, milli }],
            cpu_milli: 1_000,
            memory_mib: 1_024,
            pid: Some(1),
            exit: None,
            started_ms: Some(1),
            ended_ms: None,
            usage: None,
            gpu_usage: None,
        })
        .collect();
    j
}

#[test]
fn each_node_counts_only_its_own_tasks_and_absent_nodes_book_nothing() {
    let (a, b) = (node("a", 2), node("b", 2));
    let jobs = [
        running(1, &[("a", 0, 1000), ("b", 0, 1000)]),
        running(2, &[("b", 1, 500)]),
        running(3, &[("c", 0, 1000)]),
    ];
    let ledger = Ledger::new(3600.0);
    // Node c (job 3's) is down: not in the snapshot.
    let snap = build(jobs.iter(), &[(0, &a), (1, &b)], 1, 10, &ledger);
    let free = |id: c::NodeId| -> Vec<u32> {
        let n = snap.nodes.iter().find(|n| n.id == id).unwrap();
        n.gpus.iter().map(|g| g.free_milli).collect()
    };
    assert_eq!(free(0), vec![0, 1000], "node a: only job 1's task");
    assert_eq!(
        free(1),
        vec![0, 500],
        "node b: job 1's second task and job 2"
    );
    let b_view = snap.nodes.iter().find(|n| n.id == 1).unwrap();
    assert_eq!(b_view.cpu_milli_free, 6_000);
    assert_eq!(b_view.memory_mib_free, 6_144);
    assert_eq!(snap.ctx.totals.nodes, 2);
    assert_eq!(snap.ctx.totals.gpu_milli_total, 4_000);
    assert_eq!(snap.ctx.totals.gpu_milli_free, 1_500);
    let booked: Vec<Vec<c::NodeId>> = snap
        .running
        .iter()
        .map(|r| r.tasks.iter().map(|t| t.node).collect())
        .collect();
    assert_eq!(booked, vec![vec![0, 1], vec![1], vec![ABSENT_NODE]]);

    // The contract's model over this snapshot has room for exactly the free whole GPUs,
    // and never on a GPU a running task holds.
    let mut model = c::ClusterModel::new(&snap.ctx, &snap.nodes);
    let one = c::TaskGroup {
        count: 1,
        gpus: 1,
        cpu_milli: 100,
        memory_mib: 64,
        ..Default::default()
    };
    let first = model.fit_task(&one, 0).expect("a's GPU 1 is free");
    assert_eq!((first.node, first.gpus[0].index), (0, 1));
    model.take(&one, &first).unwrap();
    assert!(model.fit_task(&one, 0).is_none(), "node a is full");
    assert!(
        model.fit_task(&one, 1).is_none(),
        "node b has no whole GPU free"
    );
}

#[test]
fn a_submits_context_reads_as_the_cycles_does_over_the_same_jobs() {
    let (a, b) = (node("a", 2), node("b", 2));
    let pending = |id: u64, queue: &str, user: &str| {
        let mut spec: JobSpec = serde_json::from_value(serde_json::json!({
            "argv": ["true"], "queue": queue, "user": user,
        }))
        .unwrap();
        spec.validate().unwrap();
        JobRecord::new(id, spec, 0)
    };
    let jobs = [
        running(1, &[("a", 0, 1000), ("b", 0, 1000)]),
        running(2, &[("b", 1, 500)]),
        pending(3, "default", "alice"),
        pending(4, "gpu", "bob"),
        pending(5, "gpu", "alice"),
    ];
    let nodes = [(0, &a), (1, &b)];
    let ledger = Ledger::new(3600.0);
    let cycle = build(jobs.iter(), &nodes, 4, 10_000, &ledger);
    let running: Vec<&JobRecord> = jobs
        .iter()
        .filter(|j| j.state == JobState::Running)
        .collect();
    let (ctx, nodes_c, _) = submit_context(
        running.iter().copied(),
        jobs.iter(),
        &nodes,
        4,
        10_000,
        &ledger,
    );
    let named = |ctx: &c::Cycle| {
        let queues: Vec<(String, u32, u64)> = ctx
            .queues
            .iter()
            .map(|q| {
                (
                    ctx.text(q.queue).to_string(),
                    q.pending_jobs,
                    q.gpu_milli_used,
                )
            })
            .collect();
        let usage: Vec<(String, u64)> = ctx
            .user_usage
            .iter()
            .map(|u| (ctx.text(u.who).to_string(), u.gpu_seconds as u64))
            .collect();
        let gpus: Vec<(String, u64)> = ctx
            .user_gpus
            .iter()
            .map(|u| (ctx.text(u.who).to_string(), u.gpu_milli))
            .collect();
        (queues, usage, gpus, ctx.totals)
    };
    assert_eq!(named(&ctx), named(&cycle.ctx));
    assert_eq!(
        named(&ctx).0,
        [("default".into(), 1, 2500), ("gpu".into(), 2, 0)],
        "pending counts come from the whole backlog"
    );
    assert_eq!(nodes_c, cycle.nodes);
}
