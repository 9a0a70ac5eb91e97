//! Node control: drain and resume (an operator's "take nothing new here", like SLURM's
//! `scontrol update state=drain`), GPU health found after start, and how both reach
//! each cycle's snapshot.
//!
//! A drained node stays in the snapshot with state `Draining` (not left out): running
//! jobs keep their allocations on it, so what is free and what eviction would free
//! stay right, while the contract's `ClusterModel` (used by every placement plugin and
//! by the host's plan validator) refuses any booking on a node that is not `Up`. An
//! unhealthy GPU is `healthy: false` in the snapshot, which `ClusterModel` skips and
//! the validator refuses. The drain outlives restarts (a store meta key per node);
//! health is read again at every start (NVML or `[node] unhealthy_gpus`).
//!
//! Owns: draining and resuming (the records themselves are `node_control.rs`'s), and the
//! drain's note in pending reasons; GPU faults are recorded by `gpu_health.rs`. Does not own discovery (`inventory`), the health rules
//! (`inventory::health`) or HTTP (`api::nodes`).

use super::members::Members;
use super::node_control::{NodeControl, drain_key};
use super::{Scheduler, lock, now_ms};
use gantry_api::views::DrainView;
use gantry_api::views::NodeView;
use gantry_contract::Stage;
use gantry_engine::{CycleOutcome, Snapshot};
use gantry_store::StoreError;

/// MIG slices gone from a node: (slice index, why).
pub(crate) type VanishedSlices = Vec<(u32, String)>;

/// Longest drain reason, in bytes.
pub const MAX_REASON: usize = 256;

/// Why a drain or resume was refused.
#[derive(Debug, thiserror::Error)]
pub enum NodeOpError {
    /// No node of that name.
    #[error("node {asked} does not exist (nodes: {known})")]
    NotFound {
        /// The name asked for.
        asked: String,
        /// The nodes there are.
        known: String,
    },
    /// The reason is missing, too long or not printable.
    #[error("reason: {0}")]
    Reason(String),
    /// The node cannot be forgotten now.
    #[error("{0}")]
    Busy(String),
    /// The store failed; nothing changed.
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// The trimmed reason, or why it is refused.
pub fn check_reason(reason: &str) -> Result<String, String> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err("a drain needs a reason (e.g. \"replacing a fan\")".into());
    }
    if reason.len() > MAX_REASON {
        return Err(format!(
            "longer than {MAX_REASON} bytes ({} given)",
            reason.len()
        ));
    }
    if reason.chars().any(char::is_control) {
        return Err("control characters are not allowed".into());
    }
    Ok(reason.to_string())
}

/// The note put before pending reasons while `node` is drained.
fn drain_note(node: &str, d: &DrainView) -> String {
    format!(
        "node {node} is drained (by {}: {}); no new job starts there",
        d.by, d.reason
    )
}

/// Puts `note` before the reason of every job left pending after admission (which
/// holds jobs for its own reasons, drain or not).
pub fn annotate_pending(outcome: &mut CycleOutcome, note: &str) {
    for (_, r) in &mut outcome.pending {
        if r.stage != Stage::Admission && !r.message.starts_with(note) {
            r.message = format!("{note}: {}", r.message);
        }
    }
}

impl Scheduler {
    fn check_node(&self, name: &str) -> Result<(), NodeOpError> {
        let members = lock(&self.inner.members);
        if members.by_name(name).is_some() {
            return Ok(());
        }
        Err(NodeOpError::NotFound {
            asked: name.chars().take(MAX_REASON).collect(),
            known: members.names().join(", "),
        })
    }

