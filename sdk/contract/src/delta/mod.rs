//! Contract 0.2's incremental lists (`wit/0.2.0/README.md`), as plain Rust on both sides:
//! the host's [`Encoder`] turns this call's list into a delta against what the plugin was
//! sent by its previous call (which elements it keeps, which arrive fresh), and re-numbers
//! symbols into the plugin's own string table ([`StringTable`]); the guest's [`apply`]
//! rebuilds the list from its previous one by moves, never by copies.
//!
//! Owns: the delta's arithmetic and the symbol re-numbering. Does not own: the WIT types
//! or calling a plugin (`host/plugin-runtime/src/mirror.rs` on the host,
//! `sdk/rust/src/wasm_delta.rs` in the guest), or deciding when to resend in full.

use crate::types::{Cycle, Job, JobId, Label, Node, NodeId, RunningJob, Symbol};
use std::collections::HashMap;

mod apply;
mod encoder;

pub use apply::apply;
pub use encoder::Encoder;

/// `keep` entry meaning "the next element of `fresh`".
pub const FRESH: u32 = u32::MAX;

/// The plugin's string table as the host tracks it: every string sent since the last
/// full resend, and its symbol there; and the previous call's table with its translation,
/// so that a call whose table begins like the previous one's (an interner that only grew,
/// or interned the same strings in the same order) compares those strings instead of
/// looking each up.
#[derive(Debug, Default)]
pub struct StringTable {
    ids: HashMap<String, Symbol>,
    len: u32,
    last: Vec<String>,
    last_tr: Vec<Symbol>,
    /// The previous call's `Cycle::strings_lineage`.
    last_lineage: u64,
}

impl StringTable {
    /// Strings sent so far.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether nothing was sent yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// For each of this call's strings (`cycle.strings`), its symbol in the plugin's table;
    /// and the strings to append to that table, in order. `lineage` is the cycle's
    /// `strings_lineage`: when it is the previous call's (not 0) and the table did not
    /// shrink, the previous call's strings are taken as unchanged without comparing.
    pub fn translate(&mut self, strings: &[String], lineage: u64) -> (Vec<Symbol>, Vec<String>) {
        let grown =
            lineage != 0 && lineage == self.last_lineage && strings.len() >= self.last.len();
        self.last_lineage = lineage;
        let same = if grown {
            self.last.len()
        } else {
            strings
                .iter()
                .zip(&self.last)
                .take_while(|(a, b)| a == b)
                .count()
        };
        self.last.truncate(same);
        self.last_tr.truncate(same);
        let mut added = Vec::new();
        for s in &strings[same..] {
            let id = match self.ids.get(s) {
                Some(id) => *id,
                None => {
                    let id = self.len;
                    self.len += 1;
                    self.ids.insert(s.clone(), id);
                    added.push(s.clone());
                    id
                }
            };
            self.last.push(s.clone());
            self.last_tr.push(id);
        }
        (self.last_tr.clone(), added)
    }
}

/// A hasher for the ids the encoder indexes (u64 and u32 keys): one multiply, no SipHash.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
}

pub(crate) type IdMap<K> = HashMap<K, usize, std::hash::BuildHasherDefault<IdHasher>>;

fn sym(tr: &[Symbol], s: Symbol) -> Symbol {
    // A symbol outside the call's table stays out of range in the plugin's (it read "" there too).
    tr.get(s as usize).copied().unwrap_or(u32::MAX)
}

/// Whether the plugin's `labels` equal this call's `now` (symbols through `tr`).
fn same_labels(labels: &[Label], now: &[Label], tr: &[Symbol]) -> bool {
    labels.len() == now.len()
        && labels
            .iter()
            .zip(now)
            .all(|(a, b)| a.key == sym(tr, b.key) && a.value == sym(tr, b.value))
}

fn renumber_labels(labels: &mut [Label], tr: &[Symbol]) {
    for l in labels {
        (l.key, l.value) = (sym(tr, l.key), sym(tr, l.value));
    }
}

/// Whether two numbered elements are the same change of the same element: a producer
/// gives each change a number unique in the process (`crate::next_revision`), so an
/// element sent with a number and seen again with it is unchanged. The text behind a
/// symbol is what the plugin's table keeps, so an unchanged element's symbols are still
/// the plugin's.
fn same_revision(sent: u64, now: u64) -> bool {
    sent != 0 && sent == now
}

/// A list element the host sends incrementally: its identity, whether it is unchanged, and
/// itself with its symbols re-numbered.
pub trait Mirrored: Default {
    /// What identifies it across calls.
    type Key: Eq + std::hash::Hash + Copy;
    /// Its identity.
    fn key(&self) -> Self::Key;
    /// Whether `self` (as the plugin has it) equals `now` (this call's, symbols through `tr`).
    fn same_as(&self, now: &Self, tr: &[Symbol]) -> bool;
    /// `self` with its symbols through `tr`.
    fn renumbered(&self, tr: &[Symbol]) -> Self;
}

