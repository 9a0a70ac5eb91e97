//! One placement call: EASY (or conservative) backfill over the host's priority order.
//!
//! For each job, up to `max_jobs`: start it if it fits what is free now *and* every
//! reservation checkpoint before its end (a job without a time limit never ends, so
//! it must fit all of them). Otherwise it is blocked; the first `conservative`
//! blocked jobs that can be reserved within `window_s` get a reservation (the
//! earliest instant they fit, from `reserve`), which later jobs may not delay. Every
//! job not started gets a reason with numbers.
//!
//! Within a call free resources only shrink (starts and reservations only take), so
//! a job shape that did not fit is not tried again: later jobs of the same shape (and
//! no earlier end) fail at once. That keeps a cycle over thousands of jobs cheap.
//!
//! Owns: the walk, the memo, and which reason applies. Does not own fitting
//! (`scoring`, `gang`), the search (`reserve`) or wording (`reason`).

use crate::Config;
use crate::reason;
use crate::reserve::{Reservation, search};
use crate::scoring::{Fitter, NodeOrder};
use crate::timeline::{Booking, Checkpoint, Layer, Timeline};
use crate::topology::Topo;
use gantry_sdk::{
    ClusterModel, Cycle, Job, Node, Pending, Plan, Reason, ReasonCode, RunningJob, Start,
    TaskAllocation,
};
use std::collections::HashMap;

/// Reservation searches that may find nothing in one call; after that, blocked jobs
/// are not searched for (each failed search walks the whole window).
pub const MAX_FAILED_SEARCHES: u32 = 32;

/// A job's resource shape: what decides whether it fits.
type Shape = Vec<[u64; 6]>;

fn shape(job: &Job) -> Shape {
    job.tasks
        .iter()
        .map(|t| {
            [
                u64::from(t.count),
                u64::from(t.gpus),
                u64::from(t.gpu_milli),
                u64::from(t.cpu_milli),
                t.memory_mib,
                t.gpu_model_mask,
            ]
        })
        .collect()
}

/// Shapes known not to fit, valid for the rest of the call.
#[derive(Default)]
struct Memo {
    /// Does not fit what is free now, whatever its end: the reason.
    now: HashMap<Shape, Reason>,
    /// Fits now only without the reservations: the earliest end that failed.
    with_reservations: HashMap<Shape, u64>,
    /// No reservation within the window: the shortest duration that failed.
    unreservable: HashMap<Shape, u64>,
}

/// Mutable state of the call.
struct State<'a> {
    ctx: &'a Cycle,
    cfg: &'a Config,
    topo: Topo,
    now: Layer,
    order: NodeOrder,
    model: ClusterModel,
    tl: Timeline,
    reservations: Vec<Reservation>,
    failed_searches: u32,
    memo: Memo,
}

/// Runs the walk.
pub fn place(
    cfg: &Config,
    ctx: &Cycle,
    jobs: &[Job],
    nodes: &[Node],
    running: &[RunningJob],
) -> Result<Plan, String> {
    let topo = Topo::new(ctx, nodes);
    let now = Layer::now(&topo, nodes);
    let mut st = State {
        ctx,
        cfg,
        order: NodeOrder::new(&topo, &now, cfg.scoring),
        model: ClusterModel::new(ctx, nodes),
        tl: Timeline::new(&topo, running, ctx.now_ms),
        topo,
        now,
        reservations: Vec::new(),
        failed_searches: 0,
        memo: Memo::default(),
    };
    let mut plan = Plan::default();
    let tested = jobs.len().min(cfg.max_jobs as usize);
    for job in &jobs[..tested] {
        match st.decide(job) {
            Ok(bookings) => plan.starts.push(st.commit(job, &bookings)?),
            Err(reason) => plan.pending.push(Pending {
                job: job.id,
                reason,
            }),
        }
    }
    for (i, job) in jobs.iter().enumerate().skip(tested) {
        plan.pending.push(Pending {
            job: job.id,
            reason: reason::not_tested(cfg.max_jobs, i + 1),
        });
    }
    Ok(plan)
}

