//! Nodes that fall silent: an agent not heard from for `cluster.node_down_after_ms` (or, after
//! a controller restart, not heard from at all in that time) marks its node down: its tasks
//! are lost, the rest of their gangs stopped, and the jobs requeued or failed per their
//! requeue setting once every task ended; its GPUs leave the snapshot until it reports again.
//!
//! Owns: the watch and the node-down transition. Does not own a node coming back
//! (`remote.rs` registers it, `reconcile.rs` stops what it should no longer run).

use super::members::{Link, Liveness};
use super::{Scheduler, lock, now_ms};
use crate::executor::TaskExit;
use crate::model::{JobState, StopCause};
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
            let reason = match (&m.link, &m.liveness) {
                (Link::Agent(_), Liveness::Up)
                    if now.saturating_sub(m.last_heartbeat_ms) > limit =>
                {
                    format!(
                        "no heartbeat for {} ms (limit {limit} ms)",
                        now - m.last_heartbeat_ms
                    )
                }
                (Link::Agent(_), Liveness::Awaiting { since_ms })
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
        let mut touched = Vec::new();
        for job in st
            .jobs
            .values_mut()
            .filter(|j| j.state == JobState::Running)
        {
            if !job.tasks.iter().any(|t| t.node == node && t.exit.is_none()) {
                continue;
            }
            for t in job
                .tasks
                .iter_mut()
                .filter(|t| t.node == node && t.exit.is_none())
            {
                t.exit = Some(TaskExit::Lost);
            }
            if job.stopping.is_none() || job.stopping == Some(StopCause::GangFailed) {
                job.stopping = Some(StopCause::NodeDown {
                    node: node.to_string(),
                });
            }
            self.event(
                job.id,
                "node-down",
                format!("node {node} is down: {reason}"),
            );
            self.stop_tasks(job, grace);
            if job.tasks.iter().all(|t| t.exit.is_some()) {
                self.finish(job);
            }
            touched.push(job.clone());
        }
        drop(st);
        for job in &touched {
            self.persist(job);
        }
        self.flush();
        self.wake();
    }
}
