//! The rules of `idle-reclaim` on small hand-made cycles.

use super::*;
use gantry_sdk::gpu_usage::{GPU_BUSY_LABEL, GPU_SAMPLED_SINCE_LABEL};
use gantry_sdk::{Gpu, GpuShare, Label, NodeState, TaskAllocation, TaskGroup};

const NOW: u64 = 10_000_000;
/// Symbols: 0 model, 1 queue "notebooks", 2 queue "batch", 3 and 4 the usage labels' keys;
/// values are pushed after.
fn ctx() -> Cycle {
    Cycle {
        now_ms: NOW,
        strings: vec![
            "fake".into(),
            "notebooks".into(),
            "batch".into(),
            GPU_SAMPLED_SINCE_LABEL.into(),
            GPU_BUSY_LABEL.into(),
        ],
        gpu_models: vec![0],
        ..Default::default()
    }
}

fn job(id: u64, queue: u32, gpus: u32, kind: JobKind) -> Job {
    Job {
        id,
        queue,
        kind,
        tasks: vec![TaskGroup {
            count: 1,
            gpus,
            cpu_milli: 100,
            memory_mib: 10,
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A running job on GPU `gpu`, sampled since `since_ms` with busy marks `busy` (`None`:
/// never sampled).
fn running(
    ctx: &mut Cycle,
    id: u64,
    gpu: u32,
    kind: JobKind,
    usage: Option<(u64, &str)>,
) -> RunningJob {
    let mut j = job(id, 1, 1, kind);
    if let Some((since, busy)) = usage {
        for (key, value) in [(3, since.to_string()), (4, busy.to_string())] {
            ctx.strings.push(value);
            j.labels.push(Label {
                key,
                value: (ctx.strings.len() - 1) as u32,
            });
        }
    }
    RunningJob {
        job: j,
        tasks: vec![TaskAllocation {
            node: 0,
            gpus: vec![GpuShare {
                index: gpu,
                milli: 1000,
            }],
            cpu_milli: 100,
            memory_mib: 10,
        }],
        start_ms: 1,
        expected_end_ms: None,
        score: 0.0,
        revision: 0,
    }
}

fn full_node() -> Node {
    Node {
        id: 0,
        state: NodeState::Up,
        cpu_milli_total: 1000,
        cpu_milli_free: 600,
        memory_mib_total: 100,
        memory_mib_free: 60,
        gpus: (0..4)
            .map(|index| Gpu {
                index,
                model: 0,
                memory_mib: 1,
                free_milli: 0,
                healthy: true,
                parent: None,
            })
            .collect(),
        ..Default::default()
    }
}

/// Asks `plugin` what to evict for one blocked batch job 9 of queue symbol `queue` asking
/// `gpus` GPUs, on one full node running `run`.
trait EvictionsFor {
    fn evictions_for(
        &mut self,
        c: &Cycle,
        queue: u32,
        gpus: u32,
        run: &[RunningJob],
    ) -> Vec<Eviction>;
}

impl EvictionsFor for IdleReclaim {
    fn evictions_for(
        &mut self,
        c: &Cycle,
        queue: u32,
        gpus: u32,
        run: &[RunningJob],
    ) -> Vec<Eviction> {
        self.preempt(
            c,
            &[job(9, queue, gpus, JobKind::Batch)],
            &[0.0],
            &[full_node()],
            run,
        )
        .unwrap()
    }
}

fn configured(json: &str) -> IdleReclaim {
    let mut p = IdleReclaim::default();
    p.configure(json).unwrap();
    p
}

const HOUR: u64 = 3_600_000;
/// Marks of a job whose every sample was 0 %, the latest now.
const IDLE_NOW: &str = "0@10000000";

#[test]
fn the_longest_idle_interactive_jobs_of_the_queue_go_first_and_busy_ones_stay() {
    let mut c = ctx();
    // 1: idle two hours; 2: busy (80 % a minute ago); 3: idle one hour; 4: batch, idle.
    let run = [
        running(
            &mut c,
            1,
            0,
            JobKind::Interactive,
            Some((NOW - 2 * HOUR, IDLE_NOW)),
        ),
        running(
            &mut c,
            2,
            1,
            JobKind::Interactive,
            Some((NOW - 2 * HOUR, "80@9940000")),
        ),
        running(
            &mut c,
            3,
            2,
            JobKind::Interactive,
            Some((NOW - 2 * HOUR, &format!("3@{},60@{}", NOW, NOW - HOUR))),
        ),
        running(
            &mut c,
            4,
            3,
            JobKind::Batch,
            Some((NOW - 2 * HOUR, IDLE_NOW)),
        ),
    ];
    let mut p = IdleReclaim::default();
    let ev = p.evictions_for(&c, 1, 2, &run);
    let ids: Vec<u64> = ev.iter().map(|e| e.job).collect();
    assert_eq!(ids, vec![1, 3], "two idle notebooks make room for two GPUs");
    assert!(
        ev.iter()
            .all(|e| e.for_job == 9 && e.grace_s == 60 && e.warn_s == 300)
    );
    assert!(
        ev[0].reason.message.contains("below 5% for 120 min"),
        "{}",
        ev[0].reason.message
    );
    // One GPU more than the idle jobs hold: nothing is evicted in vain.
    let ev = p.evictions_for(&c, 1, 3, &run);
    assert!(ev.is_empty(), "{ev:?}");
}

#[test]
fn within_the_window_unmeasured_or_busy_now_a_job_stays() {
    let mut c = ctx();
    let run = [
        // Idle only 10 minutes.
        running(
            &mut c,
            1,
            0,
            JobKind::Interactive,
            Some((NOW - 10 * 60_000, IDLE_NOW)),
        ),
        // Never sampled.
        running(&mut c, 2, 1, JobKind::Interactive, None),
        // Busy at its latest sample, though idle below 5 % long before.
        running(
            &mut c,
            3,
            2,
            JobKind::Interactive,
            Some((NOW - 2 * HOUR, &format!("40@{NOW}"))),
        ),
    ];
    let ev = IdleReclaim::default().evictions_for(&c, 1, 1, &run);
    assert!(ev.is_empty(), "{ev:?}");
}

#[test]
fn rules_are_per_queue() {
    let mut c = ctx();
    let run = [running(
        &mut c,
        1,
        0,
        JobKind::Interactive,
        Some((NOW - 2 * HOUR, IDLE_NOW)),
    )];
    // The blocked job is of another queue: the notebook's GPU is not taken for it.
    let ev = IdleReclaim::default().evictions_for(&c, 2, 1, &run);
    assert!(ev.is_empty());
    // A rule for "notebooks" only with a window of three hours keeps it.
    let mut p = configured(r#"{"rules": [{"queue": "notebooks", "window_s": 10800}]}"#);
    let ev = p.evictions_for(&c, 1, 1, &run);
    assert!(ev.is_empty());
    let mut p = configured(
        r#"{"rules": [{"queue": "notebooks", "window_s": 60, "grace_s": 5, "warn_s": 30, "threshold_percent": 2}]}"#,
    );
    let ev = p.evictions_for(&c, 1, 1, &run);
    assert_eq!((ev.len(), ev[0].grace_s, ev[0].warn_s), (1, 5, 30));
}

#[test]
fn bad_config_is_refused_with_the_field() {
    let mut p = IdleReclaim::default();
    for (json, field) in [
        (
            r#"{"rules": [{"threshold_percent": 50}]}"#,
            "threshold_percent",
        ),
        (
            r#"{"rules": [{"threshold_percent": 0}]}"#,
            "threshold_percent",
        ),
        (r#"{"rules": [{"kinds": []}]}"#, "kinds"),
        (r#"{"rules": [{"warn_s": 3601}]}"#, "warn_s"),
        (r#"{"rules": [{"kinds": ["notebook"]}]}"#, "notebook"),
        (r#"{"rule": []}"#, "rule"),
    ] {
        let err = p.configure(json).unwrap_err();
        assert!(err.contains(field), "{json}: {err}");
    }
}
