//! Host-side holds, decided before each cycle's snapshot: a pending job its user held
//! (`job_control.rs`) waits until released; one with a begin time (`sbatch --begin`) waits
//! until then; a pending job whose dependencies
//! have not ended as asked waits (its reason names the dependency), one whose dependencies
//! can never be met is cancelled with a reason, and an array member waits while its array
//! already runs as many members as its `%N` allows. Held jobs are left out of the snapshot,
//! so no plugin can start them.
//!
//! Owns: these rules. Does not own policy (plugins) or the job's other transitions.

use super::job_edit::Annotation;
use super::job_table::JobTable;
use super::transition::Transition;
use super::transition::host_reason;
use super::{Scheduler, now_ms};
use gantry_api::model::job_options::{Dependency, DependencyKind};
use gantry_api::model::{JobRecord, JobState};
use gantry_contract::ReasonCode;
use std::collections::{BTreeMap, BTreeSet};

/// What to do with a pending job before the cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Hold {
    /// Leave it out of this cycle, with this reason.
    Wait(String),
    /// Its dependencies can never be met: cancel it with this reason.
    Never(String),
}

/// The reason of a job that waits for its begin time (the same text every cycle).
fn begin_reason(begin_ms: Option<u64>) -> String {
    let at = begin_ms
        .and_then(|ms| i64::try_from(ms).ok())
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map_or_else(|| "-".to_string(), |t| t.to_string());
    format!("waits for its begin time {at} (--begin)")
}

/// Holds of every pending job that has one, at `now` (ms since the epoch).
pub(crate) fn evaluate(jobs: &JobTable, now: u64) -> BTreeMap<u64, Hold> {
    let mut holds = BTreeMap::new();
    let mut members: BTreeMap<u64, Vec<&JobRecord>> = BTreeMap::new();
    for j in jobs.active() {
        if let Some(a) = j.array {
            members.entry(a.array_id).or_default().push(j);
        }
    }
    for j in jobs.active().filter(|j| j.state == JobState::Pending) {
        match (dependency_hold(j, jobs, &members), &j.held_by) {
            (Some(never @ Hold::Never(_)), _) => {
                holds.insert(j.id, never);
            }
            (_, Some(by)) => {
                let release = format!("held by {by}; `gantry release {}` lets it start", j.id);
                holds.insert(j.id, Hold::Wait(release));
            }
            (_, None) if j.spec.begin_ms.is_some_and(|at| at > now) => {
                holds.insert(j.id, Hold::Wait(begin_reason(j.spec.begin_ms)));
            }
            (Some(wait), None) => {
                holds.insert(j.id, wait);
            }
            (None, None) => {}
        }
    }
    for (array_id, list) in &members {
        let Some(max) = list
            .first()
            .and_then(|j| j.array)
            .and_then(|a| a.max_running)
        else {
            continue;
        };
        let running = list.iter().filter(|j| j.state == JobState::Running).count();
        let mut room = (max as usize).saturating_sub(running);
        for j in list.iter().filter(|j| j.state == JobState::Pending) {
            if holds.contains_key(&j.id) {
                continue;
            }
            if room > 0 {
                room -= 1;
            } else {
                holds.insert(
                    j.id,
                    Hold::Wait(format!(
                        "array {array_id} runs at most {max} members at once ({running} running)"
                    )),
                );
            }
        }
    }
    holds
}

/// The jobs a dependency names that are in memory: the job itself, or the members of
/// the array with that id.
fn targets_in_memory<'a>(
    d: &Dependency,
    jobs: &'a JobTable,
    members: &'a BTreeMap<u64, Vec<&'a JobRecord>>,
) -> Vec<&'a JobRecord> {
    match members.get(&d.job) {
        Some(list) => list.clone(),
        None => jobs.get(d.job).into_iter().collect(),
    }
}

