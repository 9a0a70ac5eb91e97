//! The policy manager: the live pipeline, its fallback, the pipeline history and the
//! shadow candidate, behind one type whose fields are private. The scheduler asks it to
//! decide a cycle or a submission and to make a built pipeline live; it keeps the rules
//! that tie these together (which pipeline becomes the fallback, when the live one has
//! proved itself, what the shadow sees).
//!
//! Owns: the plugin registry in use, the live and fallback pipelines, the active version
//! and the history of activations, the shadow. Does not own building a pipeline from a
//! spec (`policy::Registry`), the swap protocol's dry run and storage (`policy_ops`), the
//! decisions themselves (`gantry-engine` and the plugins) or applying them (`apply`).

use super::decisions::{self, Decision};
use super::nodes;
use super::shadow::{ShadowState, ShadowView};
use gantry_contract::{Cycle, Job};
use gantry_engine::{CycleOutcome, FaultRecord, Pipeline, Snapshot, SubmitDecision};
use gantry_policy::{PipelineVersion, Registry};
use std::collections::BTreeMap;

/// The pipelines of the scheduler and their history.
pub(crate) struct PolicyManager {
    registry: Registry,
    /// A candidate pipeline run beside the live one, never applied.
    shadow: Option<ShadowState>,
    live: Pipeline,
    /// Whether the live pipeline's last cycle that decided something had no fault.
    live_good: bool,
    /// Answers for a stage whose live plugin fails: the last good pipeline (the one
    /// live before the latest swap, if it had proved itself), else the built-in default.
    fallback: Pipeline,
    /// Version of the fallback pipeline (`None`: the built-in default).
    fallback_version: Option<u64>,
    active: PipelineVersion,
    history: Vec<PipelineVersion>,
}

impl PolicyManager {
    /// `live` (version `active`) in front of `fallback` (the built-in default), with the
    /// stored `history` of activations.
    pub(crate) fn new(
        registry: Registry,
        live: Pipeline,
        active: PipelineVersion,
        fallback: Pipeline,
        history: Vec<PipelineVersion>,
    ) -> Self {
        Self {
            registry,
            shadow: None,
            live,
            live_good: false,
            fallback,
            fallback_version: None,
            active,
            history,
        }
    }

    /// The plugins that pipelines are built from.
    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Replaces the registry (after an upload registered a plugin in a copy of it).
    pub(crate) fn set_registry(&mut self, registry: Registry) {
        self.registry = registry;
    }

    /// The live pipeline's admission chain on a new job.
    pub(crate) fn check_submit(
        &mut self,
        ctx: &Cycle,
        job: &Job,
    ) -> (SubmitDecision, Vec<FaultRecord>) {
        gantry_engine::check_submit(ctx, job, &mut self.live)
    }

    /// One cycle's decisions on `snap`: the live pipeline with the fallback behind it
    /// (`drain_note` prefixes the pending reasons when nodes are drained), then the shadow
    /// observes the same snapshot. Returns the outcome and its decisions by job.
    pub(crate) fn decide(
        &mut self,
        snap: &Snapshot,
        drain_note: Option<&str>,
    ) -> (CycleOutcome, BTreeMap<u64, Decision>) {
        let mut outcome = gantry_engine::run_cycle(snap, &mut self.live, Some(&mut self.fallback));
        if let Some(note) = drain_note {
            nodes::annotate_pending(&mut outcome, note);
        }
        if !outcome.faults.is_empty() {
            self.live_good = false;
        } else if !outcome.order.is_empty() {
            self.live_good = true;
        }
        let live = decisions::of(&outcome);
        if let Some(sh) = self.shadow.as_mut() {
            let _shadow = tracing::info_span!("shadow_cycle", cycle_id = snap.ctx.id).entered();
            sh.observe(snap, &live);
        }
        (outcome, live)
    }

    /// The live pipeline's quarantined slots, as `stage:plugin`.
    pub(crate) fn quarantined(&self) -> Vec<String> {
        let live = &self.live;
        let mut out = Vec::new();
        for s in live.admission.iter().filter(|s| s.quarantined()) {
            out.push(format!("admission:{}", s.plugin.ident().name));
        }
        for s in live.priority.iter().filter(|s| s.quarantined()) {
            out.push(format!("priority:{}", s.plugin.ident().name));
        }
        if live.placement.quarantined() {
            out.push(format!("placement:{}", live.placement.plugin.ident().name));
        }
        if let Some(s) = live.preemption.as_ref().filter(|s| s.quarantined()) {
            out.push(format!("preemption:{}", s.plugin.ident().name));
        }
        out
    }

    /// The version live now.
    pub(crate) fn active(&self) -> &PipelineVersion {
        &self.active
    }

    /// The fallback's version (`None`: the built-in default).
    pub(crate) fn fallback_version(&self) -> Option<u64> {
        self.fallback_version
    }

    /// Every activation, oldest first.
    pub(crate) fn history(&self) -> &[PipelineVersion] {
        &self.history
    }

    /// The number the next activation gets.
    pub(crate) fn next_version(&self) -> u64 {
        self.history.last().map_or(1, |v| v.version + 1)
    }

    /// Makes `candidate` (recorded as `active`) live. The pipeline it replaces becomes the
    /// fallback if it has proved itself (a cycle that decided something without a fault).
    pub(crate) fn make_live(&mut self, candidate: Pipeline, active: PipelineVersion) {
        let previous = std::mem::replace(&mut self.live, candidate);
        if std::mem::take(&mut self.live_good) {
            self.fallback = previous;
            self.fallback_version = Some(self.active.version);
        }
        self.history.push(active.clone());
        self.active = active;
    }

    /// Runs `shadow` beside the live pipeline from the next cycle on (replacing any).
    pub(crate) fn set_shadow(&mut self, shadow: ShadowState) {
        self.shadow = Some(shadow);
    }

    /// Stops the shadow; its final comparison.
    pub(crate) fn take_shadow(&mut self) -> Option<ShadowView> {
        self.shadow.take().map(|s| s.view())
    }

    /// The shadow's comparison so far.
    pub(crate) fn shadow_view(&self) -> Option<ShadowView> {
        self.shadow.as_ref().map(ShadowState::view)
    }
}
