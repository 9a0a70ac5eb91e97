//! What the API reads of the scheduler beyond jobs and nodes: its configuration, the
//! cluster token, the node's isolation, fair-share usage as of now, and a fingerprint of what
//! changed for the live stream. The API goes through these methods, never through the
//! scheduler's fields or locks.
//!
//! Owns these read-only views. It changes nothing.

use super::{Scheduler, lock};
use crate::config::Config;
use crate::executor::IsolationSummary;
use std::collections::BTreeMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

/// Decayed GPU-seconds by name (users, or accounts).
pub type UsageByName = BTreeMap<String, f64>;

/// Fingerprints of the job table and the fault log, and the current cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeFingerprint {
    /// Changes when a job appears, changes state, tasks, requeues or reason.
    pub jobs: u64,
    /// Changes when a fault is recorded.
    pub faults: u64,
    /// The latest cycle's number.
    pub cycle: u64,
}

impl Scheduler {
    /// The daemon's configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The token agents must present (empty: no agent may join).
    pub fn cluster_token(&self) -> &str {
        &self.inner.cluster_token
    }

    /// How this node isolates tasks.
    pub fn isolation(&self) -> IsolationSummary {
        self.inner.executor.isolation()
    }

    /// The images in this node's cache (`gantry images`), with its directory and size
    /// limit; `None` when containers are not set up.
    pub fn cached_images(
        &self,
    ) -> Option<std::io::Result<(String, u64, Vec<gantry_node::container::cache::CachedImage>)>>
    {
        let c = self.inner.executor.containers()?;
        Some(
            gantry_node::container::cache::list(
                &c.cache_dir,
                std::path::Path::new(gantry_node::container::RUNTIME_STATE),
            )
            .map(|list| {
                (
                    c.cache_dir.display().to_string(),
                    c.config.cache_max_mib,
                    list,
                )
            }),
        )
    }

    /// Decayed GPU-seconds by user and by account at `now_ms`: closed task runs from the
    /// ledger plus running tasks in full.
    pub fn usage_at(&self, now_ms: u64) -> (UsageByName, UsageByName) {
        let (mut users, mut accounts) = self.ledger().closed(now_ms);
        let st = lock(&self.inner.state);
        for j in st.jobs.active() {
            let gpu_s = super::accounting::running_gpu_seconds(j, now_ms);
            if gpu_s > 0.0 {
                *users.entry(j.spec.user.clone()).or_default() += gpu_s;
                *accounts.entry(j.spec.account.clone()).or_default() += gpu_s;
            }
        }
        (users, accounts)
    }

    /// What the live stream compares to tell that jobs or faults changed.
    pub fn change_fingerprint(&self) -> ChangeFingerprint {
        let st = lock(&self.inner.state);
        let mut h = DefaultHasher::new();
        for j in st.jobs.iter() {
            (j.id, j.state.as_str(), j.tasks.len(), j.requeues).hash(&mut h);
            j.reason.as_ref().map(|r| &r.message).hash(&mut h);
        }
        let mut faults = DefaultHasher::new();
        lock(&self.inner.faults).fingerprint().hash(&mut faults);
        ChangeFingerprint {
            jobs: h.finish(),
            faults: faults.finish(),
            cycle: st.cycle,
        }
    }
}