fn dependency_hold(
    job: &JobRecord,
    jobs: &JobTable,
    members: &BTreeMap<u64, Vec<&JobRecord>>,
) -> Option<Hold> {
    let mut waiting = None;
    for d in &job.spec.dependencies {
        let kind = d.kind.as_str();
        // A target still running is in memory: only when none is does history matter.
        let near = targets_in_memory(d, jobs, members);
        if let Some(other) = near.iter().find(|o| !o.state.is_terminal()) {
            waiting.get_or_insert_with(|| {
                format!(
                    "waiting for dependency {kind}:{} (job {} is {})",
                    d.job,
                    other.id,
                    other.state.as_str()
                )
            });
            continue;
        }
        let list = match jobs.dependency_targets(d.job) {
            Ok(list) => list,
            Err(e) => {
                // The store could not be read: wait, and decide at a later cycle.
                waiting.get_or_insert_with(|| format!("cannot read dependency {}: {e}", d.job));
                continue;
            }
        };
        if list.is_empty() {
            return Some(Hold::Never(format!(
                "dependency {kind}:{} can never be satisfied: no such job",
                d.job
            )));
        }
        let unmet = list.iter().find(|o| {
            let ok = o.state == JobState::Succeeded;
            match d.kind {
                DependencyKind::Afterok => !ok,
                DependencyKind::Afternotok => ok,
                DependencyKind::Afterany => false,
            }
        });
        if let Some(o) = unmet {
            return Some(Hold::Never(format!(
                "dependency {kind}:{} can never be satisfied: job {} ended {}",
                d.job,
                o.id,
                o.state.as_str()
            )));
        }
    }
    waiting.map(Hold::Wait)
}

