//! Bounded state: ended jobs leave memory after `retention.min_job_age_s` (their decisions
//! go to the store with them), and a collector deletes what is older than the retention
//! settings — job records with their events and decisions, job directories (logs), the
//! event log, accounting records — in batches of `retention.gc_batch`, taking the
//! scheduler's lock only to check that a job is not in memory, so a cycle never waits on
//! it; then the history database gives the space it freed back to the file system. It
//! runs every `retention.gc_interval_s` and on demand (`POST /v1/admin/gc`).
//!
//! Owns: when a job leaves memory and what a collection deletes. Does not own the store's
//! rows and keys (`store/archive.rs`, `store/history.rs`) or the settings
//! (`config_retention`).

use super::{Scheduler, lock, now_ms};
use gantry_config::retention::DAY_MS;
use serde::Serialize;
use std::time::{Duration, Instant};

/// Meta key: (end time, id) of the last job whose directory the collector deleted.
const LOGS_DONE_META: &str = "gc_logs_done";

/// What one collection did.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct GcReport {
    /// Job records deleted (with their events and decisions).
    pub jobs_deleted: u64,
    /// Job directories (logs) deleted.
    pub job_dirs_deleted: u64,
    /// Event-log entries deleted.
    pub events_deleted: u64,
    /// Accounting records deleted.
    pub accounting_deleted: u64,
    /// Batches run.
    pub batches: u64,
    /// Whether nothing older than the settings is left (false: the batch budget ran out).
    pub done: bool,
    /// The store's size on disk before and after, bytes.
    pub store_bytes_before: u64,
    /// After.
    pub store_bytes_after: u64,
    /// Bytes the history database gave back to the file system.
    pub bytes_released: u64,
    /// Job records in the store after.
    pub jobs_stored: u64,
    /// How long it took, ms.
    pub ms: u64,
}

/// What one batch did; `None` when it found nothing to delete.
type Batch = Result<Option<u64>, gantry_store::StoreError>;

impl Scheduler {
    /// Takes out of memory the jobs that ended at least `retention.min_job_age_s` ago,
    /// keeping their logged decisions in the store.
    pub(crate) fn evict_ended_jobs(&self) {
        let min_age_ms = self.inner.config.retention.min_job_age_s * 1000;
        let gone = lock(&self.inner.state)
            .jobs
            .evict_ended(now_ms(), min_age_ms);
        if gone.is_empty() {
            return;
        }
        let mut decisions = lock(&self.inner.decisions);
        for id in gone {
            let logged = decisions.take(id);
            if logged.is_empty() {
                continue;
            }
            let value = serde_json::to_value(&logged).unwrap_or_default();
            if let Err(e) = self.inner.store.put_job_decisions(id, &value) {
                tracing::warn!(job = id, "cannot keep the job's decisions: {e}");
            }
        }
    }

    /// Deletes what retention no longer keeps, in at most `max_batches` batches.
    pub(crate) fn collect_garbage(
        &self,
        max_batches: u64,
    ) -> Result<GcReport, gantry_store::StoreError> {
        let started = Instant::now();
        let r = &self.inner.config.retention;
        let store = &self.inner.store;
        let now = now_ms();
        let mut report = GcReport {
            store_bytes_before: store.size_on_disk()?,
            ..GcReport::default()
        };
        let history_cutoff = now.saturating_sub(r.job_history_days * DAY_MS);
        let logs_cutoff = now.saturating_sub(r.log_days * DAY_MS);
        let accounting_cutoff = now.saturating_sub(r.accounting_days * DAY_MS);
        let batch = r.gc_batch;
        let mut budget = Budget {
            left: max_batches,
            used: 0,
        };
        report.job_dirs_deleted = budget.run(store, || self.delete_job_dirs(logs_cutoff, batch))?;
        report.jobs_deleted = budget.run(store, || self.delete_jobs(history_cutoff, batch))?;
        report.events_deleted = budget.run(store, || {
            nonzero(store.delete_events_before(history_cutoff, batch))
        })?;
        report.accounting_deleted = budget.run(store, || {
            nonzero(store.delete_accounting_before(accounting_cutoff, batch))
        })?;
        let batches = budget.used;
        report.batches = batches;
        report.done = budget.left > 0;
        if report.jobs_deleted + report.events_deleted + report.accounting_deleted > 0 {
            report.bytes_released = store.release_free_space()?;
        }
        report.store_bytes_after = store.size_on_disk()?;
        report.jobs_stored = store.job_count()?;
        report.ms = started.elapsed().as_millis() as u64;
        Ok(report)
    }

