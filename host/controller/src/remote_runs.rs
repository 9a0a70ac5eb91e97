//! Remote task runs in motion between the controller and its agents: launches whose
//! request is in flight, and started tasks an agent has not reported, counted per
//! heartbeat until they are declared lost. One mutex-guarded owner for both, used by
//! `launch.rs` and `reconcile.rs`.
//!
//! Owns: those two sets and the rule "missing from this many heartbeats in a row is lost".
//! Does not own sending launches (`launch.rs`, the runners), what a lost task means for its job
//! (`reconcile.rs`, `lifecycle.rs`) or the nodes themselves (`members.rs`).

use gantry_api::cluster::TaskKey;
use std::collections::{BTreeMap, BTreeSet};

/// Heartbeats without a started task before it is declared lost.
pub(crate) const MISSING_LIMIT: u32 = 3;

/// What the controller knows of remote runs that are neither clearly running nor ended.
#[derive(Debug, Default)]
pub(crate) struct RemoteRuns {
    /// Runs whose launch request is in flight.
    launching: BTreeSet<TaskKey>,
    /// Started runs their agent did not report, with how many heartbeats in a row.
    missing: BTreeMap<TaskKey, u32>,
}

impl RemoteRuns {
    /// A launch request for `key` is being sent.
    pub(crate) fn launch_sent(&mut self, key: TaskKey) {
        self.launching.insert(key);
    }

    /// The launch request for `key` was answered (or failed).
    pub(crate) fn launch_answered(&mut self, key: &TaskKey) {
        self.launching.remove(key);
    }

    /// The runs whose launch is in flight now.
    pub(crate) fn launching(&self) -> BTreeSet<TaskKey> {
        self.launching.clone()
    }

    /// The agent reported `key` running: it is not missing.
    pub(crate) fn reported(&mut self, key: &TaskKey) {
        self.missing.remove(key);
    }

    /// The agent's heartbeat lacked the started run `key`; true when that makes it lost
    /// (missing [`MISSING_LIMIT`] times in a row), after which it is forgotten here.
    pub(crate) fn missed(&mut self, key: TaskKey) -> bool {
        let n = self.missing.entry(key).or_insert(0);
        *n += 1;
        if *n >= MISSING_LIMIT {
            self.missing.remove(&key);
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_lost_only_after_the_limit_of_heartbeats_in_a_row_without_it() {
        let key = TaskKey {
            job: 1,
            task: 0,
            run: 5,
        };
        let mut r = RemoteRuns::default();
        assert!(!r.missed(key) && !r.missed(key));
        r.reported(&key);
        assert!(!r.missed(key) && !r.missed(key));
        assert!(r.missed(key));
        assert!(!r.missed(key), "forgotten once declared lost");
        r.launch_sent(key);
        assert!(r.launching().contains(&key));
        r.launch_answered(&key);
        assert!(r.launching().is_empty());
    }
}
