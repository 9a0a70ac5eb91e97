//! What the running jobs add up to, kept up to date as jobs start and stop instead of
//! summed again for every cycle: milli-GPU held per user, account and queue (per GPU
//! model for queues), and the sums that give the running jobs' GPU-seconds at any time.
//!
//! A fill replay offers thousands of jobs to a cluster that keeps every one it places,
//! and each offer is a cycle: summing the running list per cycle made the simulator's
//! own bookkeeping cost more than most placement policies.
//!
//! Owns those sums. Does not own the decay of finished usage (`usage`) or the booking
//! of nodes (`state`).

use gantry_contract::{RunningJob, Symbol};
use std::collections::BTreeMap;

/// One user's or account's running jobs: milli-GPU held, and the sum of
/// milli-GPU × start time (ms), so that their GPU-seconds at `now` are
/// `(now · held − started) / 10⁶` in exact integers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// Running jobs.
    pub jobs: u64,
    /// Milli-GPU held.
    pub milli: u64,
    /// Σ milli-GPU × start ms.
    pub started: u128,
}

impl Held {
    fn add(&mut self, milli: u64, start_ms: u64, sign: bool) {
        let weighted = u128::from(milli) * u128::from(start_ms);
        if sign {
            self.jobs += 1;
            self.milli += milli;
            self.started += weighted;
        } else {
            self.jobs = self.jobs.saturating_sub(1);
            self.milli = self.milli.saturating_sub(milli);
            self.started = self.started.saturating_sub(weighted);
        }
    }

    /// GPU-seconds of these jobs at `now_ms` (no job starts after `now_ms`).
    pub fn gpu_seconds_at(&self, now_ms: u64) -> f64 {
        let total = (u128::from(now_ms) * u128::from(self.milli)).saturating_sub(self.started);
        total as f64 / 1_000_000.0
    }
}

/// One queue's running jobs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueHeld {
    /// Milli-GPU held.
    pub milli: u64,
    /// Milli-GPU held per GPU model (positions of `Cycle::gpu_models`).
    pub by_model: Vec<u64>,
}

/// The sums over the running jobs.
#[derive(Debug, Clone, Default)]
pub struct RunningTotals {
    /// Per user.
    pub users: BTreeMap<Symbol, Held>,
    /// Per account.
    pub accounts: BTreeMap<Symbol, Held>,
    /// Per queue.
    pub queues: BTreeMap<Symbol, QueueHeld>,
}

impl RunningTotals {
    /// Counts `r` in (`sign`) or out; `model_of(node, gpu index)` is the position of a
    /// GPU's model in the cycle's model list, `models` that list's length.
    pub fn count(
        &mut self,
        r: &RunningJob,
        sign: bool,
        models: usize,
        model_of: impl Fn(u32, u32) -> Option<usize>,
    ) {
        let milli = held_milli(r);
        for (map, who) in [
            (&mut self.users, r.job.user),
            (&mut self.accounts, r.job.account),
        ] {
            let held = map.entry(who).or_default();
            held.add(milli, r.start_ms, sign);
            if held.jobs == 0 {
                map.remove(&who);
            }
        }
        let q = self.queues.entry(r.job.queue).or_insert_with(|| QueueHeld {
            milli: 0,
            by_model: vec![0; models],
        });
        let change = |x: &mut u64, by: u64| {
            *x = if sign { *x + by } else { x.saturating_sub(by) };
        };
        change(&mut q.milli, milli);
        for t in &r.tasks {
            for share in &t.gpus {
                if let Some(slot) =
                    model_of(t.node, share.index).and_then(|m| q.by_model.get_mut(m))
                {
                    change(slot, u64::from(share.milli));
                }
            }
        }
    }
}

/// Milli-GPU a running job holds.
pub fn held_milli(r: &RunningJob) -> u64 {
    r.tasks
        .iter()
        .flat_map(|t| &t.gpus)
        .map(|s| u64::from(s.milli))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_contract::{GpuShare, Job, TaskAllocation};

    fn running(user: Symbol, queue: Symbol, milli: u32, start_ms: u64) -> RunningJob {
        RunningJob {
            job: Job {
                user,
                account: user + 10,
                queue,
                ..Job::default()
            },
            tasks: vec![TaskAllocation {
                node: 0,
                gpus: vec![GpuShare { index: 1, milli }],
                cpu_milli: 0,
                memory_mib: 0,
            }],
            start_ms,
            ..RunningJob::default()
        }
    }

    #[test]
    fn sums_follow_starts_and_stops() {
        let mut t = RunningTotals::default();
        let a = running(1, 5, 2000, 1_000);
        let b = running(1, 5, 500, 3_000);
        t.count(&a, true, 2, |_, i| Some(i as usize));
        t.count(&b, true, 2, |_, i| Some(i as usize));
        // At 5 s: 2 GPUs for 4 s + 0.5 GPU for 2 s = 9 GPU-s.
        assert_eq!(t.users[&1].gpu_seconds_at(5_000), 9.0);
        assert_eq!(t.accounts[&11].milli, 2500);
        assert_eq!(t.queues[&5].by_model, vec![0, 2500]);
        t.count(&a, false, 2, |_, i| Some(i as usize));
        assert_eq!(t.users[&1].gpu_seconds_at(5_000), 1.0);
        assert_eq!(t.queues[&5].milli, 500);
        t.count(&b, false, 2, |_, i| Some(i as usize));
        assert!(t.users.is_empty() && t.accounts.is_empty());
    }
}
