//! Node and GPU choice: each scoring mode, GPU groups, one-node gangs, racks,
//! fractions, and gangs all or nothing.

use super::*;

/// n0 has 4 free GPUs, n1 2 of 4 (job 100 holds two, no time limit), n2 3 of 4.
fn mixed() -> (Vec<Node>, Vec<RunningJob>) {
    let mut nodes = vec![node(0, 4), node(1, 4), node(2, 4)];
    let running = vec![
        run(&mut nodes, 100, 1, &[0, 1], None),
        run(&mut nodes, 101, 2, &[3], None),
    ];
    (nodes, running)
}

#[test]
fn binpack_takes_the_fullest_node_that_fits() {
    let (nodes, running) = mixed();
    let plan = place(
        "{}",
        &[job(1, 1, 1, 60), job(2, 1, 3, 60)],
        &nodes,
        &running,
    );
    assert_eq!(tasks_of(&plan, 1), vec![(1, vec![2])]);
    // n1 has one left, n2 three: the 3-GPU job takes n2, not the empty n0.
    assert_eq!(tasks_of(&plan, 2), vec![(2, vec![0, 1, 2])]);
}

#[test]
fn spread_takes_the_emptiest_node() {
    let (nodes, running) = mixed();
    let config = r#"{"scoring": "spread"}"#;
    let plan = place(
        config,
        &[job(1, 1, 1, 60), job(2, 1, 1, 60)],
        &nodes,
        &running,
    );
    assert_eq!(tasks_of(&plan, 1), vec![(0, vec![0])]);
    // n0 now has 3 free, as has n2: the tie goes to the lower node position.
    assert_eq!(tasks_of(&plan, 2), vec![(0, vec![1])]);
    // A gang spreads too: each task on the emptiest node after the previous ones.
    let plan = place(config, &[job(3, 3, 1, 60)], &nodes, &running);
    assert_eq!(
        tasks_of(&plan, 3),
        vec![(0, vec![0]), (0, vec![1]), (2, vec![0])]
    );
}

#[test]
fn topology_orders_single_tasks_like_binpack() {
    let (nodes, running) = mixed();
    let plan = place(
        r#"{"scoring": "topology"}"#,
        &[job(1, 1, 1, 60)],
        &nodes,
        &running,
    );
    assert_eq!(tasks_of(&plan, 1), vec![(1, vec![2])]);
}

fn grouped(busy: &[u32]) -> (Vec<Node>, Vec<RunningJob>) {
    let mut nodes = vec![node(0, 8)];
    label(&mut nodes[0], GROUPS, G0_3_4_7);
    let running = vec![run(&mut nodes, 100, 0, busy, Some(600))];
    (nodes, running)
}

#[test]
fn topology_keeps_a_multi_gpu_task_inside_one_gpu_group() {
    // GPUs 1 and 2 busy: group 0-3 has two free, group 4-7 four.
    let (nodes, running) = grouped(&[1, 2]);
    let plan = place(
        r#"{"scoring": "topology"}"#,
        &[job(1, 1, 4, 60)],
        &nodes,
        &running,
    );
    assert_eq!(tasks_of(&plan, 1), vec![(0, vec![4, 5, 6, 7])]);
    // Binpack ignores groups: lowest free indices.
    let plan = place("{}", &[job(1, 1, 4, 60)], &nodes, &running);
    assert_eq!(tasks_of(&plan, 1), vec![(0, vec![0, 3, 4, 5])]);
    // A 2-GPU task takes the tighter group, keeping 4-7 whole.
    let plan = place(
        r#"{"scoring": "topology"}"#,
        &[job(1, 1, 2, 60)],
        &nodes,
        &running,
    );
    assert_eq!(tasks_of(&plan, 1), vec![(0, vec![0, 3])]);
}

#[test]
fn topology_spans_the_fewest_groups_when_none_holds_the_task() {
    // GPUs 1 and 5 busy: three free in each group.
    let (nodes, running) = grouped(&[1, 5]);
    let plan = place(
        r#"{"scoring": "topology"}"#,
        &[job(1, 1, 4, 60)],
        &nodes,
        &running,
    );
    assert_eq!(tasks_of(&plan, 1), vec![(0, vec![0, 2, 3, 4])]);
}

