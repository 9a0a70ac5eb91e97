//! Accounting: one durable record per ended task process, and the decayed GPU usage per
//! user and account that snapshots give fair-share plugins, kept from those records.
//!
//! When a record is written:
//! * every time a task's process ends and its event reaches `task_ended` (each end of a
//!   restarted service task, tasks stopped by a cancel, time limit, eviction or failed gang);
//! * after a daemon restart, for a task whose end was found only by its exit file (no pid
//!   stored; it ended while the daemon was down): CPU and memory are unknown there (0);
//! * never for a task that never had a process (marked lost because it was not launched):
//!   it used nothing, so nothing is charged.
//!
//! A record is keyed by job, task, run (requeues + restarts) and process start, so a replayed
//! end (after a crash, or an adopted shim) is written once. Its end time is when the task's
//! exit record was written when that lies in the run, else the time the end was seen.
//!
//! A run stopped because a GPU of the job failed (`StopCause::GpuFault`) is recorded with
//! `uncharged` set: its GPU-seconds are listed but not counted against fair share.
//!
//! The [`Ledger`] holds, per user and per account, the decayed sum of closed GPU-seconds
//! (halved every `usage_half_life_s` since each record's end), updated as records are
//! written and loaded from the store at start, so no cycle rescans the store.
//!
//! Owns: record contents, the at-most-once rule's key choice, the ledger. Does not own
//! storage (`store::accounting`) or the HTTP view (`api::accounting`).

use super::{Scheduler, lock, now_ms};
use gantry_api::model::JobRecord;
use gantry_node::executor::{TaskExit, TaskUsage};
use gantry_store::{AccountingFilter, AccountingRecord, Store, StoreError};
use std::collections::BTreeMap;
use std::sync::MutexGuard;

/// `2^(-age / half_life)`: the weight of usage that ended `age_ms` ago.
fn decay(age_ms: u64, half_life_s: f64) -> f64 {
    (-(age_ms as f64 / 1000.0) / half_life_s).exp2()
}

/// A decayed sum, stored as its value at `as_of_ms`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Decayed {
    value: f64,
    as_of_ms: u64,
}

impl Decayed {
    fn add(&mut self, amount: f64, at_ms: u64, half_life_s: f64) {
        if at_ms <= self.as_of_ms {
            self.value += amount * decay(self.as_of_ms - at_ms, half_life_s);
        } else {
            self.value = self.value * decay(at_ms - self.as_of_ms, half_life_s) + amount;
            self.as_of_ms = at_ms;
        }
    }

    /// The sum at `now_ms` (amounts dated after `now_ms` count in full).
    fn at(&self, now_ms: u64, half_life_s: f64) -> f64 {
        self.value * decay(now_ms.saturating_sub(self.as_of_ms), half_life_s)
    }
}

/// Records counted between two checkpoints of the ledger: a start replays at most about
/// this many records after the last checkpoint, however long the history.
const CHECKPOINT_EVERY: u64 = 10_000;
const CHECKPOINT_META: &str = "ledger_checkpoint";
/// Queued accounting records written per try after a cycle.
const RETRY_BATCH: usize = 500;

/// The ledger as saved in the store's meta: its sums and the sequence number of the last
/// record they count.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Checkpoint {
    half_life_s: f64,
    through_seq: Option<u64>,
    users: Vec<(String, f64, u64)>,
    accounts: Vec<(String, f64, u64)>,
}

/// Decayed GPU-seconds of closed task runs per user and per account.
#[derive(Debug, Clone)]
pub struct Ledger {
    half_life_s: f64,
    users: BTreeMap<String, Decayed>,
    accounts: BTreeMap<String, Decayed>,
    /// Sequence number of the last record counted (none yet: `None`).
    through_seq: Option<u64>,
    /// Records counted since the last checkpoint.
    unsaved: u64,
}

impl Ledger {
    /// An empty ledger whose usage halves every `half_life_s` seconds.
    pub fn new(half_life_s: f64) -> Self {
        Self {
            half_life_s,
            users: BTreeMap::new(),
            accounts: BTreeMap::new(),
            through_seq: None,
            unsaved: 0,
        }
    }

    /// The ledger of every record in `store`: its last checkpoint (when made with the same
    /// half-life) and the records written after it.
    pub fn load(store: &Store, half_life_s: f64) -> Result<Self, StoreError> {
        let mut ledger = Self::new(half_life_s);
        if let Some(c) = store.meta::<Checkpoint>(CHECKPOINT_META)?
            && c.half_life_s == half_life_s
        {
            let table = |rows: Vec<(String, f64, u64)>| {
                rows.into_iter()
                    .map(|(who, value, as_of_ms)| (who, Decayed { value, as_of_ms }))
                    .collect()
            };
            ledger.users = table(c.users);
            ledger.accounts = table(c.accounts);
            ledger.through_seq = c.through_seq;
        }
        let after = ledger.through_seq;
        let replayed = store.each_accounting_since(after, |seq, r| ledger.counted(&r, seq))?;
        if replayed > 0 {
            ledger.save(store);
        }
        Ok(ledger)
    }