impl State<'_> {
    fn end_ms(&self, job: &Job) -> Option<u64> {
        (job.time_limit_s > 0).then(|| {
            self.ctx
                .now_ms
                .saturating_add(job.time_limit_s.saturating_mul(1000))
        })
    }

    fn fitter<'b>(&'b self, extra: impl Iterator<Item = &'b Checkpoint>) -> Fitter<'b> {
        let mut layers = vec![&self.now];
        layers.extend(extra.map(|c| &c.layer));
        Fitter {
            topo: &self.topo,
            layers,
            order: &self.order,
            scoring: self.cfg.scoring,
        }
    }

    /// Where the job starts now, or why it does not.
    fn decide(&mut self, job: &Job) -> Result<Vec<Booking>, Reason> {
        let key = shape(job);
        let end = self.end_ms(job);
        let why = match self.memo.now.get(&key) {
            Some(r) => r.clone(),
            None => match self.fit_now(job, &key, end) {
                Ok(b) => return Ok(b),
                Err(r) => r,
            },
        };
        Err(self.reserve(job, key, why))
    }

    /// Fits the job against now and the checkpoints before its end.
    fn fit_now(
        &mut self,
        job: &Job,
        key: &Shape,
        end: Option<u64>,
    ) -> Result<Vec<Booking>, Reason> {
        let now_ms = self.ctx.now_ms;
        let end_key = end.unwrap_or(u64::MAX);
        let active = self.tl.within(now_ms, end).count();
        let known_bad = self
            .memo
            .with_reservations
            .get(key)
            .is_some_and(|&e| end_key >= e);
        if !known_bad {
            if let Some(b) = self.fitter(self.tl.within(now_ms, end)).fit(job) {
                return Ok(b);
            }
            if active > 0 {
                let e = self
                    .memo
                    .with_reservations
                    .entry(key.clone())
                    .or_insert(end_key);
                *e = (*e).min(end_key);
            }
        }
        if active == 0 || self.fitter(std::iter::empty()).fit(job).is_none() {
            let r = self.model.explain(self.ctx, job);
            self.memo.now.insert(key.clone(), r.clone());
            return Err(r);
        }
        // It fits now; name the first reservation it would delay.
        let delayed = self
            .tl
            .within(now_ms, end)
            .find(|c| self.fitter(std::iter::once(*c)).fit(job).is_none())
            .or_else(|| self.tl.within(now_ms, end).next())
            .map(|c| (c.job, c.at_ms));
        let (held_by, at) = delayed.unwrap_or((job.id, now_ms));
        Err(match end {
            Some(_) => reason::would_delay(now_ms, job.time_limit_s, held_by, at),
            None => reason::no_limit(now_ms, held_by, at),
        })
    }

    /// A blocked job: a reservation if one is left and found, and its reason.
    fn reserve(&mut self, job: &Job, key: Shape, why: Reason) -> Reason {
        let conservative = self.cfg.conservative as usize;
        if conservative == 0 {
            return why;
        }
        if self.reservations.len() >= conservative {
            if why.code == ReasonCode::BlockedByHigherPriority {
                return why;
            }
            let holders: Vec<u64> = self.reservations.iter().map(|r| r.job).collect();
            return reason::no_slot(&why, &holders);
        }
        let dur = if job.time_limit_s > 0 {
            job.time_limit_s
        } else {
            u64::MAX
        };
        let window = self.cfg.window_s;
        let unlimited = self.tl.unlimited.len();
        if self.memo.unreservable.get(&key).is_some_and(|&d| dur >= d) {
            return reason::unreservable(&why, window, unlimited);
        }
        if self.failed_searches >= MAX_FAILED_SEARCHES {
            return reason::search_limit(&why, MAX_FAILED_SEARCHES);
        }
        let window_end = self.ctx.now_ms.saturating_add(window.saturating_mul(1000));
        let found = search(
            &self.topo,
            &self.tl,
            &self.now,
            self.cfg.scoring,
            job,
            window_end,
        );
        match found {
            Some((r, layer)) => {
                let msg = reason::reserved(self.ctx, &self.topo, &why, &r);
                self.tl
                    .add_reservation(r.job, r.at_ms, r.end_ms, &r.bookings, layer);
                self.reservations.push(r);
                msg
            }
            None => {
                self.failed_searches += 1;
                let d = self.memo.unreservable.entry(key).or_insert(dur);
                *d = (*d).min(dur);
                reason::unreservable(&why, window, unlimited)
            }
        }
    }

    /// Books a start everywhere: what is free now (and its order), the checkpoints
    /// before its end, its release, and the contract model (which re-checks it).
    fn commit(&mut self, job: &Job, bookings: &[Booking]) -> Result<Start, String> {
        let tasks: Vec<TaskAllocation> = bookings
            .iter()
            .map(|b| b.to_allocation(&self.topo))
            .collect();
        for (group, alloc) in job.expanded_tasks().zip(&tasks) {
            self.model.take(group, alloc).map_err(|e| {
                format!(
                    "backfill planned an invalid booking for job {}: {e}",
                    job.id
                )
            })?;
        }
        for b in bookings {
            self.now.take(b);
            self.order.update(&self.topo, &self.now, b.pos);
        }
        let end = self.end_ms(job);
        self.tl.add_start(job.id, bookings, end);
        Ok(Start { job: job.id, tasks })
    }
}
