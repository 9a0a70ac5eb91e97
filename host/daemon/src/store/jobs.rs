//! The job trees: every job's record by id (active and history alike, until retention
//! deletes it), and one index tree whose keys find jobs by user, account, queue, state,
//! array and end time without reading every record. A record and its index keys change
//! in one sled transaction, so the index never names a state the record does not have.
//!
//! Owns: the index keys, keeping them in step with the records, rebuilding them for a
//! database written before they existed, and the reads they serve (active jobs, recently
//! ended ones, one id, ids newest first under one index, ended before a time). Does not
//! own which jobs stay in memory (`scheduler::job_table`) or when history is deleted
//! (`scheduler::retention`).

use super::{Store, StoreError, decode, encode};
use crate::model::{JobRecord, JobState};
use sled::Transactional;
use sled::transaction::{ConflictableTransactionError, TransactionError};

/// Version of the index layout; a database whose meta names another is re-indexed at open.
const INDEX_VERSION: u64 = 1;
const INDEX_META: &str = "job_index_version";

/// What a job index key is by (its first byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobIndex {
    /// `spec.user`.
    User,
    /// `spec.account`.
    Account,
    /// `spec.queue`.
    Queue,
    /// `state`.
    State,
}

impl JobIndex {
    fn tag(self) -> u8 {
        match self {
            Self::User => b'u',
            Self::Account => b'a',
            Self::Queue => b'q',
            Self::State => b's',
        }
    }
}

const ARRAY_TAG: u8 = b'r';
const ENDED_TAG: u8 = b'e';

/// The key prefix of every job whose `index` field is `value`: tag, length, bytes (the
/// length keeps `ab` from being a prefix of `abc`).
fn prefix(index: JobIndex, value: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(5 + value.len() + 8);
    k.push(index.tag());
    k.extend_from_slice(&(value.len() as u32).to_be_bytes());
    k.extend_from_slice(value.as_bytes());
    k
}

fn with_id(mut prefix: Vec<u8>, id: u64) -> Vec<u8> {
    prefix.extend_from_slice(&id.to_be_bytes());
    prefix
}

fn tagged_pair(tag: u8, a: u64, b: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.push(tag);
    k.extend_from_slice(&a.to_be_bytes());
    k.extend_from_slice(&b.to_be_bytes());
    k
}

/// The id at the end of an index key.
fn trailing_id(key: &[u8]) -> Option<u64> {
    let tail: [u8; 8] = key.get(key.len().checked_sub(8)?..)?.try_into().ok()?;
    Some(u64::from_be_bytes(tail))
}

/// Every index key of `job`.
fn index_keys(job: &JobRecord) -> Vec<Vec<u8>> {
    let mut keys = vec![
        with_id(prefix(JobIndex::User, &job.spec.user), job.id),
        with_id(prefix(JobIndex::Account, &job.spec.account), job.id),
        with_id(prefix(JobIndex::Queue, &job.spec.queue), job.id),
        with_id(prefix(JobIndex::State, job.state.as_str()), job.id),
    ];
    if let Some(a) = job.array {
        keys.push(tagged_pair(ARRAY_TAG, a.array_id, job.id));
    }
    if job.state.is_terminal() {
        keys.push(tagged_pair(ENDED_TAG, job.end_ms.unwrap_or(0), job.id));
    }
    keys
}

fn abort(e: TransactionError<StoreError>) -> StoreError {
    match e {
        TransactionError::Abort(e) => e,
        TransactionError::Storage(e) => StoreError::Sled(e),
    }
}

impl Store {
    /// Writes a job and brings its index keys in step, in one transaction.
    pub fn put_job(&self, job: &JobRecord) -> Result<(), StoreError> {
        let value = encode(job);
        let new_keys = index_keys(job);
        (&self.jobs, &self.job_index)
            .transaction(|(jobs, index)| {
                let old = jobs.insert(&job.id.to_be_bytes(), value.as_slice())?;
                if let Some(old) = old.and_then(|b| decode::<JobRecord>("jobs", &b).ok()) {
                    for k in index_keys(&old) {
                        if !new_keys.contains(&k) {
                            index.remove(k)?;
                        }
                    }
                }
                for k in &new_keys {
                    index.insert(k.as_slice(), &[])?;
                }
                Ok::<_, ConflictableTransactionError<StoreError>>(())
            })
            .map_err(abort)
    }

    /// Deletes a job's record and its index keys.
    pub fn delete_job(&self, id: u64) -> Result<(), StoreError> {
        (&self.jobs, &self.job_index)
            .transaction(|(jobs, index)| {
                if let Some(old) = jobs.remove(&id.to_be_bytes())?
                    && let Ok(old) = decode::<JobRecord>("jobs", &old)
                {
                    for k in index_keys(&old) {
                        index.remove(k)?;
                    }
                }
                Ok::<_, ConflictableTransactionError<StoreError>>(())
            })
            .map_err(abort)
    }

    /// Job `id`, from the store.
    pub fn job(&self, id: u64) -> Result<Option<JobRecord>, StoreError> {
        self.jobs
            .get(id.to_be_bytes())?
            .map(|v| decode("jobs", &v))
            .transpose()
    }

