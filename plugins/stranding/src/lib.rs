//! `stranding`: Gantry's own placement policy, FGD's fragmentation gradient made aware of
//! what strands GPUs besides GPU leftovers (`gantry_sharing_core::stranding`). A node's
//! expected fragmentation F counts, for every shape of a target workload, the GPUs that shape
//! could not use there; a task goes where it raises F least. Unlike `fgd`:
//! * memory counts like CPU: a shape whose memory no longer fits strands the node's GPUs;
//! * the target is learnt every call from the pending and running tasks, every shape kept
//!   (no trace file to configure);
//! * the score is coarser, `trunc(100·sigmoid(−ΔF/1400))`, so more ties go to the fixed
//!   per-seed node rank (a hash of the node name mixed with the seed) and tasks pack;
//! * CPU-only tasks' ties go to the node with the least free GPU.
//!
//! It is work-conserving: a task that fits somewhere is always placed. Each task is placed
//! like a pod (whole GPUs, a share of one GPU, or CPU only), one after another on the state
//! left by the tasks before it; a job is a gang (all tasks or none).
//!
//! Config: `{"seed"?: u64, "strict"?: bool, "memory"?: bool, "coverage_pct"?: u32,
//! "scale"?: u32, "cpu_only_ties"?: "packed" | "rank", "weigh"?: "tasks" | "gpu-demand"}`.
//! The defaults are the policy, one setting for every workload; the other values exist to
//! measure what each part is worth (`docs/fgd-replay/README.md`).
//!
//! The logic lives in `gantry-sharing-core`; this crate only exports it as a plugin.
#![deny(missing_docs)]

gantry_sharing_core::sharing_plugin!(
    /// The `stranding` placement policy.
    Stranding,
    gantry_sharing_core::Policy::Stranding
);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use gantry_sdk::{Cycle, Placement, Plan, Plugin};

    #[test]
    fn metadata_and_config() {
        let mut p = Stranding::default();
        let m = p.metadata();
        assert_eq!(m.name, "stranding");
        assert_eq!(m.stages, vec![gantry_sdk::Stage::Placement]);
        assert!(m.config_hint.contains("weigh"));
        p.configure(r#"{"seed": 3, "weigh": "gpu-demand", "memory": false, "scale": 0}"#)
            .unwrap();
        let err = p.configure(r#"{"weigh": "pods"}"#).unwrap_err();
        assert!(err.contains("weigh"), "{err}");
        let err = p.configure(r#"{"cpu_only_ties": "best"}"#).unwrap_err();
        assert!(err.contains("cpu_only_ties"), "{err}");
        let err = p.configure(r#"{"coverage_pct": 0}"#).unwrap_err();
        assert!(err.contains("coverage_pct"), "{err}");
        let err = p.configure(r#"{"target": []}"#).unwrap_err();
        assert!(err.contains("target"), "{err}");
        let plan = p.place(&Cycle::default(), &[], &[], &[]).unwrap();
        assert_eq!(plan, Plan::default());
    }
}
