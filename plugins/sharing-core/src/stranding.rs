//! The stranding-aware gradient: FGD's fragmentation gradient with four changes, for the
//! `stranding` policy.
//!
//! * **Memory strands GPUs too.** A shape whose memory does not fit on a node cannot use the
//!   node's GPUs, exactly as FGD treats a shape that lacks CPU (FGD models CPU and GPU only).
//! * **The target is learnt online**, every call, from the tasks the call sees (pending and
//!   running), every shape `(CPU, memory, GPU count, share, models)` kept: no trace file,
//!   and rare model-pinned shapes still count (FGD keeps the shapes covering 95 % of the
//!   pods of a fixed list).
//! * **A coarser score.** `trunc(100·sigmoid(−ΔF/1400))` instead of FGD's `/1000`: more
//!   nodes tie, and ties go to the fixed per-seed rank, which packs tasks onto the same
//!   nodes first-fit style (comparing ΔF exactly does worse: `docs/fgd-replay/README.md`).
//! * **CPU-only tasks strand the fewest GPUs.** Their ties go to the node with the least
//!   free GPU, so they fill nodes whose GPUs are taken before nodes whose GPUs still need
//!   the CPU.
//!
//! Owns: the target of a call and the options of the policy. Does not own fragmentation
//! arithmetic (`fgd::frag`), scoring (`fgd::scorer`) or the node choice (`place`).

use crate::fgd::memo::KeyHasher;
use crate::fgd::scorer::Measure;
use crate::fgd::target::{Target, TraceShape, build_target_covering};
use gantry_sdk::{Cycle, Job, RunningJob, TaskGroup};
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// How the target weighs shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weigh {
    /// By task count, as FGD does.
    Tasks,
    /// By the GPU each task asks for (`n·m` milli-GPU); CPU-only shapes weigh nothing.
    GpuDemand,
}

/// The knobs of the stranding-aware gradient. The defaults are the policy, one setting for
/// every workload (`docs/fgd-replay/README.md` says how they were chosen); the other values
/// exist to measure what each part is worth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrandingOptions {
    /// How shapes are weighed (default: by tasks, as FGD).
    pub weigh: Weigh,
    /// Share of the weight the kept shapes cover, percent (default 100: every shape seen;
    /// FGD keeps 95).
    pub coverage_pct: u32,
    /// What the scorer measures (default: memory counts, scale 1400).
    pub measure: Measure,
    /// Score ties of CPU-only tasks go to the node with the least free GPU first (default),
    /// else straight to the rank.
    pub cpu_only_packed: bool,
}

impl Default for StrandingOptions {
    fn default() -> Self {
        Self {
            weigh: Weigh::Tasks,
            coverage_pct: 100,
            measure: Measure {
                memory: true,
                scale: 1400,
            },
            cpu_only_packed: true,
        }
    }
}

/// A task's raw request: GPUs and milli-GPU, CPU, memory (0 unless measured), model mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RequestKey([u64; 4]);

impl Hash for RequestKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        for w in self.0 {
            state.write_u64(w);
        }
    }
}

