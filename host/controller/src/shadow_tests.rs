//! The snapshot recorder's bound: it keeps the last `cap` cycles with pending jobs and lets
//! the oldest go while they hold more than `cap * VIEWS_PER_CYCLE` job views, so the views
//! of jobs that ended long ago (however long the queue was) are forgotten.

use super::{Recorder, VIEWS_PER_CYCLE};
use gantry_contract::{Job, RunningJob};
use gantry_engine::Snapshot;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A cycle `id` whose snapshot holds `pending` pending jobs and `running` running ones.
fn cycle(id: u64, pending: usize, running: usize) -> Arc<Snapshot> {
    let mut s = Snapshot::default();
    s.ctx.id = id;
    s.pending = (0..pending as u64)
        .map(|j| Job {
            id: id * 1_000_000 + j,
            ..Job::default()
        })
        .collect();
    s.running = (0..running).map(|_| RunningJob::default()).collect();
    Arc::new(s)
}

/// (ids of the kept cycles, oldest first; job views held, as counted and as recounted).
fn census(r: &Recorder) -> (Vec<u64>, usize, usize) {
    let ids = r.cycles.iter().map(|(s, _)| s.ctx.id).collect();
    let recount = r
        .cycles
        .iter()
        .map(|(s, _)| s.pending.len() + s.running.len())
        .sum();
    (ids, r.views, recount)
}

#[test]
fn keeps_the_last_cap_cycles_with_pending_jobs() {
    let mut r = Recorder::new(3);
    for id in 1..=5 {
        r.record(cycle(id, 2, 1), BTreeMap::new());
    }
    // A cycle with nothing pending is not kept.
    r.record(cycle(6, 0, 4), BTreeMap::new());
    assert_eq!(census(&r), (vec![3, 4, 5], 9, 9));
}

#[test]
fn a_long_queue_does_not_grow_what_is_kept() {
    let cap = 4;
    let max_views = cap * VIEWS_PER_CYCLE;
    let mut r = Recorder::new(cap);
    // Each cycle holds half the budget: at most two of them are kept, the newest.
    for id in 1..=10 {
        r.record(
            cycle(id, VIEWS_PER_CYCLE * cap / 2 - 10, 10),
            BTreeMap::new(),
        );
        let (_, views, recount) = census(&r);
        assert!(
            views <= max_views,
            "{views} views kept, at most {max_views}"
        );
        assert_eq!(views, recount);
    }
    assert_eq!(census(&r).0, vec![9, 10]);
    // Once the queue is short again, cycles fill the count again and the views of the
    // long queue's jobs (ended by now) are all let go.
    for id in 11..=20 {
        r.record(cycle(id, 5, 0), BTreeMap::new());
    }
    assert_eq!(census(&r), (vec![17, 18, 19, 20], 20, 20));
    assert!(
        r.cycles
            .iter()
            .all(|(s, _)| s.pending.iter().all(|j| j.id / 1_000_000 >= 17))
    );
}

#[test]
fn the_newest_cycle_is_kept_even_past_the_bound() {
    let mut r = Recorder::new(2);
    r.record(cycle(1, 3, 0), BTreeMap::new());
    r.record(cycle(2, 2 * VIEWS_PER_CYCLE + 1, 0), BTreeMap::new());
    assert_eq!(
        census(&r),
        (vec![2], 2 * VIEWS_PER_CYCLE + 1, 2 * VIEWS_PER_CYCLE + 1)
    );
}

#[test]
fn recording_off_keeps_nothing() {
    let mut r = Recorder::new(0);
    r.record(cycle(1, 5, 5), BTreeMap::new());
    assert_eq!(census(&r), (vec![], 0, 0));
}
