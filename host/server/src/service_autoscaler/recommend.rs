//! The autoscaler's arithmetic, as the Kubernetes HPA's: from one reading (the metric
//! summed over the ready replicas) to the number of replicas wanted, with a 10 %
//! tolerance, bounds, stabilisation windows (a scale-up takes the lowest recommendation of
//! its window, a scale-down the highest of its own), step limits, and scale to zero after
//! an idle period.
//!
//! Owns: that decision, pure (time is an argument). Does not own reading the metric or
//! applying the decision (`mod.rs`).

use gantry_api::model::AutoscaleSpec;
use std::collections::VecDeque;

/// Within this fraction of the target, nothing changes (the HPA's default).
const TOLERANCE: f64 = 0.1;

/// One reading of the metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// The metric summed over the replicas read.
    pub total: f64,
    /// Replicas read.
    pub ready: u32,
    /// Since the endpoint's last request, ms.
    pub idle_ms: u64,
}

/// The recommendations of one service, newest last.
#[derive(Debug, Default)]
pub struct Recommender {
    recent: VecDeque<(u64, u32)>,
}

impl Recommender {
    /// The replicas wanted now (`now` in ms) for `reading` when `current` are wanted, and
    /// why, in words.
    pub fn decide(
        &mut self,
        spec: &AutoscaleSpec,
        current: u32,
        reading: Reading,
        now: u64,
    ) -> (u32, String) {
        let per_replica = reading.total / f64::from(reading.ready.max(1));
        let ratio = per_replica / spec.target;
        let idle_zero = spec.scale_to_zero_after_s.is_some_and(|after| {
            reading.total == 0.0 && reading.idle_ms >= u64::from(after) * 1000
        });
        let raw = if idle_zero {
            0
        } else if (ratio - 1.0).abs() <= TOLERANCE && current > 0 {
            current
        } else {
            // ceil(total / target), within what a u32 holds.
            let wanted = (reading.total / spec.target).ceil();
            if wanted >= f64::from(spec.max_replicas) {
                spec.max_replicas
            } else {
                wanted.max(0.0) as u32
            }
        };
        let floor = if idle_zero {
            0
        } else {
            spec.min_replicas.max(1)
        };
        let raw = raw.clamp(floor, spec.max_replicas);
        let window = u64::from(spec.scale_up_window_s.max(spec.scale_down_window_s)) * 1000;
        self.recent.push_back((now, raw));
        while self
            .recent
            .front()
            .is_some_and(|(t, _)| now.saturating_sub(*t) > window)
        {
            self.recent.pop_front();
        }
        let within = |s: u32| {
            let s = u64::from(s) * 1000;
            self.recent
                .iter()
                .filter(move |(t, _)| now.saturating_sub(*t) <= s)
                .map(|(_, r)| *r)
        };
        let new = if raw > current {
            let stable = within(spec.scale_up_window_s).min().unwrap_or(raw);
            stable
                .min(current.saturating_add(spec.max_step_up))
                .max(current)
        } else if raw < current {
            let stable = within(spec.scale_down_window_s).max().unwrap_or(raw);
            stable
                .max(current.saturating_sub(spec.max_step_down))
                .min(current)
        } else {
            current
        };
        let mut why = format!(
            "{} = {} over {} ready replica(s) ({:.2} each, target {})",
            spec.metric, reading.total, reading.ready, per_replica, spec.target
        );
        if idle_zero {
            why.push_str(&format!(", no request for {} s", reading.idle_ms / 1000));
        }
        if new != raw {
            why.push_str(&format!(
                "; recommended {raw}, held at {new} by the stabilisation window or step limit"
            ));
        }
        (new, why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> AutoscaleSpec {
        AutoscaleSpec {
            min_replicas: 1,
            max_replicas: 5,
            metric: "queue".into(),
            target: 2.0,
            path: "/metrics".into(),
            period_s: 1,
            scale_up_window_s: 0,
            scale_down_window_s: 10,
            max_step_up: 2,
            max_step_down: 64,
            scale_to_zero_after_s: None,
        }
    }

    fn reading(total: f64, ready: u32) -> Reading {
        Reading {
            total,
            ready,
            idle_ms: 0,
        }
    }

    #[test]
    fn scales_up_on_the_sum_within_the_step_and_the_bounds() {
        let mut r = Recommender::default();
        let (n, why) = r.decide(&spec(), 1, reading(7.0, 1), 0);
        assert_eq!(n, 3, "ceil(7/2) = 4, but at most 2 more at once");
        assert!(why.contains("queue = 7"), "{why}");
        let (n, _) = r.decide(&spec(), 3, reading(100.0, 3), 1000);
        assert_eq!(n, 5);
    }

    #[test]
    fn within_tolerance_nothing_changes() {
        let mut r = Recommender::default();
        assert_eq!(r.decide(&spec(), 2, reading(4.3, 2), 0).0, 2);
    }

    #[test]
    fn scale_down_waits_for_its_window() {
        let mut r = Recommender::default();
        assert_eq!(r.decide(&spec(), 3, reading(6.0, 3), 0).0, 3);
        // Load gone: the window still remembers 3.
        assert_eq!(r.decide(&spec(), 3, reading(0.0, 3), 5_000).0, 3);
        // Past the window: down to the minimum at once (no step limit down here).
        assert_eq!(r.decide(&spec(), 3, reading(0.0, 3), 11_000).0, 1);
    }

    #[test]
    fn scales_to_zero_only_when_idle_long_enough() {
        let mut s = spec();
        s.min_replicas = 0;
        s.scale_to_zero_after_s = Some(5);
        s.scale_down_window_s = 0;
        let mut r = Recommender::default();
        let busy = Reading {
            total: 0.0,
            ready: 1,
            idle_ms: 1000,
        };
        assert_eq!(r.decide(&s, 1, busy, 0).0, 1);
        let idle = Reading {
            idle_ms: 6000,
            ..busy
        };
        assert_eq!(r.decide(&s, 1, idle, 1000).0, 0);
    }
}