#[test]
fn topology_keeps_a_gang_that_fits_one_node_on_one_node() {
    // n0 has 3 free GPUs (fuller), n1 all 8.
    let mut nodes = vec![node(0, 8), node(1, 8)];
    let running = vec![run(&mut nodes, 100, 0, &[0, 1, 2, 3, 4], None)];
    let gang = [job(1, 8, 1, 60)];
    let plan = place(r#"{"scoring": "topology"}"#, &gang, &nodes, &running);
    let tasks = tasks_of(&plan, 1);
    assert!(tasks.iter().all(|(n, _)| *n == 1), "{tasks:?}");
    let gpus: Vec<u32> = tasks.iter().flat_map(|(_, g)| g.clone()).collect();
    assert_eq!(gpus, (0..8).collect::<Vec<u32>>());
    // Binpack fills the fuller node first and splits the gang.
    let plan = place("{}", &gang, &nodes, &running);
    let on_n0 = tasks_of(&plan, 1).iter().filter(|(n, _)| *n == 0).count();
    assert_eq!(on_n0, 3);
}

#[test]
fn topology_puts_a_two_node_gang_in_one_rack() {
    let mut nodes = vec![node(0, 4), node(1, 4), node(2, 4)];
    label(&mut nodes[0], RACK, R1);
    label(&mut nodes[1], RACK, R2);
    label(&mut nodes[2], RACK, R1);
    let gang = [job(1, 2, 4, 60)];
    let plan = place(r#"{"scoring": "topology"}"#, &gang, &nodes, &[]);
    let used: Vec<u32> = tasks_of(&plan, 1).iter().map(|(n, _)| *n).collect();
    assert_eq!(used, vec![0, 2]);
    let plan = place("{}", &gang, &nodes, &[]);
    let used: Vec<u32> = tasks_of(&plan, 1).iter().map(|(n, _)| *n).collect();
    assert_eq!(used, vec![0, 1]);
}

#[test]
fn fractions_share_one_gpu_before_opening_another() {
    let nodes = vec![node(0, 2)];
    let jobs: Vec<Job> = (1..=5).map(|i| frac(i, 1, 250, 60)).collect();
    let plan = place("{}", &jobs, &nodes, &[]);
    for j in 1..=4 {
        assert_eq!(tasks_of(&plan, j), vec![(0, vec![0])], "job {j}");
    }
    assert_eq!(tasks_of(&plan, 5), vec![(0, vec![1])]);
    // A gang of four quarter-GPU tasks lands on one GPU too.
    let plan = place("{}", &[frac(6, 4, 250, 60)], &nodes, &[]);
    assert!(tasks_of(&plan, 6).iter().all(|t| *t == (0, vec![0])));
}

#[test]
fn fractions_fill_the_fullest_partly_used_gpu() {
    let mut nodes = vec![node(0, 3)];
    nodes[0].gpus[1].free_milli = 500;
    nodes[0].gpus[2].free_milli = 300;
    let plan = place(
        "{}",
        &[frac(1, 1, 400, 60), frac(2, 1, 300, 60)],
        &nodes,
        &[],
    );
    assert_eq!(tasks_of(&plan, 1), vec![(0, vec![1])]);
    assert_eq!(tasks_of(&plan, 2), vec![(0, vec![2])]);
    let s = &plan.starts[0].tasks[0].gpus[0];
    assert_eq!(s.milli, 400);
}

#[test]
fn gangs_start_whole_across_nodes_or_not_at_all() {
    let nodes = vec![node(0, 4), node(1, 4)];
    // Three 4-GPU tasks never fit two 4-GPU nodes; two do, one per node.
    let plan = place("{}", &[job(1, 3, 4, 60), job(2, 2, 4, 60)], &nodes, &[]);
    assert_eq!(started(&plan), vec![2]);
    assert_eq!(
        tasks_of(&plan, 2),
        vec![(0, vec![0, 1, 2, 3]), (1, vec![0, 1, 2, 3])]
    );
    assert!(plan.pending.iter().any(|p| p.job == 1));
    // With one GPU taken, the two-task gang does not start at all.
    let mut nodes = nodes;
    let running = vec![run(&mut nodes, 100, 1, &[3], Some(60))];
    let plan = place(
        "{}",
        &[job(2, 2, 4, 60), job(3, 1, 1, 30)],
        &nodes,
        &running,
    );
    assert!(!started(&plan).contains(&2));
    // Job 3 ends (30 s) before job 2's reservation (+1m): it runs.
    assert_eq!(started(&plan), vec![3]);
    assert!(
        reason(&plan, 2)
            .message
            .contains("reserved to start at +1m"),
        "{}",
        reason(&plan, 2).message
    );
}

#[test]
fn draining_nodes_and_unhealthy_gpus_take_nothing() {
    let mut nodes = vec![node(0, 2), node(1, 2)];
    nodes[0].state = NodeState::Draining;
    nodes[1].gpus[0].healthy = false;
    let plan = place("{}", &[job(1, 1, 1, 60), job(2, 1, 1, 60)], &nodes, &[]);
    assert_eq!(started(&plan), vec![1]);
    assert_eq!(tasks_of(&plan, 1), vec![(1, vec![1])]);
}
