//! Pending jobs' start forecasts, off the scheduling path: a cycle offers its snapshot
//! and priority order when a forecast is due (every `forecast_every_s`, or sooner when the
//! queue grew or shrank by a tenth), a thread of its own replays them
//! (`gantry_engine::forecast`) with runtimes drawn from the jobs that ended (the same
//! user's job of the same name, else the same user's; the time limit without history),
//! and the API's answers carry the latest result (`JobRecord::start_forecast`). A cycle
//! never waits: an offer made while a forecast runs waits, replaced by any newer one. Nothing here is stored: the
//! runtimes are learnt again from history when the thread starts.
//!
//! Owns: the runtime model, the offer, the thread and the results. Does not own the
//! replay (the engine) or the order (the cycle's live pipeline).

use super::{Scheduler, lock, now_ms};
use gantry_api::model::{JobRecord, JobState, StartForecast};
use gantry_engine::forecast::{ForecastOptions, JobForecast, RuntimeModel, forecast};
use gantry_engine::{CycleOutcome, Snapshot};
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};

/// How many jobs behind a blocked one a forecast lets start early under `backfill`.
const BACKFILL_DEPTH: usize = 32;

/// Ended jobs of each state read from history when the forecast thread starts.
const HISTORY_WARM_UP: usize = 5_000;

/// A job without history or time limit is taken to run this long.
const DEFAULT_RUNTIME_MS: u64 = 3_600_000;

/// What a cycle hands the forecaster.
struct Offer {
    snap: Arc<Snapshot>,
    order: Vec<u64>,
    /// Jobs of the snapshot the cycle did not admit, with its reason (held, dependencies).
    not_admitted: Vec<(u64, String)>,
    /// Display names of the pending jobs (`2_1` for array members).
    names: Arc<HashMap<u64, String>>,
}

/// A snapshot a forecast started from, with the display names of its jobs.
pub(crate) type ForecastInput = (Arc<Snapshot>, Arc<HashMap<u64, String>>);

/// The latest results.
#[derive(Default)]
struct Board {
    by_job: HashMap<u64, StartForecast>,
    /// The last snapshot offered, with its display names: what-ifs start from it.
    latest: Option<ForecastInput>,
    last_offer_ms: u64,
    /// The pending and running jobs of the last offer, sorted: a job submitted or ended
    /// moves the queue, one that starts (as forecast) does not.
    last_ids: Vec<u64>,
}

/// The forecaster's state, shared by the cycle (offers), the thread and the API.
#[derive(Default)]
pub(crate) struct Forecaster {
    board: Mutex<Board>,
    runtimes: Mutex<RuntimeModel>,
    /// Held while a what-if is computed: one at a time, so callers cannot pile up pipeline
    /// builds and queue copies (`what_if.rs`).
    pub(crate) what_if_running: Mutex<()>,
    /// The newest offer not taken yet (a newer one replaces it), and its wake-up.
    next: Mutex<Option<Offer>>,
    offered: Condvar,
}

/// The keys a job's runtime is learnt and drawn under, most specific first.
fn runtime_keys(user: &str, name: &str) -> [String; 2] {
    [format!("{user}\u{1f}{name}"), user.to_string()]
}

impl Scheduler {
    /// Starts the forecast thread (none when `forecast_every_s` is 0).
    pub(crate) fn start_forecaster(&self) {
        if self.inner.config.forecast_every_s == 0 {
            return;
        }
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("gantry-forecast".into())
            .spawn(move || me.forecast_loop());
        if let Err(e) = spawned {
            tracing::error!("forecasts off: cannot start their thread: {e}");
        }
    }

    fn forecast_loop(&self) {
        self.learn_from_history();
        let f = &self.inner.forecaster;
        loop {
            let offer = {
                let mut next = lock(&f.next);
                loop {
                    if let Some(offer) = next.take() {
                        break offer;
                    }
                    next = match f.offered.wait(next) {
                        Ok(n) => n,
                        Err(poisoned) => poisoned.into_inner(),
                    };
                }
            };
            let t0 = std::time::Instant::now();
            let results = self.compute_forecast(&offer);
            let m = &self.inner.metrics;
            m.forecast_seconds.observe(t0.elapsed().as_secs_f64());
            m.forecast_jobs.set(results.len() as i64);
            lock(&self.inner.forecaster.board).by_job = results;
        }
    }