    /// Deletes the records (with events and decisions) of at most `batch` jobs that ended
    /// before `cutoff` and are not in memory.
    fn delete_jobs(&self, cutoff: u64, batch: usize) -> Batch {
        let store = &self.inner.store;
        let due = store.ended_before(cutoff, batch)?;
        if due.is_empty() {
            return Ok(None);
        }
        let ids: Vec<u64> = {
            let st = lock(&self.inner.state);
            due.iter()
                .map(|(_, id)| *id)
                .filter(|id| st.jobs.get(*id).is_none())
                .collect()
        };
        if ids.is_empty() {
            // Every due job is still in memory (a min_job_age_s longer than the history).
            return Ok(None);
        }
        for &id in &ids {
            store.delete_job(id)?;
            store.delete_job_history(id)?;
            self.remove_job_dir(id);
        }
        Ok(Some(ids.len() as u64))
    }

    /// Deletes the directories (logs) of at most `batch` jobs that ended before `cutoff`,
    /// after the last one deleted (kept in the store's meta).
    fn delete_job_dirs(&self, cutoff: u64, batch: usize) -> Batch {
        let store = &self.inner.store;
        let from: (u64, u64) = store.meta(LOGS_DONE_META)?.unwrap_or((0, 0));
        let due = store.ended_between(from, cutoff, batch)?;
        let Some(&last) = due.last() else {
            return Ok(None);
        };
        let mut n = 0;
        for (_, id) in due {
            if lock(&self.inner.state).jobs.get(id).is_some() {
                continue;
            }
            n += u64::from(self.remove_job_dir(id));
        }
        store.set_meta(LOGS_DONE_META, &last)?;
        Ok(Some(n))
    }

    /// Removes job `id`'s directory; whether there was one.
    fn remove_job_dir(&self, id: u64) -> bool {
        self.release_scratch(id);
        match std::fs::remove_dir_all(self.job_dir(id)) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => {
                tracing::warn!(job = id, "cannot delete the job's directory: {e}");
                false
            }
        }
    }

    /// Runs a collection every `retention.gc_interval_s`, on a blocking thread.
    pub(crate) fn start_collector(&self) {
        let me = self.clone();
        let every = Duration::from_secs(self.inner.config.retention.gc_interval_s);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let s = me.clone();
                match tokio::task::spawn_blocking(move || s.collect_garbage(u64::MAX)).await {
                    Ok(Ok(r))
                        if r.jobs_deleted
                            + r.job_dirs_deleted
                            + r.events_deleted
                            + r.accounting_deleted
                            > 0 =>
                    {
                        tracing::info!(?r, "retention: collected");
                    }
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => tracing::error!("retention: collection failed: {e}"),
                    Err(e) => tracing::error!("retention: collection panicked: {e}"),
                }
            }
        });
    }
}

fn nonzero(n: Result<usize, gantry_store::StoreError>) -> Batch {
    n.map(|n| (n > 0).then_some(n as u64))
}

/// The batches a collection may still run.
struct Budget {
    left: u64,
    used: u64,
}

impl Budget {
    /// Runs `step` until it finds nothing or the budget is spent, flushing the store after
    /// each batch; returns how many it deleted.
    fn run(
        &mut self,
        store: &gantry_store::Store,
        mut step: impl FnMut() -> Batch,
    ) -> Result<u64, gantry_store::StoreError> {
        let mut deleted = 0;
        while self.left > 0 {
            self.left -= 1;
            self.used += 1;
            match step()? {
                Some(n) => deleted += n,
                None => break,
            }
            store.flush()?;
        }
        Ok(deleted)
    }
}
