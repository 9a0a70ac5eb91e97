//! Decayed GPU usage per user and account on the virtual clock, with the daemon's
//! rule: a finished run counts its GPU share × duration, halved for every half-life
//! since it ended; a running job counts in full. Finished runs are folded into one
//! decayed sum per user and account, and the running jobs arrive summed per user and
//! account (`running_totals`), so a cycle costs O(users).
//!
//! Owns: the decay arithmetic and the default [`USAGE_HALF_LIFE_S`]. Does not own who runs.

use super::running_totals::RunningTotals;
use gantry_contract::{Symbol, Usage};
use std::collections::BTreeMap;

/// Default half-life of decayed GPU usage (SLURM's PriorityDecayHalfLife default, 7 days).
pub const USAGE_HALF_LIFE_S: f64 = 7.0 * 24.0 * 3600.0;

/// A decayed sum valid at `at_ms`.
#[derive(Debug, Clone, Copy, Default)]
struct Decayed {
    gpu_s: f64,
    at_ms: u64,
}

impl Decayed {
    fn value_at(self, now_ms: u64, half_life_s: f64) -> f64 {
        let age_s = now_ms.saturating_sub(self.at_ms) as f64 / 1000.0;
        self.gpu_s * (-age_s / half_life_s).exp2()
    }

    fn add(&mut self, gpu_s: f64, now_ms: u64, half_life_s: f64) {
        self.gpu_s = self.value_at(now_ms, half_life_s) + gpu_s;
        self.at_ms = now_ms;
    }
}

/// Finished usage per user and account.
#[derive(Debug)]
pub struct UsageTracker {
    users: BTreeMap<Symbol, Decayed>,
    accounts: BTreeMap<Symbol, Decayed>,
    half_life_s: f64,
}

impl Default for UsageTracker {
    fn default() -> Self {
        Self::with_half_life(USAGE_HALF_LIFE_S)
    }
}

impl UsageTracker {
    /// A tracker whose usage halves every `half_life_s` seconds (> 0).
    pub fn with_half_life(half_life_s: f64) -> Self {
        Self {
            users: BTreeMap::new(),
            accounts: BTreeMap::new(),
            half_life_s: if half_life_s > 0.0 {
                half_life_s
            } else {
                USAGE_HALF_LIFE_S
            },
        }
    }

    /// Charges a run that ended at `now_ms`.
    pub fn finished(&mut self, user: Symbol, account: Symbol, gpu_s: f64, now_ms: u64) {
        if gpu_s <= 0.0 {
            return;
        }
        let h = self.half_life_s;
        self.users.entry(user).or_default().add(gpu_s, now_ms, h);
        self.accounts
            .entry(account)
            .or_default()
            .add(gpu_s, now_ms, h);
    }

    /// Usage per user and per account at `now_ms`, with the running jobs' sums.
    pub fn at(&self, now_ms: u64, running: &RunningTotals) -> (Vec<Usage>, Vec<Usage>) {
        let mut users: BTreeMap<Symbol, f64> = self
            .users
            .iter()
            .map(|(k, d)| (*k, d.value_at(now_ms, self.half_life_s)))
            .collect();
        let mut accounts: BTreeMap<Symbol, f64> = self
            .accounts
            .iter()
            .map(|(k, d)| (*k, d.value_at(now_ms, self.half_life_s)))
            .collect();
        for (who, held) in &running.users {
            *users.entry(*who).or_default() += held.gpu_seconds_at(now_ms);
        }
        for (who, held) in &running.accounts {
            *accounts.entry(*who).or_default() += held.gpu_seconds_at(now_ms);
        }
        let list = |m: BTreeMap<Symbol, f64>| {
            m.into_iter()
                .filter(|(_, v)| *v > 0.0)
                .map(|(who, gpu_seconds)| Usage { who, gpu_seconds })
                .collect()
        };
        (list(users), list(accounts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_halves_every_half_life_and_running_counts_in_full() {
        let mut t = UsageTracker::default();
        t.finished(1, 2, 100.0, 0);
        let week_ms = (USAGE_HALF_LIFE_S * 1000.0) as u64;
        let (users, accounts) = t.at(week_ms, &RunningTotals::default());
        assert!((users[0].gpu_seconds - 50.0).abs() < 1e-9);
        assert!((accounts[0].gpu_seconds - 50.0).abs() < 1e-9);
        // Another 100 GPU-s a week later: 50 + 100 then, 75 a week after that.
        t.finished(1, 2, 100.0, week_ms);
        let (users, _) = t.at(2 * week_ms, &RunningTotals::default());
        assert!((users[0].gpu_seconds - 75.0).abs() < 1e-9);
        // A running 2-GPU job started 10 s ago adds 20 GPU-s.
        let mut running = RunningTotals::default();
        let job = gantry_contract::RunningJob {
            job: gantry_contract::Job {
                user: 1,
                account: 2,
                ..Default::default()
            },
            tasks: vec![gantry_contract::TaskAllocation {
                gpus: vec![gantry_contract::GpuShare {
                    index: 0,
                    milli: 2000,
                }],
                node: 0,
                cpu_milli: 0,
                memory_mib: 0,
            }],
            start_ms: 2 * week_ms - 10_000,
            ..Default::default()
        };
        running.count(&job, true, 0, |_, _| None);
        let (users, _) = t.at(2 * week_ms, &running);
        assert!((users[0].gpu_seconds - 95.0).abs() < 1e-9);
    }

    #[test]
    fn a_shorter_half_life_forgets_faster() {
        let mut t = UsageTracker::with_half_life(3600.0);
        t.finished(1, 2, 100.0, 0);
        let (users, _) = t.at(2 * 3_600_000, &RunningTotals::default());
        assert!((users[0].gpu_seconds - 25.0).abs() < 1e-9);
    }
}
