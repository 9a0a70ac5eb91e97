//! One replay of the queue on a virtual clock: the running jobs end when their drawn
//! runtimes say, and at each end the pending jobs start in the live pipeline's priority
//! order, each gang where it fits first (`ClusterModel`), as `first-fit` places them;
//! strictly in order, or with EASY backfill (a job behind a blocked head starts when it
//! fits now and ends before the head's reserved start), as `backfill` does.
//!
//! Owns the replay. Does not own the order (the live cycle), the runtimes (the caller's
//! draws) or the band over replays (`mod.rs`).

use gantry_contract::{ClusterModel, Cycle, Job, JobId, TaskAllocation};
use std::collections::{BTreeMap, HashMap};

/// A pending job's start in one replay, and the job whose end made room for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayStart {
    /// Virtual start, ms since the epoch.
    pub at_ms: u64,
    /// The running or replayed job whose end came just before (none: it starts now).
    pub after: Option<JobId>,
}

/// What a replay starts from.
pub struct ReplayInput<'a> {
    /// The cycle context (time, models, strings).
    pub ctx: &'a Cycle,
    /// Free resources now.
    pub model: &'a ClusterModel,
    /// Running jobs: id, allocations, estimated end.
    pub running: Vec<(JobId, &'a [TaskAllocation], u64)>,
    /// Pending jobs in priority order, each with its drawn runtime.
    pub queue: Vec<(&'a Job, u64)>,
    /// 0: strictly in order; else how many jobs behind a blocked head may backfill.
    pub backfill_depth: usize,
    /// Nothing is forecast past this time.
    pub horizon_ms: u64,
}

/// Ends to come, in time order (ties in insertion order): the job and what it frees.
type Ends = BTreeMap<(u64, u64), (JobId, Vec<TaskAllocation>)>;

/// Replays `input`: the start of every queued job that starts before the horizon.
pub fn replay(input: ReplayInput<'_>) -> HashMap<JobId, ReplayStart> {
    let ctx = input.ctx;
    let mut model = input.model.clone();
    let mut ends: Ends = BTreeMap::new();
    let mut seq = 0u64;
    for (id, tasks, end) in input.running {
        ends.insert((end, seq), (id, tasks.to_vec()));
        seq += 1;
    }
    let mut queue: Vec<Option<(&Job, u64)>> = input.queue.into_iter().map(Some).collect();
    let mut head = 0usize;
    let mut starts = HashMap::new();
    let mut now = ctx.now_ms;
    let mut after: Option<JobId> = None;
    // The head's reserved start while it is blocked (EASY backfill), by head position.
    let mut shadow: Option<(usize, u64)> = None;
    loop {
        // Start what fits now, in order.
        let mut i = head;
        let mut blocked_at: Option<usize> = None;
        let mut tried_behind = 0usize;
        while i < queue.len() {
            let Some((job, runtime)) = queue[i] else {
                i += 1;
                continue;
            };
            if let Some(b) = blocked_at {
                if tried_behind >= input.backfill_depth {
                    break;
                }
                tried_behind += 1;
                let reserve = match shadow {
                    Some((at, t)) if at == b => t,
                    _ => {
                        let t = reserved_start(ctx, &model, &ends, queue[b].map(|q| q.0), now);
                        shadow = Some((b, t));
                        t
                    }
                };
                if now.saturating_add(runtime) > reserve {
                    i += 1;
                    continue;
                }
            }
            match model.fit_gang(ctx, job) {
                Ok(tasks) => {
                    starts.insert(job.id, ReplayStart { at_ms: now, after });
                    ends.insert((now.saturating_add(runtime), seq), (job.id, tasks));
                    seq += 1;
                    queue[i] = None;
                    if blocked_at.is_none() {
                        head = i + 1;
                    }
                }
                Err(_) if blocked_at.is_none() => {
                    blocked_at = Some(i);
                    if input.backfill_depth == 0 {
                        break;
                    }
                }
                Err(_) => {}
            }
            i += 1;
        }
        while head < queue.len() && queue[head].is_none() {
            head += 1;
        }
        if head >= queue.len() {
            break;
        }
        // The next end(s): free what they held.
        let Some((&(at, _), _)) = ends.first_key_value() else {
            break;
        };
        if at > input.horizon_ms {
            break;
        }
        now = at;
        while let Some(entry) = ends.first_entry() {
            if entry.key().0 != at {
                break;
            }
            let (id, tasks) = entry.remove();
            for a in &tasks {
                model.release(a);
            }
            after = Some(id);
        }
    }
    starts
}

/// When `head` would start if only ends came (no other start): the first end after which
/// it fits, or never (`u64::MAX`).
fn reserved_start(
    ctx: &Cycle,
    model: &ClusterModel,
    ends: &Ends,
    head: Option<&Job>,
    now: u64,
) -> u64 {
    let Some(head) = head else {
        return now;
    };
    let mut m = model.clone();
    for (&(at, _), (_, tasks)) in ends {
        for a in tasks {
            m.release(a);
        }
        if m.clone().fit_gang(ctx, head).is_ok() {
            return at;
        }
    }
    u64::MAX
}
