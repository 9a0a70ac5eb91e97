//! Which GPUs of one node a task gets, given what is free on each of them.
//!
//! Whole GPUs: the lowest free indices; under `topology` scoring, on a node that
//! reports GPU groups, all from one group (the group with the fewest free GPUs that
//! still holds the task, so that larger groups stay whole), or, when no group holds
//! it, from as few groups as possible. Fractions (< 1000 milli): the fullest GPU that
//! still has room, so partly used GPUs fill up before an empty one is opened.
//!
//! Owns: the choice among a node's GPUs. Does not own which node (`scoring`) or what
//! is free (`timeline`).

use gantry_sdk::MILLI_PER_GPU;

/// Slot offsets (within the node) for a task of `count` whole GPUs, or None.
/// `free[i]` is the milli-GPU the task may use on the node's i-th GPU (0 when the
/// GPU is not allowed). `groups` are the node's GPU groups, used when `grouped`.
pub fn pick_whole(
    free: &[u32],
    count: usize,
    groups: &[Vec<usize>],
    grouped: bool,
) -> Option<Vec<usize>> {
    let is_free = |off: usize| free.get(off) == Some(&MILLI_PER_GPU);
    let total = (0..free.len()).filter(|&o| is_free(o)).count();
    if total < count {
        return None;
    }
    if !grouped || groups.is_empty() || count == 0 {
        return Some(
            (0..free.len())
                .filter(|&o| is_free(o))
                .take(count)
                .collect(),
        );
    }
    let free_in = |g: &Vec<usize>| g.iter().filter(|&&o| is_free(o)).count();
    // Best fit: the group with the fewest free GPUs that still holds the task.
    let best = groups
        .iter()
        .enumerate()
        .map(|(i, g)| (free_in(g), i))
        .filter(|&(n, _)| n >= count)
        .min();
    if let Some((_, i)) = best {
        let mut offs: Vec<usize> = groups[i].iter().copied().filter(|&o| is_free(o)).collect();
        offs.sort_unstable();
        offs.truncate(count);
        return Some(offs);
    }
    // Span as few groups as possible: the fullest-free groups first, then GPUs that
    // belong to no group.
    let mut order: Vec<(usize, usize)> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| (free_in(g), i))
        .collect();
    order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut picked: Vec<usize> = Vec::with_capacity(count);
    for (_, i) in order {
        let mut offs: Vec<usize> = groups[i].iter().copied().filter(|&o| is_free(o)).collect();
        offs.sort_unstable();
        picked.extend(offs.into_iter().take(count - picked.len()));
    }
    let grouped_offs: Vec<usize> = groups.iter().flatten().copied().collect();
    picked.extend(
        (0..free.len())
            .filter(|&o| is_free(o))
            .filter(|o| !grouped_offs.contains(o))
            .take(count - picked.len()),
    );
    picked.sort_unstable();
    (picked.len() == count).then_some(picked)
}

/// The slot offset for a task of `milli` of one GPU: the GPU with the least free
/// share that still fits (lowest offset on ties), or None.
pub fn pick_fraction(free: &[u32], milli: u32) -> Option<usize> {
    free.iter()
        .enumerate()
        .filter(|&(_, &f)| f >= milli && f > 0)
        .min_by_key(|&(i, &f)| (f, i))
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: u32 = MILLI_PER_GPU;

    #[test]
    fn whole_gpus_come_from_one_group_when_one_holds_them() {
        let groups = vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]];
        // GPUs 1 and 2 busy: only group 4-7 holds four.
        let free = [F, 0, 0, F, F, F, F, F];
        assert_eq!(pick_whole(&free, 4, &groups, true), Some(vec![4, 5, 6, 7]));
        // Without grouping, the lowest indices.
        assert_eq!(pick_whole(&free, 4, &groups, false), Some(vec![0, 3, 4, 5]));
        // Two GPUs: the group with the fewest free that holds them (0-3), keeping
        // 4-7 whole.
        assert_eq!(pick_whole(&free, 2, &groups, true), Some(vec![0, 3]));
    }

    #[test]
    fn no_group_holds_the_task_so_it_spans_the_fewest_groups() {
        let groups = vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]];
        // GPUs 1 and 5 busy: three free in each group.
        let free = [F, 0, F, F, F, 0, F, F];
        assert_eq!(pick_whole(&free, 4, &groups, true), Some(vec![0, 2, 3, 4]));
        assert_eq!(pick_whole(&free, 7, &groups, true), None);
    }

    #[test]
    fn fractions_fill_the_fullest_gpu_that_fits() {
        assert_eq!(pick_fraction(&[F, 500, 250, F], 250), Some(2));
        assert_eq!(pick_fraction(&[F, 500, 200, F], 250), Some(1));
        assert_eq!(pick_fraction(&[F, F], 250), Some(0));
        assert_eq!(pick_fraction(&[100, 0], 250), None);
    }
}
