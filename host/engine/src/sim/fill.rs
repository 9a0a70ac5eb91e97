//! Fill mode, the protocol of the FGD paper (`docs/fgd-replay/method.md` §3, §9):
//! jobs are offered one at a time in sequence, each gets exactly one scheduling cycle,
//! a job that does not start is dropped for good, and nothing ever departs. After each
//! offer the arrived demand (failed jobs included) and the allocated milli-GPU are
//! recorded; [`allocation_curve`] turns them into GPU allocation against arrived
//! workload.
//!
//! Owns: the offer loop and the paper's metric. Does not own how the sequence is
//! built (the daemon's trace loader) or where jobs go (the placement plugin).

use super::input::{SimJob, SimNode, model_list};
use super::state::SimState;
use crate::cycle::run_cycle;
use crate::pipeline::Pipeline;
use gantry_contract::JobId;
use serde::{Deserialize, Serialize};

/// After one offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FillPoint {
    /// Milli-GPU requested by every job offered so far, placed or not.
    pub arrived_milli: u64,
    /// Milli-GPU allocated in the cluster.
    pub allocated_milli: u64,
    /// Whether this job was placed.
    pub placed: bool,
}

/// What a fill run produced.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FillResult {
    /// One point per offered job.
    pub points: Vec<FillPoint>,
    /// GPU capacity of the cluster, milli-GPU.
    pub capacity_milli: u64,
    /// Jobs placed.
    pub placed: usize,
    /// Jobs that found no node.
    pub failed: usize,
    /// Plugin faults (a faulting placement places nothing).
    pub faults: u64,
}

/// Offers `sequence` one job at a time to `live`'s placement; stops early once the
/// arrived demand reaches `stop_at_share` of the GPU capacity (e.g. 1.3), if given.
pub fn run_fill(
    nodes: &[SimNode],
    sequence: &[SimJob],
    seed: u64,
    stop_at_share: Option<f64>,
    live: &mut Pipeline,
    progress: &mut dyn FnMut(usize, usize),
) -> FillResult {
    let mut st = SimState::new(nodes, model_list(nodes, sequence), seed);
    let (_, capacity_milli) = st.gpu_allocation();
    let mut out = FillResult {
        capacity_milli,
        ..FillResult::default()
    };
    let (mut arrived, mut allocated) = (0u64, 0u64);
    for (i, spec) in sequence.iter().enumerate() {
        if stop_at_share.is_some_and(|s| arrived as f64 >= s * capacity_milli as f64) {
            break;
        }
        let id = i as JobId + 1;
        let job = st.contract_job(id, spec);
        st.snap.pending.clear();
        st.snap.pending.push(job);
        st.prepare_cycle(id, 0);
        let outcome = run_cycle(&st.snap, live, None);
        out.faults += outcome.faults.len() as u64;
        arrived += spec.gpu_milli_total();
        let placed = match outcome.starts.into_iter().find(|s| s.job == id) {
            Some(s) => {
                st.start(id, s.tasks, 0, s.score);
                allocated += spec.gpu_milli_total();
                true
            }
            None => false,
        };
        st.snap.pending.clear();
        if placed {
            out.placed += 1;
        } else {
            out.failed += 1;
        }
        out.points.push(FillPoint {
            arrived_milli: arrived,
            allocated_milli: allocated,
            placed,
        });
        if i % 256 == 0 || i + 1 == sequence.len() {
            progress(i + 1, sequence.len());
        }
    }
    out
}

/// Rounds half to even at `decimals` places, as numpy does (scale, `rint`, unscale).
pub fn round_half_even(x: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (x * scale).round_ties_even() / scale
}

/// The allocation curve of §9: for x = 0..=`max_pct`, the mean GPU allocation (% of
/// capacity, 2 decimals) over the offers whose arrived workload rounds to x % (or,
/// when there are none, lies within x ± 1 %). None where no offer is near x.
pub fn allocation_curve(result: &FillResult, max_pct: u32) -> Vec<(u32, Option<f64>)> {
    let gpus = result.capacity_milli as f64 / 1000.0;
    if gpus <= 0.0 {
        return (0..=max_pct).map(|x| (x, None)).collect();
    }
    let events: Vec<(i64, f64)> = result
        .points
        .iter()
        .map(|p| {
            let a = round_half_even(p.arrived_milli as f64 / gpus / 10.0, 0) as i64;
            let u = round_half_even(p.allocated_milli as f64 / gpus / 10.0, 2);
            (a, u)
        })
        .collect();
    let mean = |pick: &dyn Fn(i64) -> bool| -> Option<f64> {
        let vals: Vec<f64> = events
            .iter()
            .filter(|(a, _)| pick(*a))
            .map(|e| e.1)
            .collect();
        (!vals.is_empty()).then(|| round_half_even(pairwise_sum(&vals) / vals.len() as f64, 2))
    };
    (0..=max_pct)
        .map(|x| {
            let x64 = i64::from(x);
            let exact = mean(&|a| a == x64);
            (
                x,
                exact.or_else(|| mean(&|a| (x64 - 1..=x64 + 1).contains(&a))),
            )
        })
        .collect()
}

/// Sum by pairwise splitting (numpy's summation order for means of long arrays, to
/// within the last bit).
fn pairwise_sum(v: &[f64]) -> f64 {
    if v.len() <= 8 {
        return v.iter().sum();
    }
    let mid = v.len() / 2;
    pairwise_sum(&v[..mid]) + pairwise_sum(&v[mid..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_even_rounding_matches_numpy() {
        assert_eq!(round_half_even(0.5, 0), 0.0);
        assert_eq!(round_half_even(1.5, 0), 2.0);
        assert_eq!(round_half_even(2.5, 0), 2.0);
        assert_eq!(round_half_even(99.125, 2), 99.12);
    }

    #[test]
    fn curve_uses_exact_points_then_neighbours() {
        // 10 GPUs: 100 milli = 1 %.
        let pts = |arrived: &[u64], alloc: &[u64]| FillResult {
            points: arrived
                .iter()
                .zip(alloc)
                .map(|(a, u)| FillPoint {
                    arrived_milli: *a,
                    allocated_milli: *u,
                    placed: true,
                })
                .collect(),
            capacity_milli: 10_000,
            ..FillResult::default()
        };
        let r = pts(&[100, 100, 300], &[100, 50, 300]);
        let c = allocation_curve(&r, 5);
        assert_eq!(c[1], (1, Some(0.75)));
        // x = 2 has no exact point: 1 % and 3 % events are used.
        assert_eq!(c[2], (2, Some(round_half_even((1.0 + 0.5 + 3.0) / 3.0, 2))));
        assert_eq!(c[5], (5, None));
    }
}