    /// Drains `name`: running jobs continue, nothing new starts there. Draining a
    /// drained node replaces its reason and keeps its start time.
    pub(crate) fn drain(
        &self,
        name: &str,
        reason: &str,
        by: &str,
    ) -> Result<NodeView, NodeOpError> {
        self.check_node(name)?;
        let reason = check_reason(reason).map_err(NodeOpError::Reason)?;
        let since_ms = self
            .with_control(name, |c| c.drain.as_ref().map(|d| d.since_ms))
            .flatten()
            .unwrap_or_else(now_ms);
        let record = DrainView {
            reason,
            by: by.to_string(),
            since_ms,
        };
        let store = &self.inner.store;
        store.set_meta(&drain_key(name), &Some(&record))?;
        store.flush()?;
        let message = format!("node {name} drained by {by}: {}", record.reason);
        tracing::warn!("{message}");
        let _ = store.event(now_ms(), None, "node", message);
        self.with_control(name, |c| c.drain = Some(record));
        self.wake();
        self.node_view(name).ok_or_else(|| self.not_found(name))
    }

    /// Resumes `name`: new jobs may start there again (a node that is not drained is
    /// left as it is).
    pub(crate) fn resume(&self, name: &str, by: &str) -> Result<NodeView, NodeOpError> {
        self.check_node(name)?;
        let was = self.with_control(name, |c| c.drain.clone()).flatten();
        if let Some(d) = was {
            let store = &self.inner.store;
            store.set_meta(&drain_key(name), &None::<DrainView>)?;
            store.flush()?;
            let message = format!("node {name} resumed by {by} (was drained: {})", d.reason);
            tracing::warn!("{message}");
            let _ = store.event(now_ms(), None, "node", message);
            self.with_control(name, |c| c.drain = None);
            self.wake();
        }
        self.node_view(name).ok_or_else(|| self.not_found(name))
    }

    fn not_found(&self, name: &str) -> NodeOpError {
        NodeOpError::NotFound {
            asked: name.chars().take(MAX_REASON).collect(),
            known: lock(&self.inner.members).names().join(", "),
        }
    }

    /// Sets the MIG layout of GPU `gpu` of node `name` (its watcher saw it change): the
    /// slices gone, and the node's GPUs now.
    pub(crate) fn set_mig_layout(
        &self,
        name: &str,
        gpu: u32,
        devices: Vec<gantry_api::node::MigDevice>,
    ) -> Option<(VanishedSlices, Vec<gantry_api::node::GpuInfo>)> {
        let mut members = lock(&self.inner.members);
        let m = members.by_name_mut(name)?;
        let before = m.info.clone();
        let g = m.info.gpus.iter_mut().find(|g| g.index == gpu)?;
        g.mig_devices = devices;
        let gone = gantry_api::mig::vanished_slices(&before, &m.info);
        Some((gone, m.info.gpus.clone()))
    }

    /// Marks GPU `index` of node `name` healthy in its inventory (its node check passed).
    pub(crate) fn set_gpu_healthy(&self, name: &str, index: u32) {
        let mut members = lock(&self.inner.members);
        if let Some(g) = members
            .by_name_mut(name)
            .and_then(|m| m.info.gpus.iter_mut().find(|g| g.index == index))
        {
            g.healthy = true;
            g.unhealthy_reason = None;
        }
    }

    /// Runs `f` on the drain and health of node `name`, if there is such a node.
    pub(crate) fn with_control<R>(
        &self,
        name: &str,
        f: impl FnOnce(&mut NodeControl) -> R,
    ) -> Option<R> {
        lock(&self.inner.members)
            .by_name_mut(name)
            .map(|m| f(&mut m.control))
    }
}

