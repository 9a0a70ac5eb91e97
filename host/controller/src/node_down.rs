//! Nodes that fall silent: an agent not heard from for `cluster.node_down_after_ms` (or, after
//! a controller restart, not heard from at all in that time) marks its node down: its tasks
//! are lost, the rest of their gangs stopped, and the jobs requeued or failed per their
//! requeue setting once every task ended; its GPUs leave the snapshot until it reports again.
//!
//! A node that is down (or awaited in vain) can be forgotten by an operator
//! (`DELETE /v1/nodes/{name}`) once none of its tasks is still running: it leaves the list and
//! the store; an agent that reports again under the name joins as a new node.
//!
//! Owns: the watch, the node-down transition and forgetting. Does not own a node coming back
//! (`remote.rs` registers it, `reconcile.rs` stops what it should no longer run).

use super::members::Liveness;
use super::node_control::drain_key;
use super::nodes::NodeOpError;
use super::transition::Transition;
use super::{Scheduler, lock, now_ms};
use gantry_api::model::{JobState, StopCause};
use gantry_api::views::DrainView;
use std::time::Duration;

/// How often silent nodes are looked for.
const WATCH_EVERY: Duration = Duration::from_millis(200);

impl Scheduler {
    /// Watches for agents that stopped sending heartbeats.
    pub(crate) fn start_node_watch(&self) {
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(WATCH_EVERY).await;
                me.mark_silent_nodes_down();
            }
        });
    }

    fn mark_silent_nodes_down(&self) {
        let now = now_ms();
        let limit = self.inner.config.cluster.node_down_after_ms;
        let mut down = Vec::new();
        for (_, m) in lock(&self.inner.members).all_mut() {
            let reason = match (m.agent(), &m.liveness) {
                (Some(_), Liveness::Up) if now.saturating_sub(m.last_heartbeat_ms) > limit => {
                    format!(
                        "no heartbeat for {} ms (limit {limit} ms)",
                        now - m.last_heartbeat_ms
                    )
                }
                (Some(_), Liveness::Awaiting { since_ms })
                    if now.saturating_sub(*since_ms) > limit =>
                {
                    format!(
                        "its agent has not reported since the controller started ({limit} ms ago)"
                    )
                }
                _ => continue,
            };
            m.liveness = Liveness::Down {
                since_ms: now,
                reason: reason.clone(),
            };
            down.push((m.info.name.clone(), reason));
        }
        for (node, reason) in down {
            self.node_down(&node, &reason);
        }
    }

    /// Node `node` is down: its tasks are lost; the rest of their gangs are stopped; the
    /// jobs end (requeued or failed) once every task ended.
    fn node_down(&self, node: &str, reason: &str) {
        let message = format!("node {node} is down: {reason}");
        tracing::error!("{message}");
        let _ = self.inner.store.event(now_ms(), None, "node", message);
        let grace = Duration::from_secs(self.inner.config.kill_grace_s);
        let mut st = lock(&self.inner.state);
        for mut job in st.jobs.edit_running() {
            if !job.tasks.iter().any(|t| t.node == node && t.exit.is_none()) {
                continue;
            }
            for task in 0..job.tasks.len() {
                let t = &job.tasks[task];
                if t.node == node && t.exit.is_none() {
                    job.apply_or_log(Transition::task_lost(task));
                }
            }
            let down = StopCause::NodeDown {
                node: node.to_string(),
            };
            job.apply_or_log(Transition::StopRequested(down));
            self.event(
                job.id,
                "node-down",
                format!("node {node} is down: {reason}"),
            );
            self.stop_tasks(&job, grace);
            if job.tasks.iter().all(|t| t.exit.is_some()) {
                self.finish(&mut job);
            }
            // Written as this edit ends, under the lock.
        }
        drop(st);
        self.flush();
        self.wake();
    }

    /// Forgets node `name`: only an agent's node that is down or awaited, with no task of a
    /// running job still on it.
    pub(crate) fn forget_node(&self, name: &str, by: &str) -> Result<(), NodeOpError> {
        let busy = lock(&self.inner.state).jobs.running().any(|j| {
            j.state == JobState::Running
                && j.tasks.iter().any(|t| t.node == name && t.exit.is_none())
        });
        let mut members = lock(&self.inner.members);
        let known = members.names().join(", ");
        let Some(m) = members.by_name_mut(name) else {
            return Err(NodeOpError::NotFound {
                asked: name.chars().take(super::nodes::MAX_REASON).collect(),
                known,
            });
        };
        if m.agent().is_none() {
            return Err(NodeOpError::Busy(format!(
                "node {name} is the controller's own node; it cannot be removed (set cluster.local_node = false to run no tasks there)"
            )));
        }
        if m.liveness == Liveness::Up {
            return Err(NodeOpError::Busy(format!(
                "node {name} is up; stop its agent first (drain it to let its jobs finish), then remove it once it is down"
            )));
        }
        if busy {
            return Err(NodeOpError::Busy(format!(
                "node {name} still has tasks of running jobs; they end once their gangs are stopped"
            )));
        }
        m.removed = true;
        members.save(&self.inner.store)?;
        drop(members);
        let store = &self.inner.store;
        store.set_meta(&drain_key(name), &None::<DrainView>)?;
        store.flush()?;
        let message = format!("node {name} removed by {by}");
        tracing::warn!("{message}");
        let _ = store.event(now_ms(), None, "node", message);
        Ok(())
    }
}
