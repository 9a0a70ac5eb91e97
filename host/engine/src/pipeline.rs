//! A pipeline: which plugin runs at each stage, behind stage traits whose errors are
//! typed faults. A stage trait here is the contract's trait (`sdk/contract/src/traits.rs`,
//! the one definition of each signature) with `E = PolicyFault`, plus [`Identified`]; the
//! wasm runtime, the native adapter and the daemon's wrapper implement those two, and the
//! cycle only sees the result.
//!
//! Owns: the fault taxonomy, plugin identity, per-plugin fault counting and quarantine.
//! Does not own: how a plugin is run (wasm or native) or what a fault costs (the cycle).

use gantry_contract::{Admission, Placement, Preemption, Priority, Stage};
use serde::{Deserialize, Serialize};

/// Consecutive faults after which a plugin is quarantined (its stage uses the fallback).
pub const QUARANTINE_AFTER: u32 = 3;

/// Which plugin made a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginIdent {
    /// Plugin name from its metadata.
    pub name: String,
    /// Plugin version from its metadata.
    pub version: String,
    /// sha256 of the component (hex), or "native" for in-process plugins.
    pub sha256: String,
}

/// Why a plugin call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// The guest trapped (panic, unreachable, uncaught exception).
    Trap,
    /// The call ran past its deadline.
    DeadlineExceeded,
    /// The guest hit its memory cap.
    MemoryLimit,
    /// The output broke the contract (wrong length, double booking, half a gang...).
    InvalidOutput,
    /// The component targets an incompatible contract version.
    VersionMismatch,
    /// The plugin returned an error.
    PluginError,
    /// The plugin is quarantined after repeated faults and was not called.
    Quarantined,
}

impl FaultKind {
    /// Kebab-case name, as in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Trap => "trap",
            Self::DeadlineExceeded => "deadline-exceeded",
            Self::MemoryLimit => "memory-limit",
            Self::InvalidOutput => "invalid-output",
            Self::VersionMismatch => "version-mismatch",
            Self::PluginError => "plugin-error",
            Self::Quarantined => "quarantined",
        }
    }
}

/// A failed plugin call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyFault {
    /// What kind of failure.
    pub kind: FaultKind,
    /// Details for people.
    pub message: String,
}

impl PolicyFault {
    /// Builds a fault.
    pub fn new(kind: FaultKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for PolicyFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind.as_str(), self.message)
    }
}

impl std::error::Error for PolicyFault {}

/// A fault as recorded by a cycle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultRecord {
    /// Stage of the failed call.
    pub stage: Stage,
    /// The plugin that failed.
    pub plugin: PluginIdent,
    /// What failed.
    pub fault: PolicyFault,
    /// Whether the stage's fallback produced the decision instead.
    pub fell_back: bool,
}

/// What the engine needs of every stage object besides its stage: who it is.
pub trait Identified {
    /// Which plugin this is.
    fn ident(&self) -> &PluginIdent;

    /// The engine refused the plugin's last answer (an invalid plan, a wrong count): a
    /// plugin that keeps state between calls (contract 0.2's mirror) is sent everything
    /// again next time. Nothing by default.
    fn answer_rejected(&mut self) {}
}

/// The admission stage as the engine calls it: `gantry_contract::Admission` failing with a
/// [`PolicyFault`], plus an identity. Implemented for every such type.
pub trait AdmissionStage: Admission<PolicyFault> + Identified + Send {}
impl<T: Admission<PolicyFault> + Identified + Send + ?Sized> AdmissionStage for T {}

/// The priority stage as the engine calls it (see [`AdmissionStage`]).
pub trait PriorityStage: Priority<PolicyFault> + Identified + Send {}
impl<T: Priority<PolicyFault> + Identified + Send + ?Sized> PriorityStage for T {}

/// The placement stage as the engine calls it (see [`AdmissionStage`]).
pub trait PlacementStage: Placement<PolicyFault> + Identified + Send {}
impl<T: Placement<PolicyFault> + Identified + Send + ?Sized> PlacementStage for T {}

/// The preemption stage as the engine calls it (see [`AdmissionStage`]).
pub trait PreemptionStage: Preemption<PolicyFault> + Identified + Send {}
impl<T: Preemption<PolicyFault> + Identified + Send + ?Sized> PreemptionStage for T {}

/// One plugin in a pipeline, with its fault history.
pub struct StageSlot<S: ?Sized> {
    /// The plugin.
    pub plugin: Box<S>,
    /// JSON config it was configured with (for display).
    pub config: String,
    /// Faults in a row; reset by a good call.
    pub consecutive_faults: u32,
    /// Faults since the pipeline was made.
    pub total_faults: u64,
}

impl<S: ?Sized> StageSlot<S> {
    /// Wraps a configured plugin.
    pub fn new(plugin: Box<S>, config: impl Into<String>) -> Self {
        Self {
            plugin,
            config: config.into(),
            consecutive_faults: 0,
            total_faults: 0,
        }
    }

    /// Whether the plugin is quarantined (too many faults in a row).
    pub fn quarantined(&self) -> bool {
        self.consecutive_faults >= QUARANTINE_AFTER
    }

    /// Records the outcome of a call.
    pub fn record<T>(&mut self, result: &Result<T, PolicyFault>) {
        match result {
            Ok(_) => self.consecutive_faults = 0,
            Err(_) => {
                self.consecutive_faults += 1;
                self.total_faults += 1;
            }
        }
    }
}

impl<S: ?Sized> std::fmt::Debug for StageSlot<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StageSlot")
            .field("config", &self.config)
            .field("consecutive_faults", &self.consecutive_faults)
            .finish_non_exhaustive()
    }
}

/// The plugins of each stage. Admission and priority are chains (possibly empty);
/// placement is required; preemption is optional.
#[derive(Debug)]
pub struct Pipeline {
    /// Admission chain: every plugin must admit.
    pub admission: Vec<StageSlot<dyn AdmissionStage>>,
    /// Priority chain: each sees the previous scores.
    pub priority: Vec<StageSlot<dyn PriorityStage>>,
    /// The placement plugin.
    pub placement: StageSlot<dyn PlacementStage>,
    /// The preemption plugin, if any.
    pub preemption: Option<StageSlot<dyn PreemptionStage>>,
}
