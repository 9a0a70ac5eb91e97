//! The log of plugin faults: the most recent ones for the API and the dashboard, a count
//! per plugin, stage and kind since start, and an event in the store for each. Its own
//! lock, so reading faults never waits on a cycle's plugin calls.
//!
//! Owns: that log and its bound (`RECENT_FAULTS`). Does not own deciding what is a fault
//! or what it costs the cycle (`gantry-engine`), or quarantine (`gantry_engine::pipeline`).

use super::{FaultView, now_ms};
use gantry_engine::FaultRecord;
use gantry_store::Store;
use std::collections::{BTreeMap, VecDeque};

/// Faults kept for the API.
const RECENT_FAULTS: usize = 200;

/// Recent faults and counts.
#[derive(Debug, Default)]
pub(crate) struct FaultLog {
    recent: VecDeque<FaultView>,
    counts: BTreeMap<String, u64>,
}

impl FaultLog {
    /// Logs `faults` of cycle `cycle` (0 for submit-time and dry-run faults), each also as
    /// an event in `store`.
    pub(crate) fn record(&mut self, cycle: u64, faults: &[FaultRecord], store: &Store) {
        for f in faults {
            tracing::warn!(
                target: "gantry::fault",
                stage = f.stage.as_str(),
                plugin_name = %f.plugin.name,
                plugin_sha256 = %f.plugin.sha256,
                fault_kind = f.fault.kind.as_str(),
                fallback = f.fell_back,
                "plugin fault: {}",
                f.fault.message
            );
            let key = format!("{}/{}/{}", f.plugin.name, f.stage, f.fault.kind.as_str());
            *self.counts.entry(key).or_default() += 1;
            let at_ms = now_ms();
            let _ = store.event(
                at_ms,
                None,
                "fault",
                format!("{} at {}: {}", f.plugin.name, f.stage, f.fault),
            );
            if self.recent.len() >= RECENT_FAULTS {
                self.recent.pop_front();
            }
            self.recent.push_back(FaultView {
                cycle,
                at_ms,
                record: f.clone(),
            });
        }
    }

    /// The recent faults, oldest first.
    pub(crate) fn recent(&self) -> Vec<FaultView> {
        self.recent.iter().cloned().collect()
    }

    /// Faults since start by `plugin/stage/kind`.
    pub(crate) fn counts(&self) -> BTreeMap<String, u64> {
        self.counts.clone()
    }

    /// What changes when a fault is logged (for the live stream).
    pub(crate) fn fingerprint(&self) -> (usize, Option<u64>) {
        (self.recent.len(), self.recent.back().map(|f| f.at_ms))
    }
}
