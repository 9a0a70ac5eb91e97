//! The host's side of one list argument: what the plugin was sent by its previous call,
//! and the delta from it to this call's list.
//!
//! Owns [`Encoder`]: finding each element of this call's list among the sent ones (by
//! walking both lists together, looking a few elements ahead over removed ones, and
//! only then by an index), and deciding kept or fresh. Does not own the delta's
//! application (`apply.rs`) or the element comparisons (`Mirrored`, `mod.rs`).

use super::{FRESH, IdMap, Mirrored, apply};
use crate::types::Symbol;

/// One argument's list as the plugin has it (host side): what its previous call sent.
#[derive(Debug)]
pub struct Encoder<T: Mirrored> {
    sent: Vec<T>,
}

impl<T: Mirrored> Default for Encoder<T> {
    fn default() -> Self {
        Self { sent: Vec::new() }
    }
}

impl<T: Mirrored> Encoder<T> {
    /// Forgets what was sent (before a full resend).
    pub fn clear(&mut self) {
        self.sent.clear();
    }

    /// The delta from what was sent to `now` (symbols through `tr`): `keep` and the fresh
    /// elements, re-numbered. What was sent becomes `now`, as the plugin will have it.
    /// The caller lowers the fresh elements, then hands them back with [`Self::commit`].
    pub fn encode(&mut self, now: &[T], tr: &[Symbol]) -> (Vec<u32>, Vec<T>) {
        let mut keep = Vec::with_capacity(now.len());
        let mut fresh = Vec::new();
        let mut finder = Finder::new(self.sent.len());
        for x in now {
            let at = finder.find(&self.sent, x.key());
            match at {
                Some(j) if !finder.kept(j) && self.sent[j].same_as(x, tr) => {
                    finder.mark_kept(j);
                    keep.push(u32::try_from(j).unwrap_or(FRESH));
                }
                _ => {
                    keep.push(FRESH);
                    fresh.push(x.renumbered(tr));
                }
            }
        }
        (keep, fresh)
    }

    /// Makes what was sent the list `keep` and `fresh` describe (as the plugin does).
    pub fn commit(&mut self, keep: &[u32], fresh: Vec<T>) -> Result<(), String> {
        apply(&mut self.sent, keep, fresh)
    }
}

/// Elements the walk may pass over before it builds an index instead.
const LOOK_AHEAD: usize = 4;
/// Passed-over elements searched one by one before an index is built instead.
const SKIPPED_SCAN: usize = 32;

/// Finds each element of this call's list among the sent ones. It walks the sent list
/// with a cursor (a list that lost or gained elements is a shifted copy of the previous
/// one), looks a few elements ahead over removed ones and remembers those it passed; an
/// element not at the cursor is then searched among the passed ones once the walk reached
/// the end (one by one, or by an index of those alone when there are many). Only when
/// none of that can answer is an index of every sent key built.
struct Finder<K> {
    /// Where the next element probably is: one past the last one found.
    cursor: usize,
    /// Per sent element: found (`FOUND`), kept (`KEPT`).
    seen: Vec<u8>,
    found: usize,
    /// Sent elements the walk passed over (while there is no index).
    skipped: Vec<usize>,
    /// An index of the passed-over elements alone, once the walk reached the end.
    skipped_index: Option<IdMap<K>>,
    index: Option<IdMap<K>>,
}

const FOUND: u8 = 1;
const KEPT: u8 = 2;

impl<K: Eq + std::hash::Hash + Copy> Finder<K> {
    fn new(sent: usize) -> Self {
        Self {
            cursor: 0,
            seen: vec![0; sent],
            found: 0,
            skipped: Vec::new(),
            skipped_index: None,
            index: None,
        }
    }

    /// The position among `sent` of the element with `key`, if it was sent.
    fn find<T: Mirrored<Key = K>>(&mut self, sent: &[T], key: K) -> Option<usize> {
        let at = self.locate(sent, key);
        if let Some(j) = at {
            self.cursor = j + 1;
            if self.seen[j] & FOUND == 0 {
                self.seen[j] |= FOUND;
                self.found += 1;
            }
        }
        at
    }

    fn locate<T: Mirrored<Key = K>>(&mut self, sent: &[T], key: K) -> Option<usize> {
        if sent.get(self.cursor).is_some_and(|s| s.key() == key) {
            return Some(self.cursor);
        }
        // Once every sent element was found, the rest of this call's list is new (a list
        // that grew at its end needs no index).
        if self.found == sent.len() {
            return None;
        }
        if self.index.is_none() {
            // Without an index every sent element before the cursor was found or skipped.
            let ahead = sent
                .iter()
                .enumerate()
                .skip(self.cursor + 1)
                .take(LOOK_AHEAD);
            if let Some(j) = ahead
                .map(|(j, s)| (j, s.key()))
                .find(|&(_, k)| k == key)
                .map(|(j, _)| j)
            {
                self.skipped.extend(self.cursor..j);
                return Some(j);
            }
            if self.cursor >= sent.len() {
                // Past the end: only a passed-over element can still be found.
                if self.skipped.len() <= SKIPPED_SCAN {
                    let seen = &self.seen;
                    return self
                        .skipped
                        .iter()
                        .copied()
                        .find(|&j| seen[j] & FOUND == 0 && sent[j].key() == key);
                }
                let skipped = &self.skipped;
                return self
                    .skipped_index
                    .get_or_insert_with(|| skipped.iter().map(|&j| (sent[j].key(), j)).collect())
                    .get(&key)
                    .copied();
            }
        }
        self.index
            .get_or_insert_with(|| sent.iter().enumerate().map(|(j, s)| (s.key(), j)).collect())
            .get(&key)
            .copied()
    }

    fn kept(&self, j: usize) -> bool {
        self.seen[j] & KEPT != 0
    }

    fn mark_kept(&mut self, j: usize) {
        self.seen[j] |= KEPT;
    }
}