    /// Counts record `r`, written with sequence number `seq`.
    fn counted(&mut self, r: &AccountingRecord, seq: u64) {
        self.add(r);
        self.through_seq = self.through_seq.max(Some(seq));
        self.unsaved += 1;
    }

    /// Saves a checkpoint in `store`'s meta (a failure is logged: the next start replays
    /// more records).
    fn save(&mut self, store: &Store) {
        let rows = |m: &BTreeMap<String, Decayed>| {
            m.iter()
                .map(|(who, d)| (who.clone(), d.value, d.as_of_ms))
                .collect()
        };
        let c = Checkpoint {
            half_life_s: self.half_life_s,
            through_seq: self.through_seq,
            users: rows(&self.users),
            accounts: rows(&self.accounts),
        };
        match store.set_meta(CHECKPOINT_META, &c) {
            Ok(()) => self.unsaved = 0,
            Err(e) => tracing::warn!("cannot checkpoint the usage ledger: {e}"),
        }
    }

    /// Counts a newly written record.
    pub fn add(&mut self, r: &AccountingRecord) {
        let h = self.half_life_s;
        if r.gpu_milli_seconds == 0 || r.uncharged.is_some() {
            return;
        }
        let gpu_s = r.gpu_seconds();
        for (table, who) in [(&mut self.users, &r.user), (&mut self.accounts, &r.account)] {
            table
                .entry(who.clone())
                .or_default()
                .add(gpu_s, r.end_ms, h);
        }
    }

    /// Closed usage decayed to `now_ms`: (per user, per account).
    pub fn closed(&self, now_ms: u64) -> (BTreeMap<String, f64>, BTreeMap<String, f64>) {
        let at = |m: &BTreeMap<String, Decayed>| {
            m.iter()
                .map(|(who, d)| (who.clone(), d.at(now_ms, self.half_life_s)))
                .collect()
        };
        (at(&self.users), at(&self.accounts))
    }
}

/// GPU-seconds the still-running tasks of `job` have used by `now_ms` (in full, undecayed).
pub fn running_gpu_seconds(job: &JobRecord, now_ms: u64) -> f64 {
    job.tasks
        .iter()
        .filter(|t| t.exit.is_none())
        .filter_map(|t| {
            let start = t.started_ms.or(job.start_ms)?;
            let milli: u64 = t.gpus.iter().map(|g| u64::from(g.milli)).sum();
            Some(milli_seconds(milli, now_ms.saturating_sub(start)) as f64 / 1000.0)
        })
        .sum()
}

