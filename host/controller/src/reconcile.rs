//! Comparing what an agent reports with what the controller wants on its node, at every
//! heartbeat: a running task the controller does not want (its job ended or was requeued,
//! e.g. while the node was down) is stopped, and the node takes nothing new while any runs
//! (its GPUs are busy in fact); a wanted task the agent does not know and whose launch is not
//! in flight is launched again with the same key (after a controller restart mid-launch; the
//! agent's idempotence makes this safe), or, once it had started, declared lost after three
//! heartbeats without it.
//!
//! Owns: these rules. Does not own heartbeats themselves (`remote.rs`) or launching
//! (`launch.rs`).

use super::transition::Transition;
use super::{Scheduler, lock};
use gantry_api::cluster::{EndReport, Heartbeat, TaskKey};
use gantry_node::executor::TaskExit;
use std::collections::{BTreeMap, BTreeSet};

impl Scheduler {
    /// Compares what the agent runs with what the controller wants there; returns the keys
    /// to stop, re-sends launches the agent never got, and declares lost what it lost.
    pub(super) fn reconcile(&self, node: &str, hb: &Heartbeat) -> Vec<TaskKey> {
        let reported: BTreeMap<TaskKey, u32> = hb.running.iter().map(|r| (r.key, r.pid)).collect();
        let ended: BTreeSet<TaskKey> = hb.ended.iter().map(|e| e.key).collect();
        let launching = lock(&self.inner.remote_runs).launching();
        let mut stop = Vec::new();
        let mut relaunch: Vec<(u64, usize)> = Vec::new();
        let mut lost: Vec<TaskKey> = Vec::new();
        let mut st = lock(&self.inner.state);
        let mut wanted = BTreeSet::new();
        for mut job in st.jobs.edit_running() {
            for i in 0..job.tasks.len() {
                if job.tasks[i].node != node || job.tasks[i].exit.is_some() {
                    continue;
                }
                let key = Self::task_key(&job, i);
                wanted.insert(key);
                if let Some(pid) = reported.get(&key) {
                    lock(&self.inner.remote_runs).reported(&key);
                    let launched = Transition::TaskLaunched { task: i, pid: *pid };
                    // Written as this job's edit ends, under the lock.
                    if job.tasks[i].pid.is_none() {
                        job.apply_or_log(launched);
                    }
                } else if ended.contains(&key) || launching.contains(&key) {
                } else if job.tasks[i].pid.is_none() {
                    if job.stopping.is_none() {
                        relaunch.push((job.id, i));
                    }
                } else if lock(&self.inner.remote_runs).missed(key) {
                    lost.push(key);
                }
            }
        }
        for r in &hb.running {
            if !wanted.contains(&r.key) {
                tracing::info!(node, task = %r.key, "stopping a task the controller does not want");
                stop.push(r.key);
            }
        }
        self.set_unwanted(node, stop.len());
        let resend: Vec<_> = relaunch
            .iter()
            .filter_map(|(id, i)| st.jobs.get(*id).map(|j| (j.clone(), *i)))
            .collect();
        drop(st);
        for (job, i) in resend {
            tracing::info!(node, task = %Self::task_key(&job, i), "the agent does not know this task; sending its launch again");
            self.launch_again(&job, i);
        }
        for key in lost {
            tracing::warn!(node, task = %key, "the agent no longer reports this task; it is lost");
            self.remote_task_ended(
                node,
                EndReport {
                    key,
                    exit: TaskExit::Lost,
                    usage: Default::default(),
                },
            );
        }
        stop
    }

    /// Records how many unwanted tasks node `node` still runs; the node is fenced off (takes
    /// nothing new) while there are any, and a cycle runs when that changes.
    fn set_unwanted(&self, node: &str, count: usize) {
        let changed = lock(&self.inner.members)
            .by_name_mut(node)
            .is_some_and(|m| std::mem::replace(&mut m.unwanted, count) != count);
        if changed {
            if count > 0 {
                tracing::warn!(
                    node,
                    count,
                    "the node runs tasks the controller does not want; it takes nothing new until they are stopped"
                );
            }
            self.wake();
        }
    }
}
