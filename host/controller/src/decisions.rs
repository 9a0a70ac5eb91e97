//! What a cycle decided about each job, in one comparable form: used for the per-job
//! decision log (`GET /v1/jobs/{id}/decisions`), for `gantry::decision` trace events,
//! and to compare a shadow or replayed pipeline with the live one.
//!
//! Owns: turning a `CycleOutcome` into per-job decisions and the bounded log. Does not
//! own the decisions themselves (the engine).

use gantry_engine::CycleOutcome;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Decisions kept per job.
const PER_JOB: usize = 50;

/// Jobs whose decisions are kept; beyond this, jobs no cycle decides about any more
/// (they ended) are forgotten.
const MAX_JOBS: usize = 100_000;

/// One decision about one job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// start, evict, hold (admission) or pending (placement).
    pub decision: &'static str,
    /// Reason code (for hold, pending, evict).
    pub reason_code: String,
    /// Human message, or the GPUs for a start.
    pub message: String,
    /// The plugin that decided.
    pub plugin: String,
}

impl Decision {
    /// Whether two decisions are the same for comparison (message wording aside).
    pub fn same_as(&self, other: &Decision) -> bool {
        self.decision == other.decision
            && self.reason_code == other.reason_code
            && (self.decision != "start" || self.message == other.message)
    }

    /// One-line text, e.g. "start on GPUs [0,1]" or "pending: insufficient-gpus".
    pub fn summary(&self) -> String {
        match self.decision {
            "start" => format!("start on {}", self.message),
            d => format!("{d}: {}", self.reason_code),
        }
    }
}

/// Every job's decision in `out`.
pub fn of(out: &CycleOutcome) -> BTreeMap<u64, Decision> {
    let mut map = BTreeMap::new();
    for s in &out.starts {
        let gpus: Vec<String> = s
            .tasks
            .iter()
            .map(|t| {
                let idx: Vec<String> = t
                    .gpus
                    .iter()
                    .map(|g| {
                        if g.milli == 1000 {
                            g.index.to_string()
                        } else {
                            format!("{}:{}m", g.index, g.milli)
                        }
                    })
                    .collect();
                format!("node {} GPUs [{}]", t.node, idx.join(","))
            })
            .collect();
        map.insert(
            s.job,
            Decision {
                decision: "start",
                reason_code: String::new(),
                message: gpus.join("; "),
                plugin: s.placed_by.clone(),
            },
        );
    }
    for (job, r) in &out.pending {
        let decision = if r.stage == gantry_contract::Stage::Admission {
            "hold"
        } else {
            "pending"
        };
        map.insert(
            *job,
            Decision {
                decision,
                reason_code: r.code.as_str().to_string(),
                message: r.message.clone(),
                plugin: r.plugin.clone(),
            },
        );
    }
    for e in &out.evictions {
        map.insert(
            e.job,
            Decision {
                decision: "evict",
                reason_code: e.reason.code.as_str().to_string(),
                message: e.reason.message.clone(),
                plugin: String::new(),
            },
        );
    }
    map
}

/// A logged decision.
#[derive(Debug, Clone, Serialize)]
pub struct LoggedDecision {
    /// The cycle that made it.
    pub cycle: u64,
    /// When, ms since the Unix epoch.
    pub at_ms: u64,
    /// The decision.
    #[serde(flatten)]
    pub decision: Decision,
}

/// Recent decisions per job; a decision is logged when it differs from the job's last
/// ([`Decision::same_as`]); one that differs only in wording updates the last one's message.
#[derive(Debug, Default)]
pub struct DecisionLog {
    by_job: HashMap<u64, VecDeque<LoggedDecision>>,
}

