//! Safe policy operations: a shadow pipeline that runs beside the live one on every
//! cycle's snapshot without applying anything, and what-if replay of a candidate over
//! recorded snapshots. Both report where they would decide differently.
//!
//! Owns: shadow state, the snapshot recorder, and comparison. Does not own building
//! pipelines (`policy::Registry`) or running a cycle (`gantry-engine`).

use super::decisions::{self, Decision, Difference};
use super::policy_error::PolicyOpError;
use super::{Scheduler, lock, now_ms};
use gantry_engine::{Pipeline, Snapshot};
use gantry_policy::{PipelineSpec, ResolvedRef};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Differences kept for `GET /v1/policy/shadow/diff`.
const RECENT: usize = 200;

pub(crate) struct ShadowState {
    pipeline: Pipeline,
    spec: PipelineSpec,
    resolved: Vec<ResolvedRef>,
    since_ms: u64,
    cycles: u64,
    cycles_differing: u64,
    differences: u64,
    faults: u64,
    recent_faults: VecDeque<String>,
    recent: VecDeque<Difference>,
}

/// The shadow pipeline and how it compares with the live one.
#[derive(Debug, Clone, Serialize)]
pub struct ShadowView {
    /// The shadow's spec.
    pub spec: PipelineSpec,
    /// What it resolved to.
    pub resolved: Vec<ResolvedRef>,
    /// When it was set, ms since the Unix epoch.
    pub since_ms: u64,
    /// Cycles it ran.
    pub cycles: u64,
    /// Cycles where it decided something differently.
    pub cycles_differing: u64,
    /// Job decisions that differed, in all.
    pub differences: u64,
    /// Faults of the shadow's plugins (never affect the live cycle).
    pub faults: u64,
    /// The last few fault messages.
    pub recent_faults: Vec<String>,
    /// The most recent differences, oldest first.
    pub recent: Vec<Difference>,
}

impl ShadowState {
    pub(crate) fn view(&self) -> ShadowView {
        ShadowView {
            spec: self.spec.clone(),
            resolved: self.resolved.clone(),
            since_ms: self.since_ms,
            cycles: self.cycles,
            cycles_differing: self.cycles_differing,
            differences: self.differences,
            faults: self.faults,
            recent_faults: self.recent_faults.iter().cloned().collect(),
            recent: self.recent.iter().cloned().collect(),
        }
    }

    /// Runs the shadow on `snap` and compares with the live decisions.
    pub(crate) fn observe(&mut self, snap: &Snapshot, live: &BTreeMap<u64, Decision>) {
        let out = gantry_engine::run_cycle(snap, &mut self.pipeline, None);
        self.cycles += 1;
        for f in &out.faults {
            self.faults += 1;
            if self.recent_faults.len() >= 20 {
                self.recent_faults.pop_front();
            }
            self.recent_faults.push_back(format!(
                "cycle {}: {} at {}: {}",
                snap.ctx.id, f.plugin.name, f.stage, f.fault
            ));
        }
        let diffs = decisions::differences(snap.ctx.id, live, &decisions::of(&out));
        if !diffs.is_empty() {
            self.cycles_differing += 1;
            self.differences += diffs.len() as u64;
        }
        for d in diffs {
            if self.recent.len() >= RECENT {
                self.recent.pop_front();
            }
            self.recent.push_back(d);
        }
    }
}

/// Job views (pending and running) a kept cycle may hold on average: the recorder keeps at
/// most `record_snapshots` cycles and at most this many times as many views among them.
const VIEWS_PER_CYCLE: usize = 200;

/// Recent cycle snapshots with the live pipeline's decisions, for replay: the last `cap`
/// cycles with pending jobs, the oldest let go first while they hold more than
/// `cap * VIEWS_PER_CYCLE` job views in all (the newest is always kept). So what it holds
/// is bounded by the setting, not by how long the queue grows: a recorded job that ended
/// is forgotten with the cycles that saw it.
#[derive(Default)]
pub(crate) struct Recorder {
    cap: usize,
    /// Pending and running job views in `cycles`.
    views: usize,
    cycles: VecDeque<(Arc<Snapshot>, BTreeMap<u64, Decision>)>,
}