    fn compute_forecast(&self, offer: &Offer) -> HashMap<u64, StartForecast> {
        let computed_ms = now_ms();
        let mut out = self.forecast_described(&offer.snap, &offer.order, &offer.names);
        for (id, why) in &offer.not_admitted {
            out.insert(
                *id,
                StartForecast {
                    p50_ms: None,
                    p90_ms: None,
                    reason: format!("not before it is admitted: {why}"),
                    computed_ms,
                },
            );
        }
        out
    }

    /// The forecast of `order` on `snap` (`gantry_engine::forecast`), in the user's words.
    pub(crate) fn forecast_described(
        &self,
        snap: &Snapshot,
        order: &[u64],
        names: &HashMap<u64, String>,
    ) -> HashMap<u64, StartForecast> {
        let model = lock(&self.inner.forecaster.runtimes).clone();
        // The live placement decides how the queue moves: strictly in order (`first-fit`),
        // or with jobs behind a blocked one started early (`backfill`, modelled as EASY).
        let backfills = lock(&self.inner.policy).active().spec.placement.plugin == "backfill";
        let opts = ForecastOptions {
            backfill_depth: if backfills { BACKFILL_DEPTH } else { 0 },
            ..Default::default()
        };
        let replays = opts.replays;
        let text = |s: u32| snap.ctx.text(s).to_string();
        let runtime = |j: &gantry_contract::Job, r: usize| {
            let u = (r as f64 + 0.5) / replays as f64;
            let keys = runtime_keys(&text(j.user), &text(j.name));
            let limit_ms = j.time_limit_s.saturating_mul(1000);
            model.draw(&keys, limit_ms, DEFAULT_RUNTIME_MS, u).0
        };
        let computed_ms = now_ms();
        let name = |id: u64| names.get(&id).cloned().unwrap_or_else(|| id.to_string());
        forecast(snap, order, &runtime, opts)
            .into_iter()
            .map(|f| (f.job, described(&f, computed_ms, &name)))
            .collect()
    }

    /// The last snapshot offered to the forecaster, with its display names.
    pub(crate) fn latest_forecast_input(&self) -> Option<ForecastInput> {
        lock(&self.inner.forecaster.board).latest.clone()
    }

    /// Offers a cycle's snapshot and order to the forecaster when a forecast is due.
    pub(crate) fn offer_forecast(&self, snap: &Arc<Snapshot>, outcome: &CycleOutcome) {
        let every_ms = self.inner.config.forecast_every_s.saturating_mul(1000);
        if every_ms == 0 {
            return;
        }
        let now = now_ms();
        let mut ids: Vec<u64> = snap
            .pending
            .iter()
            .chain(snap.running.iter().map(|r| &r.job))
            .map(|j| j.id)
            .collect();
        ids.sort_unstable();
        {
            let mut b = lock(&self.inner.forecaster.board);
            // A tenth of the jobs came, went or started (any job, among ten or fewer).
            let moved = symmetric_difference(&ids, &b.last_ids);
            let changed = moved > 0 && moved * 10 >= b.last_ids.len().max(10);
            if now < b.last_offer_ms.saturating_add(every_ms) && !changed {
                return;
            }
            b.last_offer_ms = now;
            b.last_ids = ids;
        }
        let admitted: std::collections::HashSet<u64> = outcome.order.iter().copied().collect();
        let not_admitted = outcome
            .pending
            .iter()
            .filter(|(id, _)| !admitted.contains(id))
            .map(|(id, r)| (*id, r.message.clone()))
            .collect();
        let names = Arc::new(self.display_names(snap));
        lock(&self.inner.forecaster.board).latest = Some((snap.clone(), names.clone()));
        let offer = Offer {
            snap: snap.clone(),
            order: outcome.order.clone(),
            not_admitted,
            names,
        };
        // While a forecast runs, a newer offer replaces the one waiting: the thread takes
        // the newest state when it is free.
        *lock(&self.inner.forecaster.next) = Some(offer);
        self.inner.forecaster.offered.notify_one();
    }