impl DecisionLog {
    /// Records the decisions of a cycle; returns the ones that changed (to trace), each
    /// with the kind of the job's previous decision.
    pub fn record(
        &mut self,
        cycle: u64,
        at_ms: u64,
        decisions: &BTreeMap<u64, Decision>,
    ) -> Vec<(u64, Decision, Option<&'static str>)> {
        let mut changed = Vec::new();
        if self.by_job.len() > MAX_JOBS {
            self.by_job.retain(|job, _| decisions.contains_key(job));
        }
        for (job, d) in decisions {
            let log = self.by_job.entry(*job).or_default();
            if let Some(last) = log.back_mut().filter(|last| last.decision.same_as(d)) {
                // The same decision in new words (a rank in priority order, a reservation's
                // time from now): the entry keeps its cycle and takes the latest wording. A
                // new entry (and a trace event) for each wording made a 10,000-job backlog
                // log and allocate 10,000 decisions a cycle, 50 kept per job.
                if last.decision.message != d.message {
                    last.decision.message.clone_from(&d.message);
                }
                continue;
            }
            let previous = log.back().map(|l| l.decision.decision);
            if log.len() >= PER_JOB {
                log.pop_front();
            }
            log.push_back(LoggedDecision {
                cycle,
                at_ms,
                decision: d.clone(),
            });
            changed.push((*job, d.clone(), previous));
        }
        changed
    }

    /// Takes the decisions about `job` out of the log (it leaves memory).
    pub fn take(&mut self, job: u64) -> Vec<LoggedDecision> {
        self.by_job.remove(&job).map(Vec::from).unwrap_or_default()
    }

    /// The recent decisions about `job`, oldest first.
    pub fn of_job(&self, job: u64) -> Vec<LoggedDecision> {
        self.by_job
            .get(&job)
            .map(|v| v.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// One job decided differently by two pipelines on the same snapshot.
#[derive(Debug, Clone, Serialize)]
pub struct Difference {
    /// The cycle (or recorded snapshot).
    pub cycle: u64,
    /// The job.
    pub job: u64,
    /// What the live pipeline decided.
    pub live: String,
    /// What the other pipeline decided.
    pub other: String,
    /// The live reason message.
    pub live_reason: String,
    /// The other reason message.
    pub other_reason: String,
}

/// Jobs decided differently in `a` (live) and `b` (candidate).
pub fn differences(
    cycle: u64,
    a: &BTreeMap<u64, Decision>,
    b: &BTreeMap<u64, Decision>,
) -> Vec<Difference> {
    let none = Decision {
        decision: "none",
        reason_code: String::new(),
        message: String::new(),
        plugin: String::new(),
    };
    let mut jobs: Vec<u64> = a.keys().chain(b.keys()).copied().collect();
    jobs.sort_unstable();
    jobs.dedup();
    jobs.into_iter()
        .filter_map(|job| {
            let (x, y) = (a.get(&job).unwrap_or(&none), b.get(&job).unwrap_or(&none));
            (!x.same_as(y)).then(|| Difference {
                cycle,
                job,
                live: x.summary(),
                other: y.summary(),
                live_reason: x.message.clone(),
                other_reason: y.message.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(code: &str, message: &str) -> Decision {
        Decision {
            decision: "pending",
            reason_code: code.to_string(),
            message: message.to_string(),
            plugin: "backfill".to_string(),
        }
    }

    #[test]
    fn a_decision_in_new_words_updates_the_last_entry_and_a_new_decision_is_logged() {
        let mut log = DecisionLog::default();
        for (cycle, rank) in [(1, 1200), (2, 1100), (3, 1000)] {
            let wording = format!("not tested this cycle: this job is number {rank}");
            let changed = log.record(
                cycle,
                cycle * 10,
                &BTreeMap::from([(7, pending("other", &wording))]),
            );
            assert_eq!(changed.len(), usize::from(cycle == 1), "cycle {cycle}");
        }
        let kept = log.of_job(7);
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(
            kept[0].cycle, 1,
            "the entry keeps the cycle that first decided it"
        );
        assert!(
            kept[0].decision.message.ends_with("number 1000"),
            "{kept:?}"
        );

        let changed = log.record(
            4,
            40,
            &BTreeMap::from([(7, pending("insufficient-gpus", "needs 8 GPUs"))]),
        );
        assert_eq!(changed.len(), 1);
        assert_eq!(changed[0].2, Some("pending"));
        let kept = log.of_job(7);
        assert_eq!(kept.len(), 2, "{kept:?}");
        assert_eq!(kept[1].decision.reason_code, "insufficient-gpus");
    }
}
