//! The accounting trees: one [`AccountingRecord`] per ended task process, kept in the order
//! the processes ended, and an index by (job, task, run, start) so a record is written at
//! most once however often its end is seen (a replayed event after a crash, an adoption).
//!
//! Owns: the keys and the at-most-once write. Does not own what goes into a record or when
//! one is written (`scheduler::accounting`).

use super::{Store, StoreError, decode, encode};
pub use gantry_api::accounting::AccountingRecord;
use sled::Transactional;
use sled::transaction::{ConflictableTransactionError, TransactionError};

/// Which records to read; every set field must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccountingFilter {
    /// Only this user's.
    pub user: Option<String>,
    /// Only this account's.
    pub account: Option<String>,
    /// Only this job's.
    pub job: Option<u64>,
    /// Only processes that ended at or after this time (ms since the Unix epoch).
    pub since_ms: Option<u64>,
    /// Only processes that ended before this time (ms since the Unix epoch).
    pub until_ms: Option<u64>,
}

impl AccountingFilter {
    /// Whether `r` passes the filter.
    pub fn matches(&self, r: &AccountingRecord) -> bool {
        self.user.as_ref().is_none_or(|u| *u == r.user)
            && self.account.as_ref().is_none_or(|a| *a == r.account)
            && self.job.is_none_or(|j| j == r.job_id)
            && self.since_ms.is_none_or(|s| r.end_ms >= s)
            && self.until_ms.is_none_or(|u| r.end_ms < u)
    }
}

const SEQ_INDEX_META: &str = "accounting_seq_version";

/// Index key: job, task, run, start (big-endian, so one job's records are one prefix).
pub(super) fn run_key(r: &AccountingRecord) -> [u8; 24] {
    let mut k = [0u8; 24];
    k[..8].copy_from_slice(&r.job_id.to_be_bytes());
    k[8..12].copy_from_slice(&r.task_index.to_be_bytes());
    k[12..16].copy_from_slice(&r.run.to_be_bytes());
    k[16..].copy_from_slice(&r.start_ms.to_be_bytes());
    k
}

/// Record key: end time, then a unique sequence number (time order; ties in write order).
fn time_key(end_ms: u64, seq: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&end_ms.to_be_bytes());
    k[8..].copy_from_slice(&seq.to_be_bytes());
    k
}

impl Store {
    /// Writes `record` unless a record of the same job, task, run and start exists; returns
    /// whether it was written. Durable at the next [`Store::flush`].
    pub fn put_accounting(&self, record: &AccountingRecord) -> Result<bool, StoreError> {
        Ok(self.put_accounting_seq(record)?.is_some())
    }

    /// As [`Store::put_accounting`], returning the record's sequence number when written
    /// (sequence numbers grow in write order: `accounting_since` reads from one).
    pub fn put_accounting_seq(&self, record: &AccountingRecord) -> Result<Option<u64>, StoreError> {
        let rk = run_key(record);
        let seq = self.db.generate_id()?;
        let tk = time_key(record.end_ms, seq);
        let value = encode(record);
        let trees = (
            &self.accounting,
            &self.accounting_runs,
            &self.accounting_seq,
        );
        let result = trees.transaction(|(recs, runs, seqs)| {
            if runs.get(rk)?.is_some() {
                return Ok(None);
            }
            runs.insert(&rk[..], &tk[..])?;
            recs.insert(&tk[..], value.as_slice())?;
            seqs.insert(&seq.to_be_bytes(), &tk[..])?;
            Ok::<_, ConflictableTransactionError<()>>(Some(seq))
        });
        match result {
            Ok(written) => Ok(written),
            Err(TransactionError::Storage(e)) => Err(e.into()),
            Err(TransactionError::Abort(())) => Ok(None),
        }
    }

    /// Calls `f` with each record written after sequence number `after_seq` (every
    /// record: `None`) and its sequence number, in write order, one at a time; returns how
    /// many.
    pub fn each_accounting_since(
        &self,
        after_seq: Option<u64>,
        mut f: impl FnMut(u64, AccountingRecord),
    ) -> Result<u64, StoreError> {
        use std::ops::Bound;
        let from = match after_seq {
            Some(s) => Bound::Excluded(s.to_be_bytes()),
            None => Bound::Unbounded,
        };
        let mut n = 0;
        for kv in self.accounting_seq.range((from, Bound::Unbounded)) {
            let (k, tk) = kv?;
            let seq = k.as_ref().try_into().map(u64::from_be_bytes).unwrap_or(0);
            if let Some(v) = self.accounting.get(tk)? {
                f(seq, decode("accounting", &v)?);
                n += 1;
            }
        }
        Ok(n)
    }

