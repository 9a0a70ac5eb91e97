//! Which MIG slices a whole-device task takes: contract 0.3 names each slice's GPU
//! (`gpu.parent`), and the model packs slices by GPU with it (`wit/0.3.0/README.md`).
//!
//! Owns that choice among devices already known usable and free. Does not own which
//! devices are usable (`cluster.rs`: health, model mask) or booking them.

use super::GpuSlot;
use crate::types::MILLI_PER_GPU;

/// The `n` devices a whole-device task takes of `free` (usable and free, in index order):
/// whole GPUs first, lowest index first; then MIG slices (contract 0.3's `parent`), from
/// a GPU that can give all `n` if one can, and among GPUs the one with the fewest free
/// slices first, so slices pack onto GPUs already in use and whole GPUs stay free for
/// their administrator to re-partition. Without slices this is the first `n`.
pub(super) fn slices_packed<'a>(
    all: &[GpuSlot],
    mut free: Vec<&'a GpuSlot>,
    n: usize,
) -> Vec<&'a GpuSlot> {
    if free.iter().all(|g| g.parent.is_none()) {
        free.truncate(n);
        return free;
    }
    let free_on = |parent: u32| {
        all.iter()
            .filter(|g| g.parent == Some(parent) && g.healthy && g.free_milli == MILLI_PER_GPU)
            .count()
    };
    let usable_on =
        |parent: u32, free: &[&GpuSlot]| free.iter().filter(|g| g.parent == Some(parent)).count();
    let keys: Vec<(u8, u8, usize, u32, u32)> = free
        .iter()
        .map(|g| match g.parent {
            None => (0, 0, 0, 0, g.index),
            Some(p) => (1, u8::from(usable_on(p, &free) < n), free_on(p), p, g.index),
        })
        .collect();
    let mut order: Vec<usize> = (0..free.len()).collect();
    order.sort_by_key(|&i| keys[i]);
    order.into_iter().take(n).map(|i| free[i]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(index: u32, parent: Option<u32>, free: bool) -> GpuSlot {
        GpuSlot {
            index,
            model_index: Some(0),
            free_milli: if free { MILLI_PER_GPU } else { 0 },
            healthy: true,
            parent,
        }
    }

    fn pick(all: &[GpuSlot], n: usize) -> Vec<u32> {
        let free: Vec<&GpuSlot> = all
            .iter()
            .filter(|g| g.free_milli == MILLI_PER_GPU)
            .collect();
        slices_packed(all, free, n)
            .iter()
            .map(|g| g.index)
            .collect()
    }

    #[test]
    fn whole_gpus_keep_index_order() {
        let all = [
            slot(0, None, false),
            slot(1, None, true),
            slot(2, None, true),
        ];
        assert_eq!(pick(&all, 1), [1]);
        assert_eq!(pick(&all, 2), [1, 2]);
    }

    #[test]
    fn a_slice_goes_to_the_gpu_already_in_use_leaving_the_idle_gpu_whole() {
        // GPU 0: two free slices. GPU 1: one slice taken, one free.
        let all = [
            slot(1000, Some(0), true),
            slot(1001, Some(0), true),
            slot(1010, Some(1), false),
            slot(1011, Some(1), true),
        ];
        assert_eq!(pick(&all, 1), [1011]);
    }

    #[test]
    fn a_tasks_slices_come_from_one_gpu_when_one_can_give_them_all() {
        // GPU 0 has one free slice (the busiest), GPU 1 three: two slices come from GPU 1.
        let all = [
            slot(1000, Some(0), true),
            slot(1001, Some(0), false),
            slot(1010, Some(1), true),
            slot(1011, Some(1), true),
            slot(1012, Some(1), true),
        ];
        assert_eq!(pick(&all, 2), [1010, 1011]);
        // Three from no single GPU at all: the busiest GPU's first, then the next.
        let all = [
            slot(1000, Some(0), true),
            slot(1001, Some(0), false),
            slot(1010, Some(1), true),
            slot(1011, Some(1), true),
        ];
        assert_eq!(pick(&all, 3), [1000, 1010, 1011]);
    }

    #[test]
    fn whole_gpus_come_before_slices_for_a_task_that_allows_any_model() {
        let all = [slot(3, None, true), slot(1000, Some(0), true)];
        assert_eq!(pick(&all, 1), [3]);
        assert_eq!(pick(&all, 2), [3, 1000]);
    }
}
