//! `gpu-clustering`: the GpuClustering placement policy of the FGD paper (`docs/fgd-replay/method.md`
//! §7). It keeps GPU pods of one kind ("share", "k-gpu") together: a node holding only the task's
//! kind scores highest, then one holding it among others, then an empty one, then the rest, plus
//! a bonus for less free GPU; CPU-only tasks score 0 everywhere. The kinds on each node come from
//! the running jobs (their task groups and allocations) and the tasks placed earlier in the same
//! call, so pass `running`. A sharing task takes its best-fit GPU.
//!
//! Each task is placed like a pod (whole GPUs, a share of one GPU, or CPU only), one after
//! another on the state left by the tasks before it; a job is a gang (all tasks or none).
//! Score ties go to a fixed per-seed node rank (a hash of the node name mixed with the seed).
//!
//! Config: `{"seed"?: u64, "strict"?: bool}`:
//! * `seed`: defaults to the cycle seed. The daemon changes the cycle seed every cycle, so set
//!   `seed` there for stable ranks; the simulator keeps the cycle seed fixed for a run.
//! * `strict` (default false): stop at the first job that does not fit (`plan.stopped_at`);
//!   otherwise later jobs are still placed, like kube-scheduler.
//!
//! The logic lives in `gantry-sharing-core`; this crate only exports it as a plugin.
#![deny(missing_docs)]

gantry_sharing_core::sharing_plugin!(
    /// The `gpu-clustering` placement policy.
    GpuClustering,
    gantry_sharing_core::Policy::GpuClustering
);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use gantry_sdk::{Cycle, Placement, Plan, Plugin};

    #[test]
    fn metadata_and_config() {
        let mut p = GpuClustering::default();
        let m = p.metadata();
        assert_eq!(m.name, "gpu-clustering");
        assert_eq!(m.stages, vec![gantry_sdk::Stage::Placement]);
        assert!(m.config_hint.contains("seed"));
        p.configure(r#"{"seed": 3, "strict": true}"#).unwrap();
        let err = p.configure(r#"{"bogus": 1}"#).unwrap_err();
        assert!(err.contains("bogus"), "{err}");
        let plan = p.place(&Cycle::default(), &[], &[], &[]).unwrap();
        assert_eq!(plan, Plan::default());
    }
}