    /// `2_1` for an array member, else the id, for every pending job of `snap`.
    fn display_names(&self, snap: &Snapshot) -> HashMap<u64, String> {
        let st = lock(&self.inner.state);
        snap.pending
            .iter()
            .chain(snap.running.iter().map(|r| &r.job))
            .filter_map(|j| {
                let rec = st.jobs.get(j.id)?;
                let a = rec.array?;
                Some((j.id, format!("{}_{}", a.array_id, a.index)))
            })
            .collect()
    }

    /// Learns the runtimes of the newest ended jobs in memory and history (at most
    /// [`HISTORY_WARM_UP`] of each ending state), once, when the forecast thread starts:
    /// a restarted controller forecasts from its history, not from its time limits.
    fn learn_from_history(&self) {
        let mut learnt = 0usize;
        for state in [JobState::Succeeded, JobState::Failed, JobState::TimedOut] {
            let q = super::JobQuery {
                state: Some(state),
                ..Default::default()
            };
            match self.jobs(&q, HISTORY_WARM_UP) {
                // Oldest first, so that each key keeps its newest samples.
                Ok(page) => {
                    for job in page.jobs.iter().rev() {
                        self.observe_runtime(job);
                        learnt += 1;
                    }
                }
                Err(e) => tracing::warn!("forecasts: cannot read history: {e}"),
            }
        }
        tracing::info!(jobs = learnt, "forecasts: runtimes learnt from history");
    }

    /// Learns the runtime of a run that ended (a success, a failure or a time limit).
    pub(crate) fn observe_runtime(&self, job: &JobRecord) {
        let ran = matches!(
            job.state,
            JobState::Succeeded | JobState::Failed | JobState::TimedOut
        );
        let (Some(start), Some(end)) = (job.start_ms, job.end_ms) else {
            return;
        };
        if ran && end > start {
            let keys = runtime_keys(&job.spec.user, &job.spec.name);
            lock(&self.inner.forecaster.runtimes).observe(&keys, end - start);
        }
    }

    /// `job` with its latest forecast, when it is pending and has one.
    pub(crate) fn with_forecast(&self, mut job: JobRecord) -> JobRecord {
        if job.state == JobState::Pending {
            job.start_forecast = lock(&self.inner.forecaster.board)
                .by_job
                .get(&job.id)
                .cloned();
        }
        job
    }

    /// [`Self::with_forecast`] for a page of jobs.
    pub(crate) fn add_forecasts(&self, jobs: &mut [JobRecord]) {
        let board = lock(&self.inner.forecaster.board);
        for j in jobs.iter_mut().filter(|j| j.state == JobState::Pending) {
            j.start_forecast = board.by_job.get(&j.id).cloned();
        }
    }
}

/// How many elements of two sorted lists are in one only.
fn symmetric_difference(a: &[u64], b: &[u64]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => (n, i) = (n + 1, i + 1),
            std::cmp::Ordering::Greater => (n, j) = (n + 1, j + 1),
            std::cmp::Ordering::Equal => (i, j) = (i + 1, j + 1),
        }
    }
    n + (a.len() - i) + (b.len() - j)
}

/// A forecast in the user's words.
fn described(f: &JobForecast, computed_ms: u64, name: &dyn Fn(u64) -> String) -> StartForecast {
    let ahead = match f.ahead {
        0 => "first in line".to_string(),
        1 => "1 job ahead".to_string(),
        n => format!("{n} jobs ahead"),
    };
    let reason = match (&f.never, f.p50_ms, f.after) {
        (Some(why), _, _) => format!("never: {why}"),
        (None, None, _) => format!("not within 30 days; {ahead}"),
        (None, Some(_), Some(after)) => format!("when job {} ends; {ahead}", name(after)),
        (None, Some(_), None) => format!("room now; {ahead}"),
    };
    StartForecast {
        p50_ms: f.p50_ms,
        p90_ms: f.p90_ms,
        reason,
        computed_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::symmetric_difference;

    #[test]
    fn the_jobs_that_came_or_went_are_counted() {
        assert_eq!(symmetric_difference(&[1, 2, 3], &[1, 2, 3]), 0);
        assert_eq!(symmetric_difference(&[1, 2, 3, 4], &[1, 2, 3]), 1);
        assert_eq!(symmetric_difference(&[2, 3, 9], &[1, 2, 3]), 2);
        assert_eq!(symmetric_difference(&[], &[5, 6]), 2);
    }
}
