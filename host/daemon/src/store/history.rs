//! The event log and what a job leaves behind besides its record: events in the order
//! they happened with an index by job, the decisions logged about a job (kept when it
//! leaves memory), and the deletes retention makes in bounded batches (old events, a
//! job's events and decisions, old accounting records).
//!
//! Owns: these keys and deletes. Does not own when anything is deleted or how old is
//! too old (`scheduler::retention`), or the job records (`store/jobs.rs`).

use super::{Event, Store, StoreError, decode, encode};

const EVENT_INDEX_VERSION: u64 = 1;
const EVENT_INDEX_META: &str = "event_index_version";

fn job_event_key(job: u64, seq: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&job.to_be_bytes());
    k[8..].copy_from_slice(&seq.to_be_bytes());
    k
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

impl Store {
    /// Appends to the event log (and to the job's index, when it names one).
    pub fn event(
        &self,
        at_ms: u64,
        job: Option<u64>,
        kind: &str,
        message: String,
    ) -> Result<(), StoreError> {
        let seq = self.db.generate_id()?;
        let e = Event {
            seq,
            at_ms,
            job,
            kind: kind.into(),
            message,
        };
        if let Some(job) = job {
            self.job_events.insert(job_event_key(job, seq), &[])?;
        }
        self.events.insert(seq.to_be_bytes(), encode(&e))?;
        Ok(())
    }

    /// The last `limit` events, of one job or of all, oldest first. A job's are read
    /// through its index, so the cost does not grow with the log.
    pub fn events(&self, job: Option<u64>, limit: usize) -> Result<Vec<Event>, StoreError> {
        let mut out = Vec::new();
        match job {
            None => {
                for v in self.events.iter().values().rev().take(limit) {
                    out.push(decode("events", &v?)?);
                }
            }
            Some(job) => {
                let keys = self.job_events.scan_prefix(job.to_be_bytes()).keys().rev();
                for k in keys.take(limit) {
                    let Some(seq) = u64_at(&k?, 8) else { continue };
                    if let Some(v) = self.events.get(seq.to_be_bytes())? {
                        out.push(decode("events", &v)?);
                    }
                }
            }
        }
        out.reverse();
        Ok(out)
    }

    /// Deletes at most `limit` of the oldest events that happened before `before_ms`;
    /// returns how many.
    pub fn delete_events_before(&self, before_ms: u64, limit: usize) -> Result<usize, StoreError> {
        let mut n = 0;
        for kv in self.events.iter().take(limit) {
            let (k, v) = kv?;
            let e: Event = decode("events", &v)?;
            if e.at_ms >= before_ms {
                break;
            }
            if let Some(job) = e.job {
                self.job_events.remove(job_event_key(job, e.seq))?;
            }
            self.events.remove(k)?;
            n += 1;
        }
        Ok(n)
    }

    /// Deletes job `job`'s events and archived decisions.
    pub fn delete_job_history(&self, job: u64) -> Result<(), StoreError> {
        for k in self.job_events.scan_prefix(job.to_be_bytes()).keys() {
            let k = k?;
            if let Some(seq) = u64_at(&k, 8) {
                self.events.remove(seq.to_be_bytes())?;
            }
            self.job_events.remove(k)?;
        }
        self.job_decisions.remove(job.to_be_bytes())?;
        Ok(())
    }

    /// Keeps the decisions logged about `job` (a JSON array) when it leaves memory.
    pub fn put_job_decisions(
        &self,
        job: u64,
        decisions: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.job_decisions
            .insert(job.to_be_bytes(), encode(decisions))?;
        Ok(())
    }

    /// The decisions kept about `job`, if it left memory with some.
    pub fn job_decisions(&self, job: u64) -> Result<Option<serde_json::Value>, StoreError> {
        self.job_decisions
            .get(job.to_be_bytes())?
            .map(|v| decode("job_decisions", &v))
            .transpose()
    }

    /// Deletes at most `limit` accounting records of processes that ended before
    /// `before_ms`, earliest first; returns how many.
    pub fn delete_accounting_before(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> Result<usize, StoreError> {
        let mut n = 0;
        for kv in self.accounting.range(..before_ms.to_be_bytes()).take(limit) {
            let (k, v) = kv?;
            let r: super::AccountingRecord = decode("accounting", &v)?;
            self.accounting_runs
                .remove(super::accounting::run_key(&r))?;
            if let Some(seq) = k.get(8..16) {
                self.accounting_seq.remove(seq)?;
            }
            self.accounting.remove(k)?;
            n += 1;
        }
        Ok(n)
    }

    /// Builds the job index of the event log of a database written before it existed.
    pub(super) fn ensure_event_index(&self) -> Result<(), StoreError> {
        if self.meta::<u64>(EVENT_INDEX_META)? == Some(EVENT_INDEX_VERSION) {
            return Ok(());
        }
        for v in self.events.iter().values() {
            let e: Event = decode("events", &v?)?;
            if let Some(job) = e.job {
                self.job_events.insert(job_event_key(job, e.seq), &[])?;
            }
        }
        self.set_meta(EVENT_INDEX_META, &EVENT_INDEX_VERSION)?;
        self.flush()
    }
}