fn views(snap: &Snapshot) -> usize {
    snap.pending.len() + snap.running.len()
}

impl Recorder {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            cap,
            views: 0,
            cycles: VecDeque::new(),
        }
    }

    pub(crate) fn record(&mut self, snap: Arc<Snapshot>, live: BTreeMap<u64, Decision>) {
        if self.cap == 0 || snap.pending.is_empty() {
            return;
        }
        self.views += views(&snap);
        self.cycles.push_back((snap, live));
        let max_views = self.cap.saturating_mul(VIEWS_PER_CYCLE);
        while self.cycles.len() > self.cap || (self.views > max_views && self.cycles.len() > 1) {
            if let Some((old, _)) = self.cycles.pop_front() {
                self.views -= views(&old);
            }
        }
    }
}

/// The result of a what-if replay.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayReport {
    /// Recorded cycles replayed.
    pub cycles: u64,
    /// Cycles where the candidate decided differently.
    pub cycles_differing: u64,
    /// Job decisions that differed, in all.
    pub differences: u64,
    /// Faults of the candidate's plugins.
    pub faults: Vec<String>,
    /// The differences (at most 500), oldest first.
    pub details: Vec<Difference>,
}

impl Scheduler {
    /// Runs `spec` as a shadow beside the live pipeline from the next cycle on.
    pub(crate) fn set_shadow(&self, spec: PipelineSpec) -> Result<ShadowView, PolicyOpError> {
        let registry = lock(&self.inner.policy).registry().clone();
        let (pipeline, resolved) = registry.build(&spec, Some(&self.inner.store))?;
        let shadow = ShadowState {
            pipeline,
            spec,
            resolved,
            since_ms: now_ms(),
            cycles: 0,
            cycles_differing: 0,
            differences: 0,
            faults: 0,
            recent_faults: VecDeque::new(),
            recent: VecDeque::new(),
        };
        let view = shadow.view();
        lock(&self.inner.policy).set_shadow(shadow);
        self.wake();
        Ok(view)
    }

    /// Stops the shadow; returns its final comparison.
    pub(crate) fn clear_shadow(&self) -> Option<ShadowView> {
        lock(&self.inner.policy).take_shadow()
    }

    /// The shadow's comparison so far.
    pub(crate) fn shadow(&self) -> Option<ShadowView> {
        lock(&self.inner.policy).shadow_view()
    }

    /// Replays `spec` over the recorded snapshots of the last `since_s` seconds and
    /// compares its decisions with what the live pipeline decided then.
    pub(crate) fn replay(
        &self,
        spec: &PipelineSpec,
        since_s: u64,
    ) -> Result<ReplayReport, PolicyOpError> {
        let registry = lock(&self.inner.policy).registry().clone();
        let (mut candidate, _) = registry.build(spec, Some(&self.inner.store))?;
        let from = now_ms().saturating_sub(since_s.saturating_mul(1000));
        let recorded: Vec<(Arc<Snapshot>, BTreeMap<u64, Decision>)> = lock(&self.inner.recorder)
            .cycles
            .iter()
            .filter(|(s, _)| s.ctx.now_ms >= from)
            .cloned()
            .collect();
        let mut report = ReplayReport {
            cycles: 0,
            cycles_differing: 0,
            differences: 0,
            faults: Vec::new(),
            details: Vec::new(),
        };
        for (snap, live) in recorded {
            let out = gantry_engine::run_cycle(&snap, &mut candidate, None);
            report.cycles += 1;
            report.faults.extend(out.faults.iter().map(|f| {
                format!(
                    "cycle {}: {} at {}: {}",
                    snap.ctx.id, f.plugin.name, f.stage, f.fault
                )
            }));
            let diffs = decisions::differences(snap.ctx.id, &live, &decisions::of(&out));
            if !diffs.is_empty() {
                report.cycles_differing += 1;
                report.differences += diffs.len() as u64;
            }
            let room = 500usize.saturating_sub(report.details.len());
            report.details.extend(diffs.into_iter().take(room));
        }
        Ok(report)
    }
}

#[cfg(test)]
#[path = "shadow_tests.rs"]
mod tests;
