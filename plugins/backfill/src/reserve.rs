//! The earliest start of a blocked job: walk the timeline's events in time order
//! from what is free now (running jobs and jobs started this cycle ending,
//! reservations taking and giving back), and at each instant where enough is free in
//! total, try to fit the job against that instant's layer and every reservation
//! checkpoint it would overlap. The first instant that fits, within the planning
//! window, is the reservation.
//!
//! Cost: one copy of the free layer, one pass over the events, and a fit only at
//! instants whose totals (milli-GPU, whole GPUs, CPU) could hold the job; for a
//! single-task job, after the first failed fit, only on nodes that changed since.
//!
//! Owns: the search. Does not own the bookkeeping of a reservation once made
//! (`timeline`) or its message (`reason`).

use crate::scoring::{Fitter, NodeOrder, Scoring};
use crate::timeline::{Booking, Event, Layer, Timeline};
use crate::topology::Topo;
use gantry_sdk::{Job, JobId, MILLI_PER_GPU};
use std::ops::Range;

/// A future start held for a blocked job.
#[derive(Debug, Clone)]
pub struct Reservation {
    /// The job.
    pub job: JobId,
    /// Start, ms.
    pub at_ms: u64,
    /// End by its time limit (None: it never ends for planning).
    pub end_ms: Option<u64>,
    /// Where it will run.
    pub bookings: Vec<Booking>,
    /// Jobs that end on its nodes by its start, sorted.
    pub waits_for: Vec<JobId>,
}

/// Totals over usable resources, kept up to date event by event.
#[derive(Debug, Clone, Copy, Default)]
struct Totals {
    milli: u64,
    whole: u64,
    cpu: u64,
}

impl Totals {
    fn of(topo: &Topo, layer: &Layer) -> Self {
        let up = (0..topo.nodes.len()).filter(|&p| topo.nodes[p].up);
        Totals {
            milli: layer.gpu.iter().map(|&m| u64::from(m)).sum(),
            whole: layer.gpu.iter().filter(|&&m| m == MILLI_PER_GPU).count() as u64,
            cpu: up.map(|p| u64::from(layer.cpu[p])).sum(),
        }
    }

    fn holds(&self, need: &Totals) -> bool {
        self.milli >= need.milli && self.whole >= need.whole && self.cpu >= need.cpu
    }

    fn apply(&mut self, topo: &Topo, layer: &mut Layer, ev: &Event) {
        for b in &ev.bookings {
            if !topo.nodes[b.pos].up {
                continue;
            }
            let cpu = &mut layer.cpu[b.pos];
            self.cpu -= u64::from(*cpu);
            *cpu = if ev.release {
                cpu.saturating_add(b.cpu)
            } else {
                cpu.saturating_sub(b.cpu)
            };
            self.cpu += u64::from(*cpu);
            let mem = &mut layer.mem[b.pos];
            *mem = if ev.release {
                mem.saturating_add(b.mem)
            } else {
                mem.saturating_sub(b.mem)
            };
            for &(s, milli) in &b.gpus {
                if !topo.usable[s] {
                    continue;
                }
                let g = &mut layer.gpu[s];
                self.milli -= u64::from(*g);
                self.whole -= u64::from(*g == MILLI_PER_GPU);
                *g = if ev.release {
                    (*g + milli).min(MILLI_PER_GPU)
                } else {
                    g.saturating_sub(milli)
                };
                self.milli += u64::from(*g);
                self.whole += u64::from(*g == MILLI_PER_GPU);
            }
        }
    }
}

/// What a job needs in total.
fn needs(job: &Job) -> Totals {
    let mut t = Totals::default();
    for g in &job.tasks {
        let n = u64::from(g.count);
        t.milli += g.gpu_milli_per_task() * n;
        t.whole += u64::from(g.gpus) * n;
        t.cpu += u64::from(g.cpu_milli) * n;
    }
    t
}