/// The target of one call: every task of the pending `jobs` and the `running` jobs, by
/// shape (with memory when the measure counts it), weighed as `opts` says, cut to the
/// shortest prefix covering `opts.coverage_pct` % of the weight.
pub fn demand_target(
    ctx: &Cycle,
    jobs: &[Job],
    running: &[RunningJob],
    opts: &StrandingOptions,
) -> Target {
    // Tasks counted by their raw request first (no allocation per task: a call may carry
    // thousands of running jobs), then turned into shapes once per distinct request.
    // Hashed with a multiply hasher over four words: SipHash over a tuple cost more than
    // the rest of the policy.
    let mut by_request: HashMap<RequestKey, u64, BuildHasherDefault<KeyHasher>> =
        HashMap::default();
    let groups = jobs
        .iter()
        .chain(running.iter().map(|r| &r.job))
        .flat_map(|j| j.tasks.iter());
    for g in groups {
        let memory = if opts.measure.memory { g.memory_mib } else { 0 };
        let key = RequestKey([
            u64::from(g.gpus) | u64::from(g.gpu_milli) << 32,
            u64::from(g.cpu_milli),
            memory,
            g.gpu_model_mask,
        ]);
        *by_request.entry(key).or_default() += u64::from(g.count);
    }
    let mut weights: BTreeMap<TraceShape, u64> = BTreeMap::new();
    for (RequestKey([gpus_and_milli, cpu_milli, memory_mib, gpu_model_mask]), count) in by_request {
        let (gpus, gpu_milli) = (gpus_and_milli as u32, (gpus_and_milli >> 32) as u32);
        let cpu_milli = cpu_milli as u32;
        let group = TaskGroup {
            count: 1,
            gpus,
            gpu_milli,
            cpu_milli,
            memory_mib,
            gpu_model_mask,
        };
        let mut shape = TraceShape::of_task(ctx, &group);
        shape.memory_mib = memory_mib;
        let per_task = match opts.weigh {
            Weigh::Tasks => 1,
            Weigh::GpuDemand => u64::from(shape.gpus) * u64::from(shape.gpu_milli),
        };
        let w = per_task.saturating_mul(count);
        if w > 0 {
            *weights.entry(shape).or_default() += w;
        }
    }
    let pairs: Vec<(TraceShape, u64)> = weights.into_iter().collect();
    build_target_covering(&pairs, opts.coverage_pct)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn job(id: u64, count: u32, gpus: u32, gpu_milli: u32, memory_mib: u64) -> Job {
        Job {
            id,
            tasks: vec![TaskGroup {
                count,
                gpus,
                gpu_milli,
                cpu_milli: 4000,
                memory_mib,
                gpu_model_mask: 0,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn memory_strands_gpus_like_cpu_and_the_score_is_coarser() {
        use crate::fgd::frag::{LACK_CPU, Room, SATISFIED, ShapeFit, classify};
        use crate::fgd::target::ResolvedShape;
        let shape = ResolvedShape {
            cpu: 4000,
            milli: 1000,
            gpus: 1,
            cpu_only: false,
            restricted: false,
            mask: 0,
            memory: 65_536,
            count: 1,
            weight: 1.0,
        };
        let fit = ShapeFit {
            access: true,
            count: 2,
            sum: 2000,
        };
        let room = |memory| Room { cpu: 8000, memory };
        // Two free GPUs, CPU enough: with the memory the shape fits; without, both GPUs
        // are stranded for it. FGD's room (CPU only) never lacks memory.
        assert_eq!(classify(&shape, room(65_536), 2000, fit), (SATISFIED, 0));
        assert_eq!(classify(&shape, room(32_768), 2000, fit), (LACK_CPU, 2000));
        assert_eq!(classify(&shape, 8000i64, 2000, fit), (SATISFIED, 0));
        // A scale of 1400 folds gradients FGD tells apart into one level; 0 is exact.
        let coarse = Measure {
            memory: true,
            scale: 1400,
        };
        assert_eq!(Measure::default().score(0.0, 30.0), 49);
        assert_eq!(Measure::default().score(0.0, 45.0), 48);
        assert_eq!(coarse.score(0.0, 30.0), coarse.score(0.0, 45.0));
        let exact = Measure { scale: 0, ..coarse };
        assert_eq!(exact.score(0.0, 30.0), -30_000);
    }

    #[test]
    fn shapes_weigh_by_gpu_demand_with_their_memory() {
        // 10 CPU-only tasks, 4 quarter-GPU tasks, one 8-GPU task: by demand the 8-GPU shape
        // leads (8000 against 4·250 = 1000), CPU-only shapes weigh nothing.
        let jobs = [
            job(1, 10, 0, 0, 1024),
            job(2, 4, 0, 250, 2048),
            job(3, 1, 8, 0, 65_536),
        ];
        let opts = StrandingOptions {
            weigh: Weigh::GpuDemand,
            ..StrandingOptions::default()
        };
        let t = demand_target(&Cycle::default(), &jobs, &[], &opts);
        let got: Vec<(u32, u32, u64, u64)> = t
            .target
            .iter()
            .map(|e| (e.gpus, e.gpu_milli, e.memory_mib, e.count))
            .collect();
        assert_eq!(got, vec![(8, 1000, 65_536, 8000), (1, 250, 2048, 1000)]);
        // By tasks, without memory: FGD's weighing.
        let fgd_like = StrandingOptions {
            weigh: Weigh::Tasks,
            coverage_pct: 100,
            measure: Measure::default(),
            cpu_only_packed: false,
        };
        let t = demand_target(&Cycle::default(), &jobs, &[], &fgd_like);
        let counts: Vec<(u32, u64, u64)> = t
            .target
            .iter()
            .map(|e| (e.gpus, e.memory_mib, e.count))
            .collect();
        assert_eq!(counts, vec![(0, 0, 10), (1, 0, 4), (8, 0, 1)]);
    }
}
