//! `gantry-sharing-core`: the six GPU-sharing placement policies of the FGD paper
//! (Weng et al., USENIX ATC '23; `docs/fgd-replay/method.md` §4–§8) as one library
//! that the thin plugin crates `random`, `dot-product`, `gpu-clustering`,
//! `gpu-packing`, `best-fit` and `fgd` wrap, and that the simulator can call natively
//! (for instance [`build_target`] to build FGD's target workload from a pod list).
//!
//! Every task of a job is placed like a pod: `gpus = k > 0` is a whole-GPU pod
//! (n = k, m = 1000), `gpus = 0, gpu_milli = m > 0` a GPU-sharing pod (n = 1, m), both
//! 0 a CPU-only pod; `gpu_model_mask` is the pod's model list. Each policy gives every
//! feasible node an integer score; the pod goes to the best node, ties to a fixed
//! per-seed node rank (a hash of the node name mixed with the seed; config `seed`,
//! default the cycle seed, which the daemon changes every cycle), and its GPUs are
//! chosen as `docs/fgd-replay/method.md` §6 says.
//!
//! Owns: everything the plugins share. Modules: [`shape`] (task → pod),
//! [`node_view`] (free state, feasibility, booking), [`rank`] (tie-break, RNG),
//! [`policies`] (the simple scores), [`fgd`] (target, fragmentation, gradient, memo),
//! [`assign`] (GPU choice), [`place`] (the loop producing a `Plan`), [`explain`]
//! (pending reasons), [`config`], and [`sharing_plugin!`], the body of each plugin crate.
#![deny(missing_docs)]

pub mod assign;
pub mod config;
pub mod explain;
pub mod fgd;
pub mod node_view;
pub mod place;
mod plugin_macro;
pub mod policies;
pub mod rank;
pub mod shape;
pub mod stranding;

pub use fgd::{Target, TargetEntry, TraceShape, build_target};
pub use place::SharingPlacer;
pub use policies::Policy;
