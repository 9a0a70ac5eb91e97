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

use crate::state::{Guard, KvOp, Scan, StateKv, Table, prefix_end};
use crate::{Store, StoreError, decode, encode};
use gantry_api::model::{JobRecord, JobState};
use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

/// Version of the index layout; a database whose meta names another is re-indexed at open.
const INDEX_VERSION: u64 = 1;
/// Ended jobs moved from sled to the archive per transaction.
const ARCHIVE_BATCH: usize = 5_000;
const INDEX_META: &str = "job_index_version";
/// Tries of a guarded write before giving up (another writer changed the record each time).
const WRITE_TRIES: usize = 64;
/// Ids read per range read by [`LiveIds`].
const IDS_PER_READ: usize = 512;

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

impl Store {
    /// Writes a job and brings its index keys in step, in one batch (guarded by the record
    /// it replaces, so a concurrent writer cannot leave an index key behind).
    pub fn put_job(&self, job: &JobRecord) -> Result<(), StoreError> {
        let key = job.id.to_be_bytes();
        for _ in 0..WRITE_TRIES {
            let old = self.state.get(Table::Jobs, &key)?;
            if self.replace_job(job, old)? {
                return Ok(());
            }
        }
        Err(contended(job.id))
    }

    /// Writes a job that is not stored yet (a submit) without reading first: one batch
    /// guarded by its key being absent. A record already there is replaced as
    /// [`Store::put_job`] does.
    pub fn put_new_job(&self, job: &JobRecord) -> Result<(), StoreError> {
        if self.replace_job(job, None)? {
            return Ok(());
        }
        self.put_job(job)
    }

    /// One guarded batch: `job` in place of `old` (its stored bytes, `None`: absent), its
    /// new index keys written and `old`'s others deleted; `false` when the record was not
    /// `old` any more.
    fn replace_job(&self, job: &JobRecord, old: Option<Vec<u8>>) -> Result<bool, StoreError> {
        let key = job.id.to_be_bytes().to_vec();
        let new_keys = index_keys(job);
        let mut ops = vec![KvOp::Put(Table::Jobs, key.clone(), encode(job))];
        if let Some(old) = old
            .as_deref()
            .and_then(|b| decode::<JobRecord>("jobs", b).ok())
        {
            for k in index_keys(&old) {
                if !new_keys.contains(&k) {
                    ops.push(KvOp::Delete(Table::JobIndex, k));
                }
            }
        }
        ops.extend(
            new_keys
                .into_iter()
                .map(|k| KvOp::Put(Table::JobIndex, k, Vec::new())),
        );
        let guard = Guard {
            table: Table::Jobs,
            key,
            expected: old,
        };
        self.state.apply(Some(guard), ops)
    }

    /// Deletes a job's record, wherever it is, with its index keys.
    pub fn delete_job(&self, id: u64) -> Result<(), StoreError> {
        self.delete_live_job(id)?;
        self.delete_archived(id)
    }

    /// Deletes a job's record and its index keys from the active state.
    pub(super) fn delete_live_job(&self, id: u64) -> Result<(), StoreError> {
        let key = id.to_be_bytes().to_vec();
        for _ in 0..WRITE_TRIES {
            let Some(old) = self.state.get(Table::Jobs, &key)? else {
                return Ok(());
            };
            let mut ops = vec![KvOp::Delete(Table::Jobs, key.clone())];
            if let Ok(record) = decode::<JobRecord>("jobs", &old) {
                ops.extend(
                    index_keys(&record)
                        .into_iter()
                        .map(|k| KvOp::Delete(Table::JobIndex, k)),
                );
            }
            let guard = Guard {
                table: Table::Jobs,
                key: key.clone(),
                expected: Some(old),
            };
            if self.state.apply(Some(guard), ops)? {
                return Ok(());
            }
        }
        Err(contended(id))
    }

    /// Job `id`, from the active state (the newer copy, if a crash left it in both), else
    /// the archive.
    pub fn job(&self, id: u64) -> Result<Option<JobRecord>, StoreError> {
        match self.state.get(Table::Jobs, &id.to_be_bytes())? {
            Some(v) => decode("jobs", &v).map(Some),
            None => self.archived_job(id),
        }
    }

    /// Whether a record of job `id` is stored.
    pub fn has_job(&self, id: u64) -> Result<bool, StoreError> {
        Ok(self.state.get(Table::Jobs, &id.to_be_bytes())?.is_some() || self.is_archived(id)?)
    }

