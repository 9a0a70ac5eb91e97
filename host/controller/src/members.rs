//! The controller's table of nodes: the local node (when `cluster.local_node`) and every agent
//! that ever registered, each with its inventory, how it is reached, whether it is alive
//! (`up`, `awaiting` its first heartbeat after a controller restart, `down` with a reason),
//! its load, and its drain and GPU faults ([`NodeControl`]).
//!
//! A node's number in snapshots is its position here: nodes are only ever appended, so a
//! number never changes meaning while the controller runs. Agents are remembered in the
//! store (one meta key holding every agent's inventory and address), so that after a restart
//! the controller knows which nodes to wait for and where their jobs' tasks run.
//!
//! Owns: the table and its persistence. Does not own what heartbeats and silences mean for
//! jobs (`remote.rs`, `reconcile.rs`, `node_down.rs`), drain and health (`nodes.rs`, `node_control.rs`) or
//! the views (`node_view.rs`).

use super::node_control::NodeControl;
use super::runner::Runner;
use gantry_api::agent_client::AgentClient;
use gantry_api::cluster::NodeLoad;
use gantry_contract::NodeId;
use gantry_node::inventory::NodeInfo;
use gantry_store::{Store, StoreError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Store meta key of the agents' records.
const AGENTS_KEY: &str = "cluster-agents";

/// Whether a node is alive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Liveness {
    /// Heard from in time (the local node always is).
    Up,
    /// Known from before a controller restart, not heard from since `since_ms`.
    Awaiting {
        /// The controller's start.
        since_ms: u64,
    },
    /// Missed its heartbeats.
    Down {
        /// When it was marked down.
        since_ms: u64,
        /// Why.
        reason: String,
    },
}

/// One node.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub(crate) info: NodeInfo,
    /// Its address for other nodes' tasks (`MASTER_ADDR`).
    pub(crate) addr: String,
    /// How its tasks are run: the local executor or its agent (`runner.rs`).
    pub(crate) runner: Arc<dyn Runner>,
    pub(crate) liveness: Liveness,
    /// Last heartbeat, ms since the Unix epoch (0: none since the controller started).
    pub(crate) last_heartbeat_ms: u64,
    pub(crate) load: NodeLoad,
    pub(crate) control: NodeControl,
    /// Tasks its agent still runs that the controller does not want (being stopped): their
    /// GPUs are busy in fact, so the node takes nothing new until they are gone.
    pub(crate) unwanted: usize,
    /// Forgotten by an operator: kept only so that node numbers keep their meaning; seen by
    /// nothing (an agent that reports again under the name is a new node).
    pub(crate) removed: bool,
}

impl Member {
    /// Whether the engine may see the node (up, with no unwanted tasks still running on it; a
    /// drain is applied on top).
    pub(crate) fn schedulable(&self) -> bool {
        self.liveness == Liveness::Up && self.unwanted == 0
    }

    /// Its agent (`None`: the controller's own node).
    pub(crate) fn agent(&self) -> Option<&AgentClient> {
        self.runner.agent()
    }
}

/// What the store keeps of an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StoredAgent {
    pub(crate) info: NodeInfo,
    pub(crate) addr: String,
    pub(crate) agent_url: String,
}

/// All nodes, in snapshot-number order.
#[derive(Debug, Default)]
pub(crate) struct Members {
    list: Vec<Member>,
}

impl Members {
    /// The local node (if it runs tasks) and the agents remembered in `store`, awaiting
    /// their first heartbeat since `now_ms`.
    pub(crate) fn load(
        store: &Store,
        local: Option<Member>,
        agent: impl Fn(&str, &str) -> Arc<dyn Runner>,
        now_ms: u64,
    ) -> Result<Self, StoreError> {
        let mut list: Vec<Member> = local.into_iter().collect();
        for a in store
            .meta::<Vec<StoredAgent>>(AGENTS_KEY)?
            .unwrap_or_default()
        {
            if list.iter().any(|m| m.info.name == a.info.name) {
                continue;
            }
            let control = NodeControl::load(store, &a.info)?;
            tracing::info!(node = %a.info.name, url = %a.agent_url, "waiting for the agent of a known node");
            list.push(Member {
                addr: a.addr,
                runner: agent(&a.info.name, &a.agent_url),
                liveness: Liveness::Awaiting { since_ms: now_ms },
                last_heartbeat_ms: 0,
                load: NodeLoad::default(),
                control,
                unwanted: 0,
                removed: false,
                info: a.info,
            });
        }
        Ok(Self { list })
    }

    /// Writes the agents' records (after one registered or changed inventory or address).
    pub(crate) fn save(&self, store: &Store) -> Result<(), StoreError> {
        let agents: Vec<StoredAgent> = self
            .all()
            .filter_map(|(_, m)| {
                m.agent().map(|client| StoredAgent {
                    info: m.info.clone(),
                    addr: m.addr.clone(),
                    agent_url: client.url().to_string(),
                })
            })
            .collect();
        store.set_meta(AGENTS_KEY, &agents)?;
        store.flush()
    }

    /// Appends a node; returns its number.
    pub(crate) fn push(&mut self, member: Member) -> NodeId {
        self.list.push(member);
        (self.list.len() - 1) as NodeId
    }

    /// Every node not forgotten, with its number.
    pub(crate) fn all(&self) -> impl Iterator<Item = (NodeId, &Member)> {
        self.list
            .iter()
            .enumerate()
            .filter(|(_, m)| !m.removed)
            .map(|(i, m)| (i as NodeId, m))
    }

    /// Starts the wait for known nodes' agents now (the scheduler's loop starts: a
    /// controller that took long to open, or became leader of a cluster, must not count
    /// that time against agents that could not reach it yet).
    pub(crate) fn await_agents_from(&mut self, now_ms: u64) {
        for (_, m) in self.all_mut() {
            if let Liveness::Awaiting { since_ms } = &mut m.liveness {
                *since_ms = now_ms;
            }
        }
    }

    pub(crate) fn all_mut(&mut self) -> impl Iterator<Item = (NodeId, &mut Member)> {
        self.list
            .iter_mut()
            .enumerate()
            .filter(|(_, m)| !m.removed)
            .map(|(i, m)| (i as NodeId, m))
    }

    pub(crate) fn get(&self, id: NodeId) -> Option<&Member> {
        self.list.get(id as usize).filter(|m| !m.removed)
    }

    pub(crate) fn by_name(&self, name: &str) -> Option<(NodeId, &Member)> {
        self.all().find(|(_, m)| m.info.name == name)
    }

    pub(crate) fn by_name_mut(&mut self, name: &str) -> Option<&mut Member> {
        self.list
            .iter_mut()
            .find(|m| !m.removed && m.info.name == name)
    }

    /// The nodes the engine sees this cycle, with their numbers.
    pub(crate) fn schedulable(&self) -> Vec<(NodeId, &NodeInfo)> {
        self.all()
            .filter(|(_, m)| m.schedulable())
            .map(|(id, m)| (id, &m.info))
            .collect()
    }

    /// The names of all nodes.
    pub(crate) fn names(&self) -> Vec<String> {
        self.list.iter().map(|m| m.info.name.clone()).collect()
    }
}
