//! The live job trees in sled: the record by id of every job the scheduler holds in memory
//! (active, or ended less than `retention.min_job_age_s` ago), and one index tree whose
//! keys find them by user, account, queue, state, array and end time. A record and its
//! index keys change in one sled transaction, so the index never names a state the record
//! does not have. A job leaving memory moves to the archive (`store/archive.rs`); every
//! read here covers both, so callers see one store of every job until retention deletes it.
//!
//! Owns: the index keys, keeping them in step with the records, rebuilding them for a
//! database written before they existed, moving ended jobs that sled still holds to the
//! archive, and the reads (active jobs, recently ended ones, one id, ids newest first under
//! one index, ended before a time). Does not own which jobs stay in memory
//! (`scheduler::job_table`) or when history is deleted (`scheduler::retention`).

use super::{Store, StoreError, decode, encode};
use gantry_api::model::{JobRecord, JobState};
use sled::Transactional;
use sled::transaction::{ConflictableTransactionError, TransactionError};

/// Version of the index layout; a database whose meta names another is re-indexed at open.
const INDEX_VERSION: u64 = 1;
/// Ended jobs moved from sled to the archive per transaction.
const ARCHIVE_BATCH: usize = 5_000;
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

    /// Deletes a job's record, wherever it is, with its index keys.
    pub fn delete_job(&self, id: u64) -> Result<(), StoreError> {
        self.delete_live_job(id)?;
        self.delete_archived(id)
    }

    /// Deletes a job's record and its index keys from sled.
    pub(super) fn delete_live_job(&self, id: u64) -> Result<(), StoreError> {
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

    /// Job `id`, from sled (the newer copy, if a crash left it in both), else the archive.
    pub fn job(&self, id: u64) -> Result<Option<JobRecord>, StoreError> {
        match self.jobs.get(id.to_be_bytes())? {
            Some(v) => decode("jobs", &v).map(Some),
            None => self.archived_job(id),
        }
    }

    /// Whether a record of job `id` is stored.
    pub fn has_job(&self, id: u64) -> Result<bool, StoreError> {
        Ok(self.jobs.contains_key(id.to_be_bytes())? || self.is_archived(id)?)
    }

    /// How many job records are stored (live and archived; a job a crash left in both
    /// counts twice until the next start).
    pub fn job_count(&self) -> Result<u64, StoreError> {
        Ok(self.jobs.len() as u64 + self.archived_count()?)
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

    /// The jobs in sled (not archived) that ended at or after `since_ms`, oldest id first.
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
    pub fn ended_before(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> Result<Vec<(u64, u64)>, StoreError> {
        self.ended_between((0, 0), before_ms, limit)
    }

    /// At most `limit` (end time, id) of jobs that ended before `before_ms`, after the job
    /// `from` names (end time, id; excluded), earliest first.
    pub fn ended_between(
        &self,
        from: (u64, u64),
        before_ms: u64,
        limit: usize,
    ) -> Result<Vec<(u64, u64)>, StoreError> {
        let mut all = self.live_ended_between(from, before_ms, limit);
        all.extend(self.archived_ended_between(from, before_ms, limit)?);
        all.sort_unstable();
        all.dedup();
        all.truncate(limit);
        Ok(all)
    }

    fn live_ended_between(
        &self,
        from: (u64, u64),
        before_ms: u64,
        limit: usize,
    ) -> Vec<(u64, u64)> {
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
    pub fn array_member_ids(&self, array_id: u64) -> Result<Vec<u64>, StoreError> {
        let mut p = vec![ARRAY_TAG];
        p.extend_from_slice(&array_id.to_be_bytes());
        let mut ids: Vec<u64> = self
            .job_index
            .scan_prefix(p)
            .keys()
            .map_while(|k| k.ok())
            .filter_map(|k| trailing_id(&k))
            .collect();
        ids.extend(self.archived_array_members(array_id)?);
        ids.sort_unstable();
        ids.dedup();
        Ok(ids)
    }

    /// Job ids newest first, live and archived: of every job, or of those `index` names;
    /// only ids below `before` when given (the cursor of a paginated list).
    pub fn ids_newest_first(
        &self,
        index: Option<(JobIndex, &str)>,
        before: Option<u64>,
    ) -> Box<dyn Iterator<Item = u64> + '_> {
        let before = before.unwrap_or(u64::MAX);
        Box::new(NewestFirst {
            a: self.live_ids_newest_first(index, before).peekable(),
            b: self.archived_ids_newest_first(index, before).peekable(),
        })
    }

    fn live_ids_newest_first(
        &self,
        index: Option<(JobIndex, &str)>,
        before: u64,
    ) -> Box<dyn Iterator<Item = u64> + '_> {
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

    /// Moves the ended jobs sled still holds that ended before `before_ms` to the archive
    /// (those a crash caught between the archive's write and sled's delete, and every ended
    /// job of a database written before the archive existed); returns how many.
    pub fn archive_ended_before(&self, before_ms: u64) -> Result<u64, StoreError> {
        let started = std::time::Instant::now();
        let mut moved = 0u64;
        loop {
            let due = self.live_ended_between((0, 0), before_ms, ARCHIVE_BATCH);
            if due.is_empty() {
                break;
            }
            let jobs = self.records(due.iter().map(|(_, id)| *id).collect())?;
            self.put_archived(&jobs.iter().collect::<Vec<_>>())?;
            for (_, id) in &due {
                self.delete_live_job(*id)?;
            }
            moved += due.len() as u64;
        }
        if moved > 0 {
            self.flush()?;
            tracing::info!(
                jobs = moved,
                ms = started.elapsed().as_millis() as u64,
                "ended jobs moved from sled to the history archive"
            );
        }
        Ok(moved)
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

/// Two walks of ids, each newest first, merged into one (an id in both comes once).
struct NewestFirst<A: Iterator<Item = u64>, B: Iterator<Item = u64>> {
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
}

impl<A: Iterator<Item = u64>, B: Iterator<Item = u64>> Iterator for NewestFirst<A, B> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        match (self.a.peek().copied(), self.b.peek().copied()) {
            (Some(x), Some(y)) if x == y => {
                self.b.next();
                self.a.next()
            }
            (Some(x), Some(y)) if x < y => self.b.next(),
            (Some(_), _) => self.a.next(),
            (None, _) => self.b.next(),
        }
    }
}

#[cfg(test)]
#[path = "jobs_tests.rs"]
mod tests;