/// Applies each node's drain and GPU health to a cycle's snapshot; returns the note for
/// pending reasons while nodes are drained.
pub(crate) fn apply_node_control(members: &Members, snap: &mut Snapshot) -> Option<String> {
    let mut notes = Vec::new();
    for n in &mut snap.nodes {
        if let Some(m) = members.get(n.id) {
            m.control.apply_to(n);
            if let Some(d) = &m.control.drain {
                notes.push(drain_note(&m.info.name, d));
            }
        }
    }
    (!notes.is_empty()).then(|| notes.join("; "))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::snapshot::{self, LOCAL_NODE};
    use gantry_contract as c;
    use gantry_engine::{Interner, PendingReason};
    use gantry_node::inventory::{GpuInfo, NodeInfo};

    fn node() -> (c::Cycle, c::Node) {
        let info = NodeInfo {
            name: "n1".into(),
            cpu_milli: 4000,
            memory_mib: 4096,
            gpus: (0..2)
                .map(|i| GpuInfo::configured(i, "fake", 1024))
                .collect(),
            labels: Default::default(),
            gpu_source: "config".into(),
        };
        let mut strings = Interner::new();
        let n = snapshot::node_view(LOCAL_NODE, &info, &mut strings, &[]);
        (c::Cycle::default(), n)
    }

    fn one_gpu() -> c::TaskGroup {
        c::TaskGroup {
            count: 1,
            gpus: 1,
            cpu_milli: 100,
            memory_mib: 64,
            ..Default::default()
        }
    }

    #[test]
    fn the_engine_places_nothing_on_a_drained_node() {
        let (ctx, mut n) = node();
        let fits = |n: &c::Node| {
            c::ClusterModel::new(&ctx, std::slice::from_ref(n)).fit_task(&one_gpu(), LOCAL_NODE)
        };
        assert!(fits(&n).is_some());
        let ctl = NodeControl {
            drain: Some(DrainView {
                reason: "fan".into(),
                by: "olga".into(),
                since_ms: 1,
            }),
            ..Default::default()
        };
        ctl.apply_to(&mut n);
        assert_eq!(n.state, c::NodeState::Draining);
        assert!(fits(&n).is_none());
    }

    #[test]
    fn an_unhealthy_gpu_is_skipped_and_the_last_healthy_one_is_used() {
        let (ctx, mut n) = node();
        let mut ctl = NodeControl::default();
        ctl.gpu_faults.insert(
            0,
            gantry_api::views::GpuFaultView {
                reason: "2 uncorrected volatile ECC error(s)".into(),
                since_ms: 1,
                check: None,
            },
        );
        ctl.apply_to(&mut n);
        let mut model = c::ClusterModel::new(&ctx, &[n]);
        let alloc = model.fit_task(&one_gpu(), LOCAL_NODE).unwrap();
        assert_eq!(alloc.gpus[0].index, 1);
        model.take(&one_gpu(), &alloc).unwrap();
        assert!(model.fit_task(&one_gpu(), LOCAL_NODE).is_none());
    }

    #[test]
    fn reasons_are_checked_and_pending_reasons_name_the_drain() {
        assert_eq!(check_reason("  fan  ").unwrap(), "fan");
        assert!(check_reason(" ").unwrap_err().contains("needs a reason"));
        assert!(
            check_reason(&"x".repeat(MAX_REASON + 1))
                .unwrap_err()
                .contains("longer")
        );
        assert!(check_reason("a\nb").is_err());
        let pending = |stage| PendingReason {
            stage,
            code: c::ReasonCode::InsufficientGpus,
            message: "needs 1 GPUs".into(),
            plugin: "first-fit".into(),
            priority_note: None,
        };
        let mut outcome = CycleOutcome {
            pending: vec![
                (1, pending(Stage::Placement)),
                (2, pending(Stage::Admission)),
            ],
            ..Default::default()
        };
        let d = DrainView {
            reason: "fan".into(),
            by: "olga".into(),
            since_ms: 1,
        };
        let note = drain_note("n1", &d);
        annotate_pending(&mut outcome, &note);
        annotate_pending(&mut outcome, &note);
        assert_eq!(
            outcome.pending[0].1.message,
            "node n1 is drained (by olga: fan); no new job starts there: needs 1 GPUs"
        );
        assert_eq!(outcome.pending[1].1.message, "needs 1 GPUs");
    }
}