    /// How many job records are stored (live and archived; a job a crash left in both
    /// counts twice until the next start).
    pub fn job_count(&self) -> Result<u64, StoreError> {
        Ok(self.state.count(Table::Jobs)? + self.archived_count()?)
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

    /// The jobs in the active state (not archived) that ended at or after `since_ms`,
    /// oldest id first.
    pub fn ended_since(&self, since_ms: u64) -> Result<Vec<JobRecord>, StoreError> {
        let scan = Scan {
            table: Table::JobIndex,
            from: Bound::Included(tagged_pair(ENDED_TAG, since_ms, 0)),
            to: prefix_end(&[ENDED_TAG]).map_or(Bound::Unbounded, Bound::Excluded),
            reverse: false,
            limit: usize::MAX,
            keys_only: true,
        };
        let mut ids: Vec<u64> = self
            .state
            .scan(&scan)?
            .iter()
            .filter_map(|(k, _)| trailing_id(k))
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
        let mut all = self.live_ended_between(from, before_ms, limit)?;
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
    ) -> Result<Vec<(u64, u64)>, StoreError> {
        let from = tagged_pair(ENDED_TAG, from.0, from.1);
        let to = tagged_pair(ENDED_TAG, before_ms, 0);
        if from >= to {
            return Ok(Vec::new());
        }
        let scan = Scan {
            table: Table::JobIndex,
            from: Bound::Excluded(from),
            to: Bound::Excluded(to),
            reverse: false,
            limit,
            keys_only: true,
        };
        Ok(self
            .state
            .scan(&scan)?
            .iter()
            .filter_map(|(k, _)| {
                let end: [u8; 8] = k.get(1..9)?.try_into().ok()?;
                Some((u64::from_be_bytes(end), trailing_id(k)?))
            })
            .collect())
    }

    /// The ids of the members of array `array_id` still stored, lowest first.
    pub fn array_member_ids(&self, array_id: u64) -> Result<Vec<u64>, StoreError> {
        let mut p = vec![ARRAY_TAG];
        p.extend_from_slice(&array_id.to_be_bytes());
        let mut ids: Vec<u64> = self
            .state
            .scan(&Scan::prefix(Table::JobIndex, &p, usize::MAX).keys())?
            .iter()
            .filter_map(|(k, _)| trailing_id(k))
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

    fn live_ids_newest_first(&self, index: Option<(JobIndex, &str)>, before: u64) -> LiveIds {
        let (table, lowest, below) = match index {
            None => (Table::Jobs, None, before.to_be_bytes().to_vec()),
            Some((index, value)) => {
                let p = prefix(index, value);
                (Table::JobIndex, Some(p.clone()), with_id(p, before))
            }
        };
        LiveIds {
            state: Arc::clone(&self.state),
            table,
            lowest,
            below,
            buffer: VecDeque::new(),
            done: false,
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
            let due = self.live_ended_between((0, 0), before_ms, ARCHIVE_BATCH)?;
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
        self.reindex_jobs()
    }

    /// Builds the job index anew from the records.
    pub(crate) fn reindex_jobs(&self) -> Result<(), StoreError> {
        let started = std::time::Instant::now();
        self.state.clear(Table::JobIndex)?;
        let mut n = 0u64;
        let mut from = Bound::Unbounded;
        loop {
            let chunk = self.state.scan(&Scan {
                table: Table::Jobs,
                from,
                to: Bound::Unbounded,
                reverse: false,
                limit: ARCHIVE_BATCH,
                keys_only: false,
            })?;
            let Some((last, _)) = chunk.last() else { break };
            from = Bound::Excluded(last.clone());
            for (_, v) in &chunk {
                let job: JobRecord = decode("jobs", v)?;
                let ops = index_keys(&job)
                    .into_iter()
                    .map(|k| KvOp::Put(Table::JobIndex, k, Vec::new()))
                    .collect();
                self.state.apply(None, ops)?;
                n += 1;
            }
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

fn contended(id: u64) -> StoreError {
    StoreError::Corrupt {
        tree: "jobs",
        message: format!("job {id} changed under every one of {WRITE_TRIES} tries to write it"),
    }
}

/// A lazy walk of the active state's ids, newest first, a range read at a time
/// ([`Store::ids_newest_first`]). A failed read ends the walk (logged).
struct LiveIds {
    state: Arc<dyn StateKv>,
    table: Table,
    /// The lowest key of the walk (an index's prefix), if any.
    lowest: Option<Vec<u8>>,
    /// Keys below this one are next.
    below: Vec<u8>,
    buffer: VecDeque<u64>,
    done: bool,
}

impl LiveIds {
    fn refill(&mut self) -> Result<(), StoreError> {
        let chunk = self.state.scan(&Scan {
            table: self.table,
            from: self
                .lowest
                .clone()
                .map_or(Bound::Unbounded, Bound::Included),
            to: Bound::Excluded(self.below.clone()),
            reverse: true,
            limit: IDS_PER_READ,
            keys_only: true,
        })?;
        self.done = chunk.len() < IDS_PER_READ;
        if let Some((last, _)) = chunk.last() {
            self.below = last.clone();
        }
        self.buffer
            .extend(chunk.iter().filter_map(|(k, _)| trailing_id(k)));
        Ok(())
    }
}

impl Iterator for LiveIds {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if self.buffer.is_empty()
            && !self.done
            && let Err(e) = self.refill()
        {
            tracing::error!("cannot read the job index: {e}");
            self.done = true;
        }
        self.buffer.pop_front()
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