    /// Builds the write-order index of a database written before it existed: a record's
    /// key holds its sequence number.
    pub(super) fn ensure_accounting_seq(&self) -> Result<(), StoreError> {
        if self.meta::<u64>(SEQ_INDEX_META)? == Some(1) {
            return Ok(());
        }
        for k in self.accounting.iter().keys() {
            let k = k?;
            if let Some(seq) = k.get(8..16) {
                self.accounting_seq.insert(seq, k.to_vec())?;
            }
        }
        self.set_meta(SEQ_INDEX_META, &1u64)?;
        self.flush()
    }

    /// The records that pass `filter`, oldest end first. A job filter reads only that job's
    /// records; otherwise the scan covers the `since`..`until` range of end times.
    pub fn accounting(
        &self,
        filter: &AccountingFilter,
    ) -> Result<Vec<AccountingRecord>, StoreError> {
        let mut out: Vec<AccountingRecord> = Vec::new();
        if let Some(job) = filter.job {
            for kv in self.accounting_runs.scan_prefix(job.to_be_bytes()) {
                let (_, tk) = kv?;
                if let Some(v) = self.accounting.get(tk)? {
                    let r: AccountingRecord = decode("accounting", &v)?;
                    if filter.matches(&r) {
                        out.push(r);
                    }
                }
            }
            out.sort_by_key(|r| (r.end_ms, r.task_index));
            return Ok(out);
        }
        let from = time_key(filter.since_ms.unwrap_or(0), 0);
        let to = time_key(filter.until_ms.unwrap_or(u64::MAX), 0);
        for v in self.accounting.range(from..to).values() {
            let r: AccountingRecord = decode("accounting", &v?)?;
            if filter.matches(&r) {
                out.push(r);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::executor::TaskExit;
    use crate::model::GpuShareView;

    fn record(job_id: u64, task_index: u32, user: &str, end_ms: u64) -> AccountingRecord {
        AccountingRecord {
            job_id,
            task_index,
            run: 0,
            job_name: format!("job-{job_id}"),
            user: user.into(),
            account: format!("{user}-acct"),
            queue: "default".into(),
            node: "n0".into(),
            gpus: vec![GpuShareView {
                index: 0,
                milli: 500,
            }],
            cpu_milli: 1000,
            memory_mib: 64,
            start_ms: end_ms - 2000,
            end_ms,
            gpu_milli_seconds: 1000,
            cpu_seconds: 0.5,
            memory_peak_mib: 3,
            exit: TaskExit::Exited(0),
            oom_killed: false,
        }
    }

    #[test]
    fn a_record_is_written_once_and_read_back_in_end_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let late = record(1, 0, "alice", 9_000);
        let early = record(2, 1, "bob", 5_000);
        assert!(store.put_accounting(&late).unwrap());
        assert!(store.put_accounting(&early).unwrap());
        assert!(!store.put_accounting(&late).unwrap(), "a replay is refused");
        let mut next_run = late.clone();
        next_run.run = 1;
        next_run.start_ms += 1;
        next_run.end_ms = 12_000;
        assert!(
            store.put_accounting(&next_run).unwrap(),
            "another run counts"
        );
        let all = store.accounting(&AccountingFilter::default()).unwrap();
        let ends: Vec<u64> = all.iter().map(|r| r.end_ms).collect();
        assert_eq!(ends, [5_000, 9_000, 12_000]);
        assert_eq!(all[0], early);
        drop(store);
        let reopened = Store::open(dir.path()).unwrap();
        assert_eq!(
            reopened
                .accounting(&AccountingFilter::default())
                .unwrap()
                .len(),
            3
        );
        assert!(!reopened.put_accounting(&early).unwrap());
    }

    #[test]
    fn filters_select_by_user_account_job_and_end_time() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for (job, user, end) in [(1, "alice", 1_000), (2, "bob", 2_000), (3, "alice", 3_000)] {
            store
                .put_accounting(&record(job, 0, user, end + 10_000))
                .unwrap();
        }
        store
            .put_accounting(&record(1, 1, "alice", 14_000))
            .unwrap();
        let jobs = |f: AccountingFilter| -> Vec<(u64, u32)> {
            store
                .accounting(&f)
                .unwrap()
                .iter()
                .map(|r| (r.job_id, r.task_index))
                .collect()
        };
        let user = |u: &str| AccountingFilter {
            user: Some(u.into()),
            ..Default::default()
        };
        assert_eq!(jobs(user("alice")), [(1, 0), (3, 0), (1, 1)]);
        assert_eq!(
            jobs(AccountingFilter {
                account: Some("bob-acct".into()),
                ..Default::default()
            }),
            [(2, 0)]
        );
        assert_eq!(
            jobs(AccountingFilter {
                job: Some(1),
                ..Default::default()
            }),
            [(1, 0), (1, 1)]
        );
        assert_eq!(
            jobs(AccountingFilter {
                since_ms: Some(12_000),
                until_ms: Some(14_000),
                ..Default::default()
            }),
            [(2, 0), (3, 0)]
        );
        assert_eq!(
            jobs(AccountingFilter {
                job: Some(1),
                since_ms: Some(12_000),
                ..Default::default()
            }),
            [(1, 1)]
        );
    }
}
