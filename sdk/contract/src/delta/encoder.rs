//! The host's side of one list argument: what the plugin was sent by its previous call,
//! and the delta from it to this call's list.
//!
//! Owns [`Encoder`]: finding each element of this call's list among the sent ones (by
//! walking both lists together, looking a few elements ahead over removed ones; an
//! element found neither way is looked for after the walk among the sent elements no
//! other claimed, and only when there are many such is every sent element indexed), and
//! deciding kept or fresh. Does not own the delta's
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
        // Fresh elements and their positions in `now`, in order.
        let mut fresh = Vec::new();
        let mut fresh_at = Vec::new();
        // Positions in `now` of elements looked for after the walk.
        let mut later = Vec::new();
        let mut finder = Finder::new(self.sent.len());
        for (i, x) in now.iter().enumerate() {
            match finder.find(&self.sent, x.key(), later.len()) {
                Located::Later => {
                    later.push(i);
                    keep.push(FRESH);
                }
                Located::At(j) => keep.push(self.kept_or(&mut finder, j, x, tr)),
                Located::New => keep.push(FRESH),
            }
            if keep[i] == FRESH && later.last() != Some(&i) {
                fresh.push(x.renumbered(tr));
                fresh_at.push(i);
            }
        }
        if later.is_empty() {
            return (keep, fresh);
        }
        let mut found_later = Vec::new();
        let unclaimed = finder.unclaimed(&self.sent, later.iter().map(|&i| now[i].key()));
        for (&i, at) in later.iter().zip(unclaimed) {
            keep[i] = match at {
                Some(j) => self.kept_or(&mut finder, j, &now[i], tr),
                None => FRESH,
            };
            if keep[i] == FRESH {
                found_later.push((i, now[i].renumbered(tr)));
            }
        }
        (keep, merge_in_order(fresh, &fresh_at, found_later))
    }

    /// `j` when the sent element `j` is `x` unchanged and no other element kept it; else
    /// [`FRESH`].
    fn kept_or(&self, finder: &mut Finder<T::Key>, j: usize, x: &T, tr: &[Symbol]) -> u32 {
        if !finder.kept(j) && self.sent[j].same_as(x, tr) {
            finder.mark_kept(j);
            u32::try_from(j).unwrap_or(FRESH)
        } else {
            FRESH
        }
    }

    /// Makes what was sent the list `keep` and `fresh` describe (as the plugin does).
    pub fn commit(&mut self, keep: &[u32], fresh: Vec<T>) -> Result<(), String> {
        apply(&mut self.sent, keep, fresh)
    }
}

/// `fresh` (at positions `fresh_at`, increasing) and `later` (position, element;
/// increasing) as one list in position order.
fn merge_in_order<T>(fresh: Vec<T>, fresh_at: &[usize], later: Vec<(usize, T)>) -> Vec<T> {
    let mut out = Vec::with_capacity(fresh.len() + later.len());
    let mut later = later.into_iter().peekable();
    for (x, &at) in fresh.into_iter().zip(fresh_at) {
        while let Some((_, y)) = later.next_if(|(i, _)| *i < at) {
            out.push(y);
        }
        out.push(x);
    }
    out.extend(later.map(|(_, y)| y));
    out
}

/// Elements the walk may pass over before it builds an index instead.
const LOOK_AHEAD: usize = 4;
/// Passed-over elements searched one by one before an index is built instead.
const SKIPPED_SCAN: usize = 32;
/// Elements looked for after the walk, at most, per sent element (and at least
/// [`LATER_MIN`]); past that, every sent element is indexed.
const LATER_PER_SENT: usize = 16;
const LATER_MIN: usize = 64;

/// Where the walk found an element.
enum Located {
    /// At this position of the sent list.
    At(usize),
    /// Not sent before.
    New,
    /// Not near the walk's position: looked for after the walk.
    Later,
}

