//! Property: on random clusters (partly used, unhealthy and drained GPUs and nodes,
//! racks and GPU groups), random running jobs and random gangs, under every scoring
//! mode and option, every plan books task by task with `ClusterModel::take` on what
//! the nodes report free, passes the engine's validator, and accounts for every job
//! exactly once with a reason for each job left pending.

use super::*;
use gantry_sdk::ClusterModel;
use proptest::prelude::*;
use std::collections::HashSet;

fn arb_node(id: u32) -> impl Strategy<Value = Node> {
    (
        0u32..=8,
        prop::collection::vec(prop_oneof![Just(0u32), Just(250), Just(500), Just(1000)], 8),
        prop::collection::vec(any::<bool>(), 8),
        0u8..10,
        0u8..3,
        any::<bool>(),
        8_000u32..64_000,
    )
        .prop_map(move |(gpus, free, sick, state, rack, groups, cpu)| {
            let mut n = node(id, gpus);
            for (i, g) in n.gpus.iter_mut().enumerate() {
                g.free_milli = free[i];
                g.healthy = !(sick[i] && i % 3 == 0);
            }
            n.state = match state {
                0 => NodeState::Draining,
                1 => NodeState::Down,
                _ => NodeState::Up,
            };
            n.cpu_milli_free = cpu;
            if rack > 0 {
                label(&mut n, RACK, if rack == 1 { R1 } else { R2 });
            }
            if groups {
                label(&mut n, GROUPS, G0_3_4_7);
            }
            n
        })
}

fn arb_job(id: u64) -> impl Strategy<Value = Job> {
    let group = (1u32..=3, 0u8..4, 1u32..=4, 1u32..1000, 0u64..3).prop_map(
        |(count, kind, gpus, milli, mask)| TaskGroup {
            count,
            gpus: if kind == 1 { gpus } else { 0 },
            gpu_milli: if kind == 2 { milli } else { 0 },
            cpu_milli: 1000 * count,
            memory_mib: 1024,
            // Bit 1 names a model the cluster does not have.
            gpu_model_mask: mask,
        },
    );
    (
        prop::collection::vec(group, 1..=2),
        prop_oneof![Just(0u64), 60u64..7200],
    )
        .prop_map(move |(tasks, limit)| Job {
            id,
            submit_ms: id,
            time_limit_s: limit,
            tasks,
            ..Default::default()
        })
}

fn arb_running(nodes: u32) -> impl Strategy<Value = RunningJob> {
    (
        0..nodes,
        prop::collection::vec(0u32..8, 1..=3),
        prop_oneof![Just(None), (0u64..7200).prop_map(Some)],
        1000u64..2000,
    )
        .prop_map(|(node, gpus, end, id)| RunningJob {
            job: job(id, 1, gpus.len() as u32, end.unwrap_or(0)),
            tasks: vec![TaskAllocation {
                node,
                gpus: gpus
                    .iter()
                    .map(|&index| GpuShare { index, milli: 1000 })
                    .collect(),
                cpu_milli: 1000,
                memory_mib: 1024,
            }],
            start_ms: 0,
            expected_end_ms: end.map(|s| NOW + s * 1000 - 30_000),
            score: 0.0,
            revision: 0,
        })
}

fn arb_case() -> impl Strategy<Value = (Vec<Node>, Vec<RunningJob>, Vec<Job>, String)> {
    (1u32..=6).prop_flat_map(|n| {
        let nodes: Vec<_> = (0..n).map(arb_node).collect();
        let jobs = (1usize..=12).prop_flat_map(|k| (1..=k as u64).map(arb_job).collect::<Vec<_>>());
        let config = (
            prop_oneof![Just("binpack"), Just("spread"), Just("topology")],
            0u32..=3,
            1u32..=20,
        )
            .prop_map(|(s, c, m)| {
                format!(r#"{{"scoring": "{s}", "conservative": {c}, "max_jobs": {m}}}"#)
            });
        (
            nodes,
            prop::collection::vec(arb_running(n), 0..=6),
            jobs,
            config,
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn every_plan_books_and_every_job_is_accounted_for(
        (nodes, running, jobs, config) in arb_case()
    ) {
        let plan = place(&config, &jobs, &nodes, &running);
        let cx = ctx();
        let mut model = ClusterModel::new(&cx, &nodes);
        for s in &plan.starts {
            let job = jobs.iter().find(|j| j.id == s.job).unwrap();
            prop_assert_eq!(s.tasks.len(), job.task_count());
            for (group, alloc) in job.expanded_tasks().zip(&s.tasks) {
                let booked = model.take(group, alloc);
                prop_assert!(booked.is_ok(), "job {} {:?}: {:?}", s.job, alloc, booked);
            }
        }
        prop_assert!(gantry_engine::validate_plan(&cx, &jobs, &nodes, &plan).is_ok());
        let mut seen = HashSet::new();
        for id in plan.starts.iter().map(|s| s.job).chain(plan.pending.iter().map(|p| p.job)) {
            prop_assert!(seen.insert(id), "job {} twice", id);
        }
        prop_assert_eq!(seen.len(), jobs.len());
        for p in &plan.pending {
            prop_assert!(!p.reason.message.is_empty());
        }
    }
}

fn arb_search_case() -> impl Strategy<Value = (Vec<Node>, Vec<RunningJob>, Vec<Job>, Job)> {
    (1u32..=6).prop_flat_map(|n| {
        let nodes: Vec<_> = (0..n).map(arb_node).collect();
        let single = (
            0u8..3,
            1u32..=4,
            1u32..1000,
            prop_oneof![Just(0u64), 60u64..7200],
        )
            .prop_map(|(kind, gpus, milli, limit)| {
                let mut j = job(99, 1, if kind == 0 { gpus } else { 0 }, limit);
                if kind == 1 {
                    j.tasks[0].gpu_milli = milli;
                }
                j
            });
        (
            nodes,
            prop::collection::vec(arb_running(n), 0..=10),
            prop::collection::vec(arb_job(50), 0..=2),
            single,
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The incremental search (retrying a single-task job only on nodes that got
    /// something back) finds exactly what a full fit at every instant finds, also
    /// around earlier reservations.
    #[test]
    fn incremental_search_equals_full_search(
        (nodes, running, earlier, single) in arb_search_case()
    ) {
        use crate::reserve::search_with;
        use crate::scoring::Scoring;
        use crate::timeline::{Layer, Timeline};
        use crate::topology::Topo;
        let cx = ctx();
        let topo = Topo::new(&cx, &nodes);
        let now = Layer::now(&topo, &nodes);
        let window = NOW + 7 * 86_400_000;
        for scoring in [Scoring::Binpack, Scoring::Spread, Scoring::Topology] {
            let mut tl = Timeline::new(&topo, &running, NOW);
            for e in &earlier {
                if let Some((r, layer)) = search_with(&topo, &tl, &now, scoring, e, window, false) {
                    tl.add_reservation(r.job, r.at_ms, r.end_ms, &r.bookings, layer);
                }
            }
            let fast = search_with(&topo, &tl, &now, scoring, &single, window, true);
            let full = search_with(&topo, &tl, &now, scoring, &single, window, false);
            let brief = |x: &Option<(crate::reserve::Reservation, Layer)>| {
                x.as_ref().map(|(r, _)| (r.at_ms, r.bookings.clone(), r.waits_for.clone()))
            };
            prop_assert_eq!(brief(&fast), brief(&full));
        }
    }
}
