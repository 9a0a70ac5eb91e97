//! The numbering over the real job table: a job keeps its number while its record, the
//! GPU models and its nodes' numbers stay as they were, and never keeps it otherwise
//! (two snapshots that give a job the same number show it the same, text for text).

#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use crate::accounting::Ledger;
use crate::jobs_in_memory::JobsInMemory;
use crate::snapshot;
use gantry_api::model::{GpuShareView, JobSpec, JobState, TaskRecord};
use gantry_contract as c;
use gantry_node::inventory::{GpuInfo, NodeInfo};

fn node(name: &str, model: &str) -> NodeInfo {
    NodeInfo {
        name: name.into(),
        cpu_milli: 64_000,
        memory_mib: 65_536,
        gpus: (0..4)
            .map(|i| GpuInfo::configured(i, model, 1024))
            .collect(),
        labels: Default::default(),
        gpu_source: "config".into(),
    }
}

fn pending(id: u64) -> JobRecord {
    let mut spec: JobSpec =
        serde_json::from_value(serde_json::json!({"name": format!("j{id}"), "argv": ["true"]}))
            .unwrap();
    spec.validate().unwrap();
    JobRecord::new(id, spec, id)
}

fn running(id: u64, on: &str) -> JobRecord {
    let mut j = pending(id);
    j.state = JobState::Running;
    j.start_ms = Some(1);
    j.tasks = vec![TaskRecord {
        node: on.into(),
        gpus: vec![GpuShareView {
            index: 0,
            milli: 1000,
        }],
        cpu_milli: 1_000,
        memory_mib: 1_024,
        pid: Some(1),
        exit: None,
        started_ms: Some(1),
        ended_ms: None,
        usage: None,
        gpu_usage: None,
    }];
    j
}

/// A snapshot of `jobs` on `nodes`, numbered by `numbers`, as a cycle makes it.
fn numbered(
    jobs: &JobsInMemory,
    nodes: &[(c::NodeId, NodeInfo)],
    numbers: &mut JobNumbers,
) -> Snapshot {
    let records = jobs.shared_active();
    let list: Vec<(c::NodeId, &NodeInfo)> = nodes.iter().map(|(id, n)| (*id, n)).collect();
    let (mut snap, models) = snapshot::build_with_models(
        records.iter().map(|j| &**j),
        &list,
        1,
        1_000,
        &Ledger::new(3600.0),
    );
    let names: Vec<(c::NodeId, &str)> =
        nodes.iter().map(|(id, n)| (*id, n.name.as_str())).collect();
    numbers.number(&mut snap, &records, models.names(), &names);
    snap
}

fn revisions(snap: &Snapshot) -> Vec<(u64, u64)> {
    snap.pending
        .iter()
        .map(|j| (j.id, j.revision))
        .chain(snap.running.iter().map(|r| (r.job.id, r.revision)))
        .collect()
}

fn revision(snap: &Snapshot, id: u64) -> u64 {
    revisions(snap)
        .into_iter()
        .find(|(i, _)| *i == id)
        .map(|(_, r)| r)
        .unwrap()
}

#[test]
fn a_job_keeps_its_number_until_its_record_changes() {
    let mut jobs = JobsInMemory::default();
    jobs.insert(pending(1));
    jobs.insert(pending(2));
    jobs.insert(running(3, "a"));
    let nodes = vec![(0, node("a", "A100"))];
    let mut numbers = JobNumbers::default();
    let first = numbered(&jobs, &nodes, &mut numbers);
    assert!(
        revisions(&first).iter().all(|(_, r)| *r != 0),
        "every job numbered"
    );
    assert_eq!(
        revisions(&numbered(&jobs, &nodes, &mut numbers)),
        revisions(&first)
    );

    Arc::make_mut(jobs.slot_mut(1).unwrap()).tier = 5;
    let second = numbered(&jobs, &nodes, &mut numbers);
    assert_ne!(
        revision(&second, 1),
        revision(&first, 1),
        "a changed record"
    );
    assert_eq!(revision(&second, 2), revision(&first, 2));
    assert_eq!(revision(&second, 3), revision(&first, 3));

    // A walk over the running jobs that only reads changes nothing; one that writes does.
    assert_eq!(jobs.running_slots_mut().filter(|j| j.warned).count(), 0);
    let third = numbered(&jobs, &nodes, &mut numbers);
    assert_eq!(
        revision(&third, 3),
        revision(&first, 3),
        "a read is not a change"
    );
    for j in jobs.running_slots_mut() {
        Arc::make_mut(j).warned = true;
    }
    let fourth = numbered(&jobs, &nodes, &mut numbers);
    assert_ne!(
        revision(&fourth, 3),
        revision(&first, 3),
        "a write is a change"
    );
}

