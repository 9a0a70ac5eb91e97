//! What the API reads of the scheduler beyond jobs and nodes: its configuration, the
//! cluster token, the node's isolation, fair-share usage as of now, and a fingerprint of what
//! changed for the live stream. The API goes through these methods, never through the
//! scheduler's fields or locks.
//!
//! Owns these read-only views. It changes nothing.

use super::{Scheduler, lock};
use gantry_api::agent_client::AgentClient;
use gantry_api::cluster::NodeImages;
use gantry_config::Config;
use gantry_node::executor::IsolationSummary;
use std::collections::BTreeMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

/// What `GET /v1/health` says of this controller beside its liveness.
#[derive(Debug, Clone)]
pub struct About {
    /// How this node isolates tasks.
    pub isolation: IsolationSummary,
    /// Which database holds the active state (`sled`, `etcd`).
    pub state_backend: &'static str,
    /// Which database holds history (`sqlite`, `postgres`).
    pub history_backend: &'static str,
}

/// An agent's node and its image cache, or why it could not be asked.
pub type AgentImages = (String, Result<NodeImages, String>);

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
    pub(crate) fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The credential an agent must present: node `node`'s own, or the cluster token for an
    /// agent of protocol 1 (empty: no agent may join).
    pub(crate) fn agent_credential(&self, node: Option<&str>) -> String {
        match node {
            Some(name) => {
                gantry_api::cluster_token::node_credential(&self.inner.cluster_token, name)
            }
            None => self.inner.cluster_token.clone(),
        }
    }

    /// How this node isolates tasks and where state and history live (`GET /v1/health`).
    pub(crate) fn about(&self) -> About {
        About {
            isolation: self.inner.executor.isolation(),
            state_backend: self.inner.store.state_backend(),
            history_backend: self.inner.store.history_backend(),
        }
    }

    /// The image cache of this node and of every agent's (`gantry images`); an agent that
    /// cannot be asked is listed with the reason.
    pub(crate) fn cached_images(&self) -> (std::io::Result<NodeImages>, Vec<AgentImages>) {
        let local = gantry_node::container::cache::node_images(self.inner.executor.containers());
        let agents: Vec<(String, AgentClient)> = lock(&self.inner.members)
            .all()
            .filter_map(|(_, m)| Some((m.info.name.clone(), m.agent()?.clone())))
            .collect();
        let remote = agents
            .into_iter()
            .map(|(name, agent)| {
                let answer = agent.images().map_err(|e| e.to_string());
                (name, answer)
            })
            .collect();
        (local, remote)
    }

    /// Decayed GPU-seconds by user and by account at `now_ms`: closed task runs from the
    /// ledger plus running tasks in full.
    pub(crate) fn usage_at(&self, now_ms: u64) -> (UsageByName, UsageByName) {
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
    pub(crate) fn change_fingerprint(&self) -> ChangeFingerprint {
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
