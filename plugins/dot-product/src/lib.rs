//! `dot-product`: the DotProd placement policy of the FGD paper (`docs/fgd-replay/method.md` §7,
//! Tetris-style). Each feasible node scores
//! `trunc(100·(1 − ½·[(cpu/128000)·(c/128000) + (L/8000)·(R/8000)]))`, higher for less free
//! capacity; the task goes to the best node, a sharing task to its best-fit GPU.
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
    /// The `dot-product` placement policy.
    DotProduct,
    gantry_sharing_core::Policy::DotProduct
);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use gantry_sdk::{Cycle, Placement, Plan, Plugin};

    #[test]
    fn metadata_and_config() {
        let mut p = DotProduct::default();
        let m = p.metadata();
        assert_eq!(m.name, "dot-product");
        assert_eq!(m.stages, vec![gantry_sdk::Stage::Placement]);
        assert!(m.config_hint.contains("seed"));
        p.configure(r#"{"seed": 3, "strict": true}"#).unwrap();
        let err = p.configure(r#"{"bogus": 1}"#).unwrap_err();
        assert!(err.contains("bogus"), "{err}");
        let plan = p.place(&Cycle::default(), &[], &[], &[]).unwrap();
        assert_eq!(plan, Plan::default());
    }
}