impl Scheduler {
    /// Applies this cycle's holds to the jobs: cancels those whose dependencies can never be
    /// met, records the reason of those that wait; returns the ids left out of the snapshot.
    pub(crate) fn apply_holds(&self, jobs: &mut JobTable) -> BTreeSet<u64> {
        let mut held = BTreeSet::new();
        for (id, hold) in evaluate(jobs, now_ms()) {
            let Some(mut job) = jobs.edit(id) else {
                continue;
            };
            match hold {
                Hold::Never(message) => {
                    let cancelled = Transition::CancelledPending {
                        end_reason: "dependency-never-satisfied".into(),
                        reason: host_reason(ReasonCode::Other, message.clone()),
                        at_ms: now_ms(),
                    };
                    if !job.apply_or_log(cancelled) {
                        continue;
                    }
                    job.write_or_log();
                    self.event(id, "cancelled", message.clone());
                    super::job_trace::job_event(id, "finished", 0, &message);
                }
                Hold::Wait(message) => {
                    held.insert(id);
                    // In memory only, like every pending reason (`apply.rs`).
                    if job.reason.as_ref().is_none_or(|r| r.message != message) {
                        let reason = host_reason(ReasonCode::HeldByPolicy, message);
                        job.annotate(Annotation::Reason(reason));
                    }
                }
            }
        }
        held
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use gantry_api::model::{ArrayMember, JobSpec};

    fn job(id: u64, state: JobState) -> JobRecord {
        let spec: JobSpec = serde_json::from_value(serde_json::json!({"argv": ["true"]})).unwrap();
        let mut j = JobRecord::new(id, spec, 0);
        j.state = state;
        j
    }

    fn with_dep(mut j: JobRecord, kind: DependencyKind, on: u64) -> JobRecord {
        j.spec.dependencies.push(Dependency { kind, job: on });
        j
    }

    fn map(list: Vec<JobRecord>) -> JobTable {
        JobTable::in_memory(list)
    }

    #[test]
    fn a_users_hold_waits_but_a_dependency_that_can_never_be_met_still_cancels() {
        let held = |mut j: JobRecord| {
            j.held_by = Some("alice".into());
            j
        };
        let jobs = map(vec![
            job(1, JobState::Failed),
            held(job(2, JobState::Pending)),
            held(with_dep(
                job(3, JobState::Pending),
                DependencyKind::Afterok,
                1,
            )),
            held(with_dep(
                job(4, JobState::Pending),
                DependencyKind::Afternotok,
                1,
            )),
        ]);
        let h = evaluate(&jobs, 0);
        assert!(
            matches!(&h[&2], Hold::Wait(m) if m.contains("held by alice") && m.contains("gantry release 2")),
            "{h:?}"
        );
        assert!(matches!(&h[&3], Hold::Never(_)), "{h:?}");
        assert!(
            matches!(&h[&4], Hold::Wait(m) if m.contains("held by alice")),
            "{h:?}"
        );
    }

    #[test]
    fn a_job_waits_for_its_begin_time_and_not_after_it() {
        let mut later = job(1, JobState::Pending);
        later.spec.begin_ms = Some(1_800_000_000_000);
        let jobs = map(vec![later]);
        let h = evaluate(&jobs, 1_799_999_999_999);
        assert_eq!(
            h[&1],
            Hold::Wait("waits for its begin time 2027-01-15T08:00:00Z (--begin)".into())
        );
        assert!(evaluate(&jobs, 1_800_000_000_000).is_empty());
    }

    #[test]
    fn dependencies_wait_then_release_or_never() {
        let jobs = map(vec![
            job(1, JobState::Running),
            with_dep(job(2, JobState::Pending), DependencyKind::Afterok, 1),
        ]);
        let h = evaluate(&jobs, 0);
        assert!(
            matches!(&h[&2], Hold::Wait(m) if m.contains("afterok:1")),
            "{h:?}"
        );

        let jobs = map(vec![
            job(1, JobState::Succeeded),
            with_dep(job(2, JobState::Pending), DependencyKind::Afterok, 1),
            with_dep(job(3, JobState::Pending), DependencyKind::Afternotok, 1),
            with_dep(job(4, JobState::Pending), DependencyKind::Afterany, 1),
        ]);
        let h = evaluate(&jobs, 0);
        assert!(!h.contains_key(&2) && !h.contains_key(&4), "{h:?}");
        assert!(
            matches!(&h[&3], Hold::Never(m) if m.contains("ended succeeded")),
            "{h:?}"
        );

        let jobs = map(vec![
            job(1, JobState::Failed),
            with_dep(job(2, JobState::Pending), DependencyKind::Afterok, 1),
            with_dep(job(3, JobState::Pending), DependencyKind::Afternotok, 1),
        ]);
        let h = evaluate(&jobs, 0);
        assert!(matches!(&h[&2], Hold::Never(_)), "{h:?}");
        assert!(!h.contains_key(&3), "{h:?}");
    }

    #[test]
    fn array_limit_lets_only_the_room_through() {
        let mut list = Vec::new();
        for (i, state) in [
            JobState::Running,
            JobState::Succeeded,
            JobState::Pending,
            JobState::Pending,
            JobState::Pending,
        ]
        .into_iter()
        .enumerate()
        {
            let mut j = job(10 + i as u64, state);
            j.array = Some(ArrayMember {
                array_id: 10,
                index: i as u32,
                max_running: Some(2),
                count: 0,
                min: 0,
                max: 0,
            });
            list.push(j);
        }
        // A dependency on the array means every member.
        list.push(with_dep(
            job(20, JobState::Pending),
            DependencyKind::Afterany,
            10,
        ));
        let h = evaluate(&map(list), 0);
        assert!(
            !h.contains_key(&12),
            "one slot left: the lowest pending member: {h:?}"
        );
        assert!(
            matches!(&h[&13], Hold::Wait(m) if m.contains("at most 2")),
            "{h:?}"
        );
        assert!(h.contains_key(&14));
        assert!(
            matches!(&h[&20], Hold::Wait(m) if m.contains("afterany:10")),
            "{h:?}"
        );
    }
}
