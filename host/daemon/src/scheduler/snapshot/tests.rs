//! Snapshots over several nodes: each node's free GPUs, CPU and memory count only the tasks
//! placed on it (nodes share GPU indices 0..n), running tasks are booked on their own node's
//! number, tasks on a node left out (down) keep an allocation no booking can use, and the
//! engine never places a task where a GPU is already held.

#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use crate::inventory::GpuInfo;
use crate::model::{GpuShareView, JobSpec, TaskRecord};

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
