//! `random`: the Random placement policy of the FGD paper (`docs/fgd-replay/method.md` §7). Each task
//! goes to a feasible node drawn uniformly at random; a sharing task takes a GPU drawn uniformly
//! among those with enough free milli-GPU, a whole-GPU task the lowest-indexed free GPUs. The
//! draws come from a generator seeded by (seed, job id, task index): the same input gives the
//! same plan.
//!
//! Each task is placed like a pod (whole GPUs, a share of one GPU, or CPU only), one after
//! another on the state left by the tasks before it; a job is a gang (all tasks or none).
//!
//! Config: `{"seed"?: u64, "strict"?: bool}`:
//! * `seed`: seeds the draws; defaults to the cycle seed. The daemon changes the cycle seed
//!   every cycle, so set `seed` there for reproducible draws; the simulator keeps the cycle
//!   seed fixed for a run.
//! * `strict` (default false): stop at the first job that does not fit (`plan.stopped_at`);
//!   otherwise later jobs are still placed, like kube-scheduler.
//!
//! The logic lives in `gantry-sharing-core`; this crate only exports it as a plugin.
#![deny(missing_docs)]

gantry_sharing_core::sharing_plugin!(
    /// The `random` placement policy.
    Random,
    gantry_sharing_core::Policy::Random
);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use gantry_sdk::{Cycle, Placement, Plan, Plugin};

    #[test]
    fn metadata_and_config() {
        let mut p = Random::default();
        let m = p.metadata();
        assert_eq!(m.name, "random");
        assert_eq!(m.stages, vec![gantry_sdk::Stage::Placement]);
        assert!(m.config_hint.contains("seed"));
        p.configure(r#"{"seed": 3, "strict": true}"#).unwrap();
        let err = p.configure(r#"{"bogus": 1}"#).unwrap_err();
        assert!(err.contains("bogus"), "{err}");
        let plan = p.place(&Cycle::default(), &[], &[], &[]).unwrap();
        assert_eq!(plan, Plan::default());
    }
}