/// The earliest reservation for `job` starting no later than `window_end_ms`, and the
/// layer at its start (before it is booked). `now` is what is free now.
///
/// After a failed attempt, a single-task job is only retried on nodes that got
/// something back since, as long as the same checkpoints apply: nothing else changed
/// (or only shrank), so nothing else can fit.
pub fn search(
    topo: &Topo,
    tl: &Timeline,
    now: &Layer,
    scoring: Scoring,
    job: &Job,
    window_end_ms: u64,
) -> Option<(Reservation, Layer)> {
    search_with(topo, tl, now, scoring, job, window_end_ms, true)
}

/// [`search`], with a full fit at every instant unless `incremental`.
pub(crate) fn search_with(
    topo: &Topo,
    tl: &Timeline,
    now: &Layer,
    scoring: Scoring,
    job: &Job,
    window_end_ms: u64,
    incremental: bool,
) -> Option<(Reservation, Layer)> {
    let dur_ms = (job.time_limit_s > 0).then(|| job.time_limit_s.saturating_mul(1000));
    let need = needs(job);
    let single = incremental && job.task_count() == 1;
    let mut work = now.clone();
    let mut totals = Totals::of(topo, &work);
    let events: Vec<&Event> = tl.events().collect();
    let mut dirty: Vec<usize> = Vec::new();
    let mut is_dirty = vec![false; topo.nodes.len()];
    let mut last_failed: Option<Range<usize>> = None;
    let mut i = 0;
    while i < events.len() {
        let t = events[i].at_ms;
        if t > window_end_ms {
            break;
        }
        while i < events.len() && events[i].at_ms == t {
            totals.apply(topo, &mut work, events[i]);
            if events[i].release {
                for b in &events[i].bookings {
                    if !std::mem::replace(&mut is_dirty[b.pos], true) {
                        dirty.push(b.pos);
                    }
                }
            }
            i += 1;
        }
        if !totals.holds(&need) {
            continue;
        }
        let end_ms = dur_ms.map(|d| t.saturating_add(d));
        let range = tl.within_range(t, end_ms);
        let mut layers = vec![&work];
        layers.extend(tl.checkpoints[range.clone()].iter().map(|c| &c.layer));
        let bookings = if single && last_failed.as_ref() == Some(&range) {
            best_of(topo, layers, scoring, job, &dirty)
        } else {
            let order = NodeOrder::new(topo, &work, scoring);
            let fitter = Fitter {
                topo,
                layers,
                order: &order,
                scoring,
            };
            fitter.fit(job)
        };
        for p in dirty.drain(..) {
            is_dirty[p] = false;
        }
        let Some(bookings) = bookings else {
            last_failed = Some(range);
            continue;
        };
        let mut waits_for: Vec<JobId> = events[..i]
            .iter()
            .filter(|e| e.release && e.job != job.id)
            .filter(|e| {
                e.bookings
                    .iter()
                    .any(|eb| bookings.iter().any(|b| b.pos == eb.pos))
            })
            .map(|e| e.job)
            .collect();
        waits_for.sort_unstable();
        waits_for.dedup();
        let r = Reservation {
            job: job.id,
            at_ms: t,
            end_ms,
            bookings,
            waits_for,
        };
        return Some((r, work));
    }
    None
}

/// The single task of `job` on the best of `candidates` (by the scoring order of
/// what `layers[0]` has free), or None.
fn best_of(
    topo: &Topo,
    layers: Vec<&Layer>,
    scoring: Scoring,
    job: &Job,
    candidates: &[usize],
) -> Option<Vec<Booking>> {
    let group = job.expanded_tasks().next()?;
    let base = *layers.first()?;
    let order = NodeOrder::empty(scoring);
    let fitter = Fitter {
        topo,
        layers,
        order: &order,
        scoring,
    };
    let key = |p: usize| (base.gpu_milli(topo, p), base.cpu[p]);
    let mut best: Option<Booking> = None;
    for &p in candidates {
        if let Some(b) = fitter.try_node(p, group, &[])
            && best
                .as_ref()
                .is_none_or(|bb| order.before((key(p), p), (key(bb.pos), bb.pos)))
        {
            best = Some(b);
        }
    }
    best.map(|b| vec![b])
}
