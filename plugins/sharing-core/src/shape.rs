//! The pod shape of one task (`docs/fgd-replay/method.md` §1): what the policies score and book.
//!
//! Owns the mapping from a contract [`TaskGroup`] to a pod (CPU-only, GPU-sharing or
//! whole-GPU), the Kubernetes "non-zero" CPU request used for scoring, the model
//! filter of a task, and the GpuClustering tag of a pod. Does not own feasibility on a
//! node (`node_view`) or any score.

use gantry_sdk::{MILLI_PER_GPU, TaskGroup};

/// The CPU request scoring uses when a pod asks for none (Kubernetes' non-zero default).
pub const DEFAULT_CPU_MILLI: u32 = 100;

/// Model index of a GPU whose model is not in `Cycle::gpu_models` (or past bit 63).
pub const NO_MODEL: u8 = u8::MAX;

/// What kind of pod a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PodKind {
    /// No GPU (n = 0, m = 0).
    CpuOnly,
    /// A share of one GPU (n = 1, m < 1000, or a share the host books as given).
    Sharing,
    /// `n` whole GPUs (m = 1000).
    Whole,
}

/// One task seen as a pod of the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PodShape {
    /// CPU the task asks for, milli-cores (feasibility and booking).
    pub cpu_request: u32,
    /// The non-zero CPU request `c` used by every score: the request, or 100 when 0.
    pub cpu: u32,
    /// Memory the task asks for, MiB (a filter only).
    pub memory_mib: u64,
    /// GPU count `n` (0 for CPU-only pods).
    pub gpus: u32,
    /// Milli-GPU per GPU `m` (0 for CPU-only pods, 1000 for whole GPUs).
    pub milli: u32,
    /// Allowed models as a bitmask over `Cycle::gpu_models`; 0 means any.
    pub model_mask: u64,
    /// The pod's kind.
    pub kind: PodKind,
}

impl PodShape {
    /// The pod of one task of `group`: `gpus = k > 0` is a whole-GPU pod (n = k,
    /// m = 1000); `gpus = 0, gpu_milli = m > 0` a sharing pod (n = 1, m; a share of
    /// exactly 1000 is a one-GPU whole pod); both 0 a CPU-only pod, which has no model
    /// constraint.
    pub fn of(group: &TaskGroup) -> Self {
        let (kind, gpus, milli) = if group.gpus > 0 {
            (PodKind::Whole, group.gpus, MILLI_PER_GPU)
        } else if group.gpu_milli == MILLI_PER_GPU {
            (PodKind::Whole, 1, MILLI_PER_GPU)
        } else if group.gpu_milli > 0 {
            (PodKind::Sharing, 1, group.gpu_milli)
        } else {
            (PodKind::CpuOnly, 0, 0)
        };
        Self {
            cpu_request: group.cpu_milli,
            cpu: non_zero_cpu(group.cpu_milli),
            memory_mib: group.memory_mib,
            gpus,
            milli,
            model_mask: if kind == PodKind::CpuOnly {
                0
            } else {
                group.gpu_model_mask
            },
            kind,
        }
    }

    /// The pod's total GPU request `R = n·m`, milli-GPU.
    pub fn gpu_request(&self) -> u64 {
        u64::from(self.gpus) * u64::from(self.milli)
    }

    /// Whether a GPU of model index `model` (see [`NO_MODEL`]) may run this pod.
    pub fn allows(&self, model: u8) -> bool {
        mask_allows(self.model_mask, model)
    }

    /// The pod's GpuClustering tag as a bit: none for CPU-only pods, bit 0 ("share")
    /// for sharing pods, bit k ("k-gpu") for whole-GPU pods with n = k (k ≥ 63 share
    /// bit 63).
    pub fn tag(&self) -> u64 {
        match self.kind {
            PodKind::CpuOnly => 0,
            PodKind::Sharing => 1,
            PodKind::Whole => 1u64 << self.gpus.clamp(1, 63),
        }
    }
}

/// The non-zero CPU request: `cpu_milli`, or [`DEFAULT_CPU_MILLI`] when it is 0.
pub fn non_zero_cpu(cpu_milli: u32) -> u32 {
    if cpu_milli == 0 {
        DEFAULT_CPU_MILLI
    } else {
        cpu_milli
    }
}

/// Whether `mask` (0 = any) allows model index `model`.
pub fn mask_allows(mask: u64, model: u8) -> bool {
    mask == 0 || (model < 64 && mask & (1u64 << model) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(gpus: u32, gpu_milli: u32, cpu_milli: u32, mask: u64) -> TaskGroup {
        TaskGroup {
            count: 1,
            gpus,
            gpu_milli,
            cpu_milli,
            memory_mib: 512,
            gpu_model_mask: mask,
        }
    }

    #[test]
    fn kinds_and_requests() {
        let whole = PodShape::of(&group(4, 0, 8000, 0b10));
        assert_eq!(whole.kind, PodKind::Whole);
        assert_eq!(
            (whole.gpus, whole.milli, whole.gpu_request()),
            (4, 1000, 4000)
        );
        assert_eq!(whole.tag(), 1 << 4);
        assert!(whole.allows(1) && !whole.allows(0) && !whole.allows(NO_MODEL));

        let share = PodShape::of(&group(0, 250, 0, 0));
        assert_eq!(share.kind, PodKind::Sharing);
        assert_eq!(
            (share.gpus, share.milli, share.gpu_request()),
            (1, 250, 250)
        );
        assert_eq!((share.cpu_request, share.cpu), (0, 100));
        assert_eq!(share.tag(), 1);
        assert!(share.allows(NO_MODEL));

        let full_share = PodShape::of(&group(0, 1000, 1, 0));
        assert_eq!(full_share.kind, PodKind::Whole);
        assert_eq!(full_share.tag(), 1 << 1);

        let cpu = PodShape::of(&group(0, 0, 3000, 0b1));
        assert_eq!(cpu.kind, PodKind::CpuOnly);
        assert_eq!(
            (cpu.gpus, cpu.milli, cpu.model_mask, cpu.tag()),
            (0, 0, 0, 0)
        );
    }
}