    /// Whether a record of job `id` is stored.
    pub fn has_job(&self, id: u64) -> Result<bool, StoreError> {
        Ok(self.jobs.contains_key(id.to_be_bytes())?)
    }

    /// How many job records are stored.
    pub fn job_count(&self) -> usize {
        self.jobs.len()
    }

    /// The jobs that have not ended (pending or running), oldest id first.
    pub fn active_jobs(&self) -> Result<Vec<JobRecord>, StoreError> {
        let mut ids = Vec::new();
        for state in [JobState::Pending, JobState::Running] {
            ids.extend(self.ids_newest_first(Some((JobIndex::State, state.as_str())), None));
        }
        ids.sort_unstable();
        self.records(ids)
    }

    /// The jobs that ended at or after `since_ms`, oldest id first.
    pub fn ended_since(&self, since_ms: u64) -> Result<Vec<JobRecord>, StoreError> {
        let from = tagged_pair(ENDED_TAG, since_ms, 0);
        let mut ids: Vec<u64> = self
            .job_index
            .range(from..)
            .keys()
            .map_while(|k| k.ok())
            .take_while(|k| k.first() == Some(&ENDED_TAG))
            .filter_map(|k| trailing_id(&k))
            .collect();
        ids.sort_unstable();
        self.records(ids)
    }

    /// At most `limit` (end time, id) of jobs that ended before `before_ms`, earliest first.
    pub fn ended_before(&self, before_ms: u64, limit: usize) -> Vec<(u64, u64)> {
        self.ended_between((0, 0), before_ms, limit)
    }

    /// At most `limit` (end time, id) of jobs that ended before `before_ms`, after the job
    /// `from` names (end time, id; excluded), earliest first.
    pub fn ended_between(&self, from: (u64, u64), before_ms: u64, limit: usize) -> Vec<(u64, u64)> {
        use std::ops::Bound;
        let from = tagged_pair(ENDED_TAG, from.0, from.1);
        let to = tagged_pair(ENDED_TAG, before_ms, 0);
        if from >= to {
            return Vec::new();
        }
        self.job_index
            .range((Bound::Excluded(from), Bound::Excluded(to)))
            .keys()
            .map_while(|k| k.ok())
            .take(limit)
            .filter_map(|k| {
                let end: [u8; 8] = k.get(1..9)?.try_into().ok()?;
                Some((u64::from_be_bytes(end), trailing_id(&k)?))
            })
            .collect()
    }

    /// The ids of the members of array `array_id` still stored, lowest first.
    pub fn array_member_ids(&self, array_id: u64) -> Vec<u64> {
        let mut p = vec![ARRAY_TAG];
        p.extend_from_slice(&array_id.to_be_bytes());
        self.job_index
            .scan_prefix(p)
            .keys()
            .map_while(|k| k.ok())
            .filter_map(|k| trailing_id(&k))
            .collect()
    }

    /// Job ids newest first: of every job, or of those `index` names; only ids below
    /// `before` when given (the cursor of a paginated list).
    pub fn ids_newest_first(
        &self,
        index: Option<(JobIndex, &str)>,
        before: Option<u64>,
    ) -> Box<dyn Iterator<Item = u64> + '_> {
        let before = before.unwrap_or(u64::MAX);
        match index {
            None => Box::new(
                self.jobs
                    .range(..before.to_be_bytes())
                    .keys()
                    .rev()
                    .map_while(|k| k.ok())
                    .filter_map(|k| trailing_id(&k)),
            ),
            Some((index, value)) => {
                let p = prefix(index, value);
                let start = p.clone();
                let end = with_id(p, before);
                Box::new(
                    self.job_index
                        .range(start..end)
                        .keys()
                        .rev()
                        .map_while(|k| k.ok())
                        .filter_map(|k| trailing_id(&k)),
                )
            }
        }
    }

    fn records(&self, ids: Vec<u64>) -> Result<Vec<JobRecord>, StoreError> {
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(j) = self.job(id)? {
                out.push(j);
            }
        }
        Ok(out)
    }

    /// Builds the index of a database written before it existed (or by an older layout);
    /// once, at open.
    pub(super) fn ensure_job_index(&self) -> Result<(), StoreError> {
        if self.meta::<u64>(INDEX_META)? == Some(INDEX_VERSION) {
            return Ok(());
        }
        let started = std::time::Instant::now();
        self.job_index.clear()?;
        let mut n = 0u64;
        for v in self.jobs.iter().values() {
            let job: JobRecord = decode("jobs", &v?)?;
            for k in index_keys(&job) {
                self.job_index.insert(k, &[])?;
            }
            n += 1;
        }
        self.set_meta(INDEX_META, &INDEX_VERSION)?;
        self.flush()?;
        tracing::info!(
            jobs = n,
            ms = started.elapsed().as_millis() as u64,
            "job index built"
        );
        Ok(())
    }
}

#[cfg(test)]
#[path = "jobs_tests.rs"]
mod tests;