impl Mirrored for Job {
    type Key = JobId;
    fn key(&self) -> JobId {
        self.id
    }
    fn same_as(&self, now: &Self, tr: &[Symbol]) -> bool {
        if same_revision(self.revision, now.revision) {
            return self.id == now.id;
        }
        self.id == now.id
            && self.name == sym(tr, now.name)
            && self.user == sym(tr, now.user)
            && self.account == sym(tr, now.account)
            && self.queue == sym(tr, now.queue)
            && self.tier == now.tier
            && self.submit_ms == now.submit_ms
            && self.time_limit_s == now.time_limit_s
            && self.kind == now.kind
            && self.preemptible == now.preemptible
            && self.tasks == now.tasks
            && same_labels(&self.labels, &now.labels, tr)
    }
    fn renumbered(&self, tr: &[Symbol]) -> Self {
        let mut j = self.clone();
        for s in [&mut j.name, &mut j.user, &mut j.account, &mut j.queue] {
            *s = sym(tr, *s);
        }
        renumber_labels(&mut j.labels, tr);
        j
    }
}

impl Mirrored for Node {
    type Key = NodeId;
    fn key(&self) -> NodeId {
        self.id
    }
    fn same_as(&self, now: &Self, tr: &[Symbol]) -> bool {
        if same_revision(self.revision, now.revision) {
            return self.id == now.id;
        }
        self.id == now.id
            && self.name == sym(tr, now.name)
            && self.state == now.state
            && self.cpu_milli_total == now.cpu_milli_total
            && self.cpu_milli_free == now.cpu_milli_free
            && self.memory_mib_total == now.memory_mib_total
            && self.memory_mib_free == now.memory_mib_free
            && self.gpus.len() == now.gpus.len()
            && self.gpus.iter().zip(&now.gpus).all(|(a, b)| {
                a.index == b.index
                    && a.model == sym(tr, b.model)
                    && a.memory_mib == b.memory_mib
                    && a.free_milli == b.free_milli
                    && a.healthy == b.healthy
            })
            && same_labels(&self.labels, &now.labels, tr)
    }
    fn renumbered(&self, tr: &[Symbol]) -> Self {
        let mut n = self.clone();
        n.name = sym(tr, n.name);
        for g in &mut n.gpus {
            g.model = sym(tr, g.model);
        }
        renumber_labels(&mut n.labels, tr);
        n
    }
}

impl Mirrored for RunningJob {
    type Key = JobId;
    fn key(&self) -> JobId {
        self.job.id
    }
    fn same_as(&self, now: &Self, tr: &[Symbol]) -> bool {
        if same_revision(self.revision, now.revision) {
            return self.job.id == now.job.id;
        }
        self.start_ms == now.start_ms
            && self.expected_end_ms == now.expected_end_ms
            && self.score.to_bits() == now.score.to_bits()
            && self.tasks == now.tasks
            && self.job.same_as(&now.job, tr)
    }
    fn renumbered(&self, tr: &[Symbol]) -> Self {
        RunningJob {
            job: self.job.renumbered(tr),
            tasks: self.tasks.clone(),
            start_ms: self.start_ms,
            expected_end_ms: self.expected_end_ms,
            score: self.score,
            revision: self.revision,
        }
    }
}

/// The cycle context with its symbols through `tr` and, as its `strings`, the strings
/// `added` to the plugin's table.
pub fn renumbered_cycle(ctx: &Cycle, tr: &[Symbol], added: Vec<String>) -> Cycle {
    let mut c = Cycle {
        strings: added,
        ..Cycle::default()
    };
    c.id = ctx.id;
    c.now_ms = ctx.now_ms;
    c.seed = ctx.seed;
    c.totals = ctx.totals;
    c.strings_lineage = 0;
    c.gpu_models = ctx.gpu_models.iter().map(|m| sym(tr, *m)).collect();
    let usage = |v: &[crate::Usage]| {
        v.iter()
            .map(|u| crate::Usage {
                who: sym(tr, u.who),
                gpu_seconds: u.gpu_seconds,
            })
            .collect()
    };
    let gpus = |v: &[crate::GpuUse]| {
        v.iter()
            .map(|u| crate::GpuUse {
                who: sym(tr, u.who),
                gpu_milli: u.gpu_milli,
            })
            .collect()
    };
    c.user_usage = usage(&ctx.user_usage);
    c.account_usage = usage(&ctx.account_usage);
    c.user_gpus = gpus(&ctx.user_gpus);
    c.account_gpus = gpus(&ctx.account_gpus);
    c.queues = ctx
        .queues
        .iter()
        .map(|q| crate::QueueStatus {
            queue: sym(tr, q.queue),
            ..q.clone()
        })
        .collect();
    c
}

#[cfg(test)]
mod tests;
