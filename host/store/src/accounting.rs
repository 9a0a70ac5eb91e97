//! Accounting, in the history database (`sql.rs`): one [`AccountingRecord`]
//! per ended task process, numbered in write order, unique by (job, task, run, start) so a
//! record is written at most once however often its end is seen (a replayed event after a
//! crash, an adoption), with indexes by end time, user and account.
//!
//! Owns: the rows and the at-most-once write. Does not own what goes into a record or when
//! one is written (`scheduler::accounting`).

use crate::sql::{SqlValue, Statement, int};
use crate::{Store, StoreError, decode, encode};
pub use gantry_api::accounting::AccountingRecord;

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

impl Store {
    /// Writes `record` unless a record of the same job, task, run and start exists; returns
    /// whether it was written. Durable against a crash at once, against a power loss within
    /// half a second (`store/history_db.rs`).
    pub fn put_accounting(&self, record: &AccountingRecord) -> Result<bool, StoreError> {
        Ok(self.put_accounting_seq(record)?.is_some())
    }

    /// As [`Store::put_accounting`], returning the record's sequence number when written
    /// (sequence numbers grow in write order: `each_accounting_since` reads from one).
    pub fn put_accounting_seq(&self, record: &AccountingRecord) -> Result<Option<u64>, StoreError> {
        let done = self.history.write(vec![Statement::new(
            "INSERT INTO accounting \
             (job_id, task_index, run, start_ms, end_ms, \"user\", account, record) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT DO NOTHING RETURNING seq",
            record_values(record),
        )])?;
        done.first()
            .and_then(|w| w.returned.first())
            .map(|r| r.uint(0))
            .transpose()
    }

    /// Calls `f` with each record written after sequence number `after_seq` (every
    /// record: `None`) and its sequence number, in write order, one at a time; returns how
    /// many. Reads a chunk at a time, never holding the connection between chunks.
    pub fn each_accounting_since(
        &self,
        after_seq: Option<u64>,
        mut f: impl FnMut(u64, AccountingRecord),
    ) -> Result<u64, StoreError> {
        const CHUNK: u64 = 1024;
        let mut after = after_seq.unwrap_or(0);
        let mut n = 0;
        loop {
            let chunk = self.history.read(Statement::new(
                "SELECT seq, record FROM accounting WHERE seq > ?1 ORDER BY seq LIMIT ?2",
                vec![int(after), int(CHUNK)],
            ))?;
            if chunk.is_empty() {
                return Ok(n);
            }
            for row in chunk {
                after = row.uint(0)?;
                f(after, decode("accounting", row.bytes(1)?)?);
                n += 1;
            }
        }
    }

    /// The records that pass `filter`, oldest end first (one job's: by end, then task).
    /// Served from the index of the most selective field set (job, user, account, end time).
    pub fn accounting(
        &self,
        filter: &AccountingFilter,
    ) -> Result<Vec<AccountingRecord>, StoreError> {
        let since = int(filter.since_ms.unwrap_or(0));
        let until = int(filter.until_ms.unwrap_or(u64::MAX));
        let (by, params): (&str, Vec<SqlValue>) = if let Some(job) = filter.job {
            ("job_id = ?3 AND", vec![since, until, int(job)])
        } else if let Some(user) = &filter.user {
            ("\"user\" = ?3 AND", vec![since, until, user.clone().into()])
        } else if let Some(account) = &filter.account {
            (
                "account = ?3 AND",
                vec![since, until, account.clone().into()],
            )
        } else {
            ("", vec![since, until])
        };
        let order = if filter.job.is_some() {
            "end_ms, task_index"
        } else {
            "end_ms, seq"
        };
        // `by` and `order` are fixed strings above, never user input.
        let rows = self.history.read(Statement::new(
            format!(
                "SELECT record FROM accounting WHERE {by} end_ms >= ?1 AND end_ms < ?2 \
                 ORDER BY {order}"
            ),
            params,
        ))?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let r: AccountingRecord = decode("accounting", row.bytes(0)?)?;
            if filter.matches(&r) {
                out.push(r);
            }
        }
        Ok(out)
    }
}

/// `?1`..`?8` of an accounting row: job, task, run, start, end, user, account, record.
fn record_values(r: &AccountingRecord) -> Vec<SqlValue> {
    vec![
        int(r.job_id),
        r.task_index.into(),
        r.run.into(),
        int(r.start_ms),
        int(r.end_ms),
        r.user.clone().into(),
        r.account.clone().into(),
        encode(r).into(),
    ]
}

/// The statement that copies `record` in with its own sequence number `seq` (a
/// migration); a record already there is kept.
pub(crate) fn copy_accounting(seq: u64, record: &AccountingRecord) -> Statement {
    let mut params = record_values(record);
    params.push(int(seq));
    Statement::new(
        "INSERT INTO accounting \
         (job_id, task_index, run, start_ms, end_ms, \"user\", account, record, seq) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT DO NOTHING",
        params,
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use gantry_api::model::GpuShareView;
    use gantry_api::task::TaskExit;

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
            uncharged: None,
            gpu_used_milli_seconds: None,
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
