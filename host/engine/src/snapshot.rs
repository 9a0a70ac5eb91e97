//! The immutable input of one cycle, and the interner that builds its string table.
//!
//! Owns: [`Snapshot`] (context, pending jobs, nodes, running jobs, evictions under
//! way) and [`Interner`]. Does not own: where the data comes from (the daemon's store
//! and inventory, or the simulator's trace).

use gantry_contract::{Cycle, Job, JobId, Node, RunningJob, Symbol};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Interns strings into the symbols of one cycle's [`Cycle::strings`].
#[derive(Debug, Default, Clone)]
pub struct Interner {
    strings: Vec<String>,
    index: HashMap<String, Symbol>,
}

impl Interner {
    /// An empty interner.
    pub fn new() -> Self {
        Self::default()
    }

    /// The symbol of `text`, adding it when new.
    pub fn intern(&mut self, text: &str) -> Symbol {
        if let Some(&s) = self.index.get(text) {
            return s;
        }
        let s = self.strings.len() as Symbol;
        self.strings.push(text.to_string());
        self.index.insert(text.to_string(), s);
        s
    }

    /// The symbol of `text` if it was interned.
    pub fn lookup(&self, text: &str) -> Option<Symbol> {
        self.index.get(text).copied()
    }

    /// The table, for [`Cycle::strings`].
    pub fn into_strings(self) -> Vec<String> {
        self.strings
    }
}

/// A running job that is being evicted (SIGTERM sent, grace running).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvictionInProgress {
    /// The victim.
    pub job: JobId,
    /// The job it makes room for.
    pub for_job: JobId,
}

/// Everything one cycle decides on. Immutable while the cycle runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Snapshot {
    /// Time, seed, string table, usage, quotas, totals.
    pub ctx: Cycle,
    /// Jobs waiting to start, in submit order.
    pub pending: Vec<Job>,
    /// Nodes with what is free now.
    pub nodes: Vec<Node>,
    /// Jobs holding resources now (including ones being evicted).
    pub running: Vec<RunningJob>,
    /// Evictions under way; while any is, the preemption stage is not asked again.
    #[serde(default)]
    pub evicting: Vec<EvictionInProgress>,
}