/// `milli` milli-GPU held for `duration_ms`, in milli-GPU-seconds (rounded).
fn milli_seconds(milli: u64, duration_ms: u64) -> u64 {
    let v = (u128::from(milli) * u128::from(duration_ms) + 500) / 1000;
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// The record of task `index` of `job`, whose process ended at `end_ms` with `exit` after
/// using `usage`; `None` for a task that never started.
pub fn record(
    job: &JobRecord,
    index: usize,
    end_ms: u64,
    exit: TaskExit,
    usage: TaskUsage,
) -> Option<AccountingRecord> {
    let task = job.tasks.get(index)?;
    let start_ms = task.started_ms.or(job.start_ms)?;
    let end_ms = end_ms.max(start_ms);
    let milli: u64 = task.gpus.iter().map(|g| u64::from(g.milli)).sum();
    Some(AccountingRecord {
        job_id: job.id,
        task_index: u32::try_from(index).unwrap_or(u32::MAX),
        run: job.requeues.saturating_add(job.restarts),
        job_name: job.spec.name.clone(),
        user: job.spec.user.clone(),
        account: job.spec.account.clone(),
        queue: job.spec.queue.clone(),
        node: task.node.clone(),
        gpus: task.gpus.clone(),
        cpu_milli: task.cpu_milli,
        memory_mib: task.memory_mib,
        start_ms,
        end_ms,
        gpu_milli_seconds: milli_seconds(milli, end_ms - start_ms),
        cpu_seconds: usage.cpu_ms as f64 / 1000.0,
        memory_peak_mib: usage.memory_peak_mib,
        exit,
        oom_killed: usage.oom_killed,
        uncharged: match &job.stopping {
            Some(gantry_api::model::StopCause::GpuFault { node, gpu, reason }) => {
                Some(format!("GPU {gpu} of node {node} failed: {reason}"))
            }
            _ => None,
        },
        gpu_used_milli_seconds: task.gpu_usage.as_ref().map(|u| u.used_gpu_milli_seconds),
    })
}

impl Scheduler {
    /// The ledger (lock order: after the state lock, never before it).
    pub(crate) fn ledger(&self) -> MutexGuard<'_, Ledger> {
        lock(&self.inner.ledger)
    }

    /// Hook for `task_ended`: task `index` of `job` just ended (its exit is set) after using
    /// `usage`; writes its record once.
    pub(crate) fn account_task_end(&self, job: &JobRecord, index: usize, usage: TaskUsage) {
        let Some(task) = job.tasks.get(index) else {
            return;
        };
        let exit = task.exit.unwrap_or(TaskExit::Lost);
        let start = task.started_ms.or(job.start_ms).unwrap_or(0);
        let end = match task.ended_ms {
            Some(end) => end,
            None => self.process_end_ms(job.id, index, start),
        };
        if let Some(r) = record(job, index, end, exit, usage) {
            self.write_accounting(&r);
        }
    }

    /// Hook for adoption after a restart: records the tasks of `job` whose end was found by
    /// their exit file alone (no pid stored). Lost tasks without a pid never ran: no record.
    pub(crate) fn account_ended_while_down(&self, job: &JobRecord) {
        for (i, t) in job.tasks.iter().enumerate() {
            let Some(exit @ (TaskExit::Exited(_) | TaskExit::Signaled(_))) = t.exit else {
                continue;
            };
            if t.pid.is_some() {
                continue;
            }
            let start = t.started_ms.or(job.start_ms).unwrap_or(0);
            let end = self.process_end_ms(job.id, i, start);
            if let Some(r) = record(job, i, end, exit, TaskUsage::default()) {
                self.write_accounting(&r);
            }
        }
    }

    /// When task `index` of job `id` ended: its exit record's time if that lies between
    /// `start_ms` and now (it was written by this run), else now.
    pub(crate) fn process_end_ms(&self, id: u64, index: usize, start_ms: u64) -> u64 {
        let now = now_ms();
        let written = std::fs::metadata(self.exit_path(id, index))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as u64);
        match written {
            Some(w) if w >= start_ms && w <= now => w,
            _ => now,
        }
    }

    /// Stores `r` unless it was stored already (queued to write again when history cannot
    /// take it now: `retry_queued_accounting`); counts it in the ledger when new (under
    /// the ledger's lock, so the ledger counts records in their write order and a
    /// checkpoint covers exactly the records up to its sequence number).
    fn write_accounting(&self, r: &AccountingRecord) {
        let mut ledger = self.ledger();
        match self.inner.store.put_accounting_seq(r) {
            Ok(Some(seq)) => {
                ledger.counted(r, seq);
                if ledger.unsaved >= CHECKPOINT_EVERY {
                    ledger.save(&self.inner.store);
                }
            }
            Ok(None) => tracing::debug!(
                job = r.job_id,
                task = r.task_index,
                run = r.run,
                "accounting record already written"
            ),
            Err(e) => match self.inner.store.queue_accounting(r) {
                Ok(()) => tracing::warn!(
                    job = r.job_id,
                    task = r.task_index,
                    "cannot write the accounting record yet, kept to write again: {e}"
                ),
                Err(queue) => tracing::error!(
                    job = r.job_id,
                    task = r.task_index,
                    "cannot write the accounting record ({e}) nor keep it ({queue})"
                ),
            },
        }
    }

    /// Writes the accounting records history did not take when they were made (its server
    /// was away), oldest first, stopping at the first that still fails; after each cycle.
    pub(crate) fn retry_queued_accounting(&self) {
        match self.inner.store.has_queued_accounting() {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => return tracing::warn!("cannot look for queued accounting records: {e}"),
        }
        let queued = match self.inner.store.queued_accounting(RETRY_BATCH) {
            Ok(q) => q,
            Err(e) => return tracing::error!("cannot read the queued accounting records: {e}"),
        };
        let mut ledger = self.ledger();
        let mut written = 0;
        for r in &queued {
            match self.inner.store.put_accounting_seq(r) {
                Ok(Some(seq)) => ledger.counted(r, seq),
                Ok(None) => {}
                Err(e) => {
                    tracing::debug!("queued accounting records still wait: {e}");
                    break;
                }
            }
            if let Err(e) = self.inner.store.unqueue_accounting(r) {
                tracing::error!(job = r.job_id, "cannot unqueue an accounting record: {e}");
                break;
            }
            written += 1;
        }
        if written > 0 {
            tracing::info!(
                records = written,
                "queued accounting records written to history"
            );
        }
    }

    /// Accounting records that pass `filter`, oldest end first.
    pub(crate) fn accounting(
        &self,
        filter: &AccountingFilter,
    ) -> Result<Vec<AccountingRecord>, StoreError> {
        self.inner.store.accounting(filter)
    }
}

#[cfg(test)]
mod tests;