#[test]
fn a_new_gpu_model_or_node_number_renumbers_the_jobs() {
    let mut jobs = JobsInMemory::default();
    jobs.insert(pending(1));
    jobs.insert(running(2, "a"));
    let mut nodes = vec![(0, node("a", "A100"))];
    let mut numbers = JobNumbers::default();
    let first = numbered(&jobs, &nodes, &mut numbers);
    // Another model changes the table of mask bits.
    nodes.push((1, node("b", "H100")));
    let second = numbered(&jobs, &nodes, &mut numbers);
    for id in [1, 2] {
        assert_ne!(revision(&second, id), revision(&first, id));
    }
    assert_eq!(
        revisions(&numbered(&jobs, &nodes, &mut numbers)),
        revisions(&second)
    );
    // Node a under another number: the running job's allocation says another node.
    nodes[0].0 = 7;
    let third = numbered(&jobs, &nodes, &mut numbers);
    assert_ne!(revision(&third, 2), revision(&second, 2));
}

/// Everything a plugin sees of a job, with symbols as their text.
fn described(j: &c::Job, ctx: &c::Cycle) -> String {
    let labels: Vec<(&str, &str)> = j
        .labels
        .iter()
        .map(|l| (ctx.text(l.key), ctx.text(l.value)))
        .collect();
    format!(
        "{} {} {} {} {} {} {} {} {:?} {} {labels:?} {:?}",
        j.id,
        ctx.text(j.name),
        ctx.text(j.user),
        ctx.text(j.account),
        ctx.text(j.queue),
        j.tier,
        j.submit_ms,
        j.time_limit_s,
        j.kind,
        j.preemptible,
        j.tasks
    )
}

struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn a_number_seen_twice_always_shows_the_same_job() {
    let mut rng = Lcg(7);
    let mut jobs = JobsInMemory::default();
    let mut nodes = vec![(0, node("a", "A100")), (1, node("b", "A100"))];
    let mut numbers = JobNumbers::default();
    let mut shown: HashMap<(u64, u64), String> = HashMap::new();
    let (mut kept, mut next_id) = (0, 1);
    for _ in 0..400 {
        match rng.below(8) {
            0 | 1 => {
                let mut j = if rng.below(2) == 0 {
                    pending(next_id)
                } else {
                    running(next_id, ["a", "b"][rng.below(2) as usize])
                };
                if rng.below(4) == 0 {
                    j.spec.tasks[0].gpu_models = vec![format!("M{}", rng.below(3))];
                }
                jobs.insert(j);
                next_id += 1;
            }
            2 => {
                let id = 1 + rng.below(next_id);
                if let Some(j) = jobs.slot_mut(id) {
                    Arc::make_mut(j).tier = rng.below(3) as i32;
                }
            }
            3 => {
                let id = 1 + rng.below(next_id);
                if let Some(j) = jobs.slot_mut(id) {
                    let j = Arc::make_mut(j);
                    j.state = JobState::Succeeded;
                    j.end_ms = Some(2);
                }
                jobs.settle();
            }
            4 => {
                let pick = rng.below(4);
                for (k, j) in jobs.running_slots_mut().enumerate() {
                    if k as u64 % 4 == pick {
                        Arc::make_mut(j).score += 1.0;
                    }
                }
            }
            5 => {
                let model = ["A100", "H100"][rng.below(2) as usize];
                let at = rng.below(2) as usize;
                nodes[at].1 = node(&nodes[at].1.name.clone(), model);
            }
            6 => nodes.reverse(),
            _ => {}
        }
        let snap = numbered(&jobs, &nodes, &mut numbers);
        let views = snap
            .pending
            .iter()
            .map(|j| ((j.id, j.revision), described(j, &snap.ctx)))
            .chain(snap.running.iter().map(|r| {
                let view = format!(
                    "{} {:?} {} {:?} {}",
                    described(&r.job, &snap.ctx),
                    r.tasks,
                    r.start_ms,
                    r.expected_end_ms,
                    r.score
                );
                ((r.job.id, r.revision), view)
            }));
        for (key, view) in views {
            assert_ne!(key.1, 0, "job {} not numbered", key.0);
            match shown.get(&key) {
                Some(before) => {
                    assert_eq!(before, &view, "number {} vouched for a change", key.1);
                    kept += 1;
                }
                None => {
                    shown.insert(key, view);
                }
            }
        }
    }
    assert!(kept > 1000, "numbers were kept only {kept} times");
}