/// Finds each element of this call's list among the sent ones. It walks the sent list
/// with a cursor (a list that lost or gained elements is a shifted copy of the previous
/// one), looks a few elements ahead over removed ones and remembers those it passed; an
/// element not at the cursor is then searched among the passed ones once the walk reached
/// the end (one by one, or by an index of those alone when there are many). An element
/// missed in the middle of the walk (a new one inserted there) is looked for after the
/// walk among the elements nobody claimed ([`Finder::unclaimed`]). Only after a run of
/// misses, or too many, is an index of every sent key built.
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
    /// Elements looked for after the walk since the last one found on it.
    misses_in_a_row: usize,
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
            misses_in_a_row: 0,
        }
    }

    /// Where among `sent` the element with `key` is, or that it is looked for after the
    /// walk (while few are: `deferred` so far).
    fn find<T: Mirrored<Key = K>>(&mut self, sent: &[T], key: K, deferred: usize) -> Located {
        match self.locate(sent, key, deferred) {
            Located::At(j) => {
                self.cursor = j + 1;
                self.misses_in_a_row = 0;
                self.mark_found(j);
                Located::At(j)
            }
            other => other,
        }
    }

    fn mark_found(&mut self, j: usize) {
        if self.seen[j] & FOUND == 0 {
            self.seen[j] |= FOUND;
            self.found += 1;
        }
    }

    fn locate<T: Mirrored<Key = K>>(&mut self, sent: &[T], key: K, deferred: usize) -> Located {
        let at = |found: Option<usize>| found.map_or(Located::New, Located::At);
        if sent.get(self.cursor).is_some_and(|s| s.key() == key) {
            return Located::At(self.cursor);
        }
        // Once every sent element was found, the rest of this call's list is new (a list
        // that grew at its end needs no index).
        if self.found == sent.len() {
            return Located::New;
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
                return Located::At(j);
            }
            if self.cursor >= sent.len() {
                // Past the end: only a passed-over element can still be found.
                if self.skipped.len() <= SKIPPED_SCAN {
                    let seen = &self.seen;
                    return at(self
                        .skipped
                        .iter()
                        .copied()
                        .find(|&j| seen[j] & FOUND == 0 && sent[j].key() == key));
                }
                let skipped = &self.skipped;
                return at(self
                    .skipped_index
                    .get_or_insert_with(|| skipped.iter().map(|&j| (sent[j].key(), j)).collect())
                    .get(&key)
                    .copied());
            }
            // An element new in the middle (placement's jobs in priority order) is looked
            // for after the walk; a run of misses is more likely a run of removals or a
            // reordered list, which an index serves better.
            let later_max = LATER_MIN.max(sent.len() / LATER_PER_SENT);
            if deferred < later_max && self.misses_in_a_row < LOOK_AHEAD {
                self.misses_in_a_row += 1;
                return Located::Later;
            }
        }
        at(self
            .index
            .get_or_insert_with(|| sent.iter().enumerate().map(|(j, s)| (s.key(), j)).collect())
            .get(&key)
            .copied())
    }

    /// After the walk: for each of `keys` (in order), the sent element with that key that
    /// no element claimed during the walk or before it in `keys`, if any. Searches the
    /// unclaimed elements only (by an index of them when there are many).
    fn unclaimed<T: Mirrored<Key = K>>(
        &mut self,
        sent: &[T],
        keys: impl Iterator<Item = K>,
    ) -> Vec<Option<usize>> {
        let seen = &self.seen;
        let rest: Vec<usize> = (0..sent.len()).filter(|&j| seen[j] & FOUND == 0).collect();
        let index: Option<IdMap<K>> = (rest.len() > SKIPPED_SCAN)
            .then(|| rest.iter().rev().map(|&j| (sent[j].key(), j)).collect());
        let mut out = Vec::new();
        for key in keys {
            let at = match &index {
                Some(index) => index
                    .get(&key)
                    .copied()
                    .filter(|&j| self.seen[j] & FOUND == 0),
                None => rest
                    .iter()
                    .copied()
                    .find(|&j| self.seen[j] & FOUND == 0 && sent[j].key() == key),
            };
            if let Some(j) = at {
                self.mark_found(j);
            }
            out.push(at);
        }
        out
    }

    fn kept(&self, j: usize) -> bool {
        self.seen[j] & KEPT != 0
    }

    fn mark_kept(&mut self, j: usize) {
        self.seen[j] |= KEPT;
    }
}
