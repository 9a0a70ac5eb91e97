//! How long a job will run, learnt from the jobs that ended: durations kept per key, from
//! the most specific (the same user's job of the same name, or the same array) to the
//! least (the same user), and drawn from when a forecast replays the queue. A draw is
//! capped by the job's time limit; a job with no history runs its time limit, and one with
//! neither a site default.
//!
//! Owns the model and its draws. Does not own where durations come from (the daemon's
//! history, the simulator's replay) or what a key is made of (the caller names keys: user
//! and name for the daemon; shape, GPU model and qos for the Alibaba trace).

use std::collections::{HashMap, VecDeque};

/// Durations kept per key: the newest win (a team's runtimes drift).
pub const SAMPLES_PER_KEY: usize = 64;

/// A key's samples are used when it has at least this many; else the next key's.
pub const MIN_SAMPLES: usize = 3;

/// Durations of ended jobs, per key.
#[derive(Debug, Clone, Default)]
pub struct RuntimeModel {
    by_key: HashMap<String, VecDeque<u64>>,
}

/// Where a job's estimate came from, for the forecast's reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EstimateSource {
    /// Past runtimes of a key (the index of the key in the job's list).
    History(usize),
    /// No history: the time limit.
    TimeLimit,
    /// Neither: the site's default runtime.
    Default,
}

impl RuntimeModel {
    /// An empty model.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that a job with `keys` ran `duration_ms`.
    pub fn observe(&mut self, keys: &[String], duration_ms: u64) {
        for k in keys {
            let samples = self.by_key.entry(k.clone()).or_default();
            if samples.len() == SAMPLES_PER_KEY {
                samples.pop_front();
            }
            samples.push_back(duration_ms);
        }
    }

    /// Keys known.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Whether nothing was observed.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// The samples of the most specific key of `keys` with enough of them (or, when none
    /// has enough, the one with most), and that key's position.
    pub fn samples(&self, keys: &[String]) -> Option<(usize, &VecDeque<u64>)> {
        let known = keys
            .iter()
            .enumerate()
            .filter_map(|(i, k)| Some((i, self.by_key.get(k)?)))
            .filter(|(_, s)| !s.is_empty());
        let mut best: Option<(usize, &VecDeque<u64>)> = None;
        for (i, s) in known {
            if s.len() >= MIN_SAMPLES {
                return Some((i, s));
            }
            if best.is_none_or(|(_, b)| s.len() > b.len()) {
                best = Some((i, s));
            }
        }
        best
    }

    /// A runtime for a job with `keys` and `time_limit_ms` (0: none), drawn with `u` in
    /// [0, 1) from its key's samples (0.5: the median), capped by the time limit.
    pub fn draw(
        &self,
        keys: &[String],
        time_limit_ms: u64,
        default_ms: u64,
        u: f64,
    ) -> (u64, EstimateSource) {
        let Some((key, samples)) = self.samples(keys) else {
            return if time_limit_ms > 0 {
                (time_limit_ms, EstimateSource::TimeLimit)
            } else {
                (default_ms, EstimateSource::Default)
            };
        };
        let mut sorted: Vec<u64> = samples.iter().copied().collect();
        sorted.sort_unstable();
        let at = ((u.clamp(0.0, 1.0) * sorted.len() as f64) as usize).min(sorted.len() - 1);
        let d = sorted[at];
        let d = if time_limit_ms > 0 {
            d.min(time_limit_ms)
        } else {
            d
        };
        (d.max(1), EstimateSource::History(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_most_specific_key_with_enough_history_answers() {
        let mut m = RuntimeModel::new();
        for d in [10, 20, 30] {
            m.observe(&keys(&["alice/train", "alice"]), d);
        }
        m.observe(&keys(&["alice/eval", "alice"]), 1000);
        // alice/eval has one sample: alice's four answer.
        let (d, src) = m.draw(&keys(&["alice/eval", "alice"]), 0, 99, 0.5);
        assert_eq!((d, src), (30, EstimateSource::History(1)));
        let (d, _) = m.draw(&keys(&["alice/train", "alice"]), 0, 99, 0.0);
        assert_eq!(d, 10);
        // Capped by the time limit.
        let (d, _) = m.draw(&keys(&["alice/train", "alice"]), 15, 99, 0.99);
        assert_eq!(d, 15);
    }

    #[test]
    fn no_history_is_the_time_limit_then_the_default() {
        let m = RuntimeModel::new();
        assert_eq!(
            m.draw(&keys(&["bob"]), 7_000, 99, 0.5),
            (7_000, EstimateSource::TimeLimit)
        );
        assert_eq!(
            m.draw(&keys(&["bob"]), 0, 99, 0.5),
            (99, EstimateSource::Default)
        );
    }

    #[test]
    fn a_key_keeps_only_its_newest_samples() {
        let mut m = RuntimeModel::new();
        for d in 0..(SAMPLES_PER_KEY as u64 + 10) {
            m.observe(&keys(&["k"]), d);
        }
        let (_, s) = m.samples(&keys(&["k"])).unwrap();
        assert_eq!(s.len(), SAMPLES_PER_KEY);
        assert_eq!(s.front(), Some(&10));
    }
}
