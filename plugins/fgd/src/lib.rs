//! `fgd`: fragmentation gradient descent, the policy of the FGD paper (`docs/fgd-replay/method.md` §8).
//! Each feasible node (and, for a sharing task, each GPU with room) scores
//! `trunc(100·sigmoid(−ΔF/1000))`, where ΔF is how much placing the task changes the node's
//! expected GPU fragmentation F for a target workload; the task goes to the best node and GPU.
//! The target is the `target` config (build it from an original pod list with
//! `gantry_sharing_core::build_target`) or, without one, derived every call from the shapes of
//! the pending and running tasks.
//!
//! Each task is placed like a pod (whole GPUs, a share of one GPU, or CPU only), one after
//! another on the state left by the tasks before it; a job is a gang (all tasks or none).
//! Score ties go to a fixed per-seed node rank (a hash of the node name mixed with the seed).
//!
//! Config: `{"seed"?: u64, "strict"?: bool, "target"?: [...], "total_pods"?: u64}`:
//! * `target`: `[{"cpu_milli": u32, "gpu_milli": u32, "gpus": u32, "models": ["T4", ...],
//!   "count": u64}, ...]`, already in target order and cut to the 95 % prefix; `gpu_milli` is
//!   per GPU (0 for CPU-only shapes), `models` empty means any (unknown names never match).
//! * `total_pods`: pods of the original list (default: the sum of the counts); the weights are
//!   (count/total)/(cum/total), as the authors computed them in floating point.
//! * `seed`: defaults to the cycle seed. The daemon changes the cycle seed every cycle, so set
//!   `seed` there for stable ranks; the simulator keeps the cycle seed fixed for a run.
//! * `strict` (default false): stop at the first job that does not fit (`plan.stopped_at`);
//!   otherwise later jobs are still placed, like kube-scheduler.
//!
//! The logic lives in `gantry-sharing-core`; this crate only exports it as a plugin.
#![deny(missing_docs)]

gantry_sharing_core::sharing_plugin!(
    /// The `fgd` placement policy.
    Fgd,
    gantry_sharing_core::Policy::Fgd
);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use gantry_sdk::{Cycle, Placement, Plan, Plugin};

    #[test]
    fn metadata_and_config() {
        let mut p = Fgd::default();
        let m = p.metadata();
        assert_eq!(m.name, "fgd");
        assert_eq!(m.stages, vec![gantry_sdk::Stage::Placement]);
        assert!(m.config_hint.contains("seed"));
        p.configure(r#"{"seed": 3, "strict": true}"#).unwrap();
        let err = p.configure(r#"{"bogus": 1}"#).unwrap_err();
        assert!(err.contains("bogus"), "{err}");
        let plan = p.place(&Cycle::default(), &[], &[], &[]).unwrap();
        assert_eq!(plan, Plan::default());
    }
}
