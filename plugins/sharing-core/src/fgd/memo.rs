//! A bounded, pure memo of FGD node scores.
//!
//! Owns the key (a node's free CPU, model and per-GPU free milli in index order, plus
//! the pod's non-zero CPU, GPU count and milli; with memory counted, the node's free
//! memory and the pod's), a fast hasher for it, and the map
//! `key → (score, GPU position)`, cleared when it grows past [`MEMO_LIMIT`]. A score
//! depends only on this key and the resolved target, so the owner clears the memo
//! whenever the target changes. Only nodes with at most 8 usable GPUs of one model
//! have a key (for them, a feasible pod may use every GPU). Does not own scoring.

use crate::node_view::{GpuFree, MIXED_MODEL, NodeView};
use crate::rank::splitmix64;
use crate::shape::{PodKind, PodShape};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// Entries kept before the memo is cleared (about 5 MiB).
pub const MEMO_LIMIT: usize = 1 << 17;

/// A node state and a pod shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoKey([u64; 5]);

impl Hash for MemoKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        for w in self.0 {
            state.write_u64(w);
        }
    }
}

impl MemoKey {
    /// The key of `pod` on a node, or `None` when the node cannot have one.
    pub fn new(
        node: &NodeView,
        gpus: &[GpuFree],
        pod: &PodShape,
        with_memory: bool,
    ) -> Option<Self> {
        if gpus.len() > 8 || node.model == MIXED_MODEL || pod.milli > 0xffff || pod.gpus > 0xff {
            return None;
        }
        let kind = match pod.kind {
            PodKind::CpuOnly => 0u64,
            PodKind::Sharing => 1,
            PodKind::Whole => 2,
        };
        let mut words = [
            u64::from(node.cpu)
                | u64::from(node.model) << 32
                | (gpus.len() as u64) << 40
                | kind << 48
                | u64::from(pod.gpus) << 56,
            0,
            0,
            u64::from(pod.cpu) | u64::from(pod.milli) << 32,
            0,
        ];
        if with_memory {
            if node.memory_mib > 0xffff_ffff || pod.memory_mib > 0xffff_ffff {
                return None;
            }
            words[4] = node.memory_mib | pod.memory_mib << 32;
        }
        for (i, g) in gpus.iter().enumerate() {
            words[1 + i / 4] |= u64::from(g.free.min(0xffff)) << (16 * (i % 4));
        }
        Some(Self(words))
    }
}

/// A multiply-rotate hasher for [`MemoKey`] words.
#[derive(Debug, Default, Clone, Copy)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0 ^ x)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }

    fn finish(&self) -> u64 {
        splitmix64(self.0)
    }
}

/// Scores by key.
#[derive(Debug, Default)]
pub struct Memo {
    map: HashMap<MemoKey, (i64, u8), BuildHasherDefault<KeyHasher>>,
}

impl Memo {
    /// The stored `(score, GPU position)`.
    pub fn get(&self, key: &MemoKey) -> Option<(i64, usize)> {
        self.map.get(key).map(|&(s, p)| (s, usize::from(p)))
    }

    /// Stores a result, clearing everything first when the memo is full.
    pub fn put(&mut self, key: MemoKey, score: i64, pos: usize) {
        if self.map.len() >= MEMO_LIMIT {
            self.map.clear();
        }
        self.map.insert(key, (score, pos.min(255) as u8));
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.map.clear();
    }

    /// Entries stored.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::tests::{gpus, pod, view};

    #[test]
    fn keys_tell_states_and_pods_apart() {
        let v = view(64_000);
        let a = MemoKey::new(&v, &gpus(&[1000, 500]), &pod(0, 300, 1000), false);
        let b = MemoKey::new(&v, &gpus(&[500, 1000]), &pod(0, 300, 1000), false);
        let c = MemoKey::new(&v, &gpus(&[1000, 500]), &pod(0, 300, 2000), false);
        let d = MemoKey::new(&v, &gpus(&[1000, 500]), &pod(1, 0, 1000), false);
        assert!(a.is_some() && a != b && a != c && a != d);
        assert_eq!(
            a,
            MemoKey::new(&v, &gpus(&[1000, 500]), &pod(0, 300, 1000), false)
        );
        assert!(MemoKey::new(&v, &gpus(&[1000; 9]), &pod(1, 0, 1), false).is_none());
        let mixed = NodeView {
            model: MIXED_MODEL,
            ..v
        };
        assert!(MemoKey::new(&mixed, &gpus(&[1000]), &pod(1, 0, 1), false).is_none());
    }

    #[test]
    fn bounded() {
        let v = view(0);
        let mut m = Memo::default();
        for cpu in 0..(MEMO_LIMIT as u32 + 5) {
            let key = MemoKey::new(&v, &gpus(&[1000]), &pod(0, 0, cpu + 1), false);
            if let Some(k) = key {
                m.put(k, 50, 0);
            }
        }
        assert!(m.len() <= MEMO_LIMIT && !m.is_empty());
        let k = MemoKey::new(&v, &gpus(&[1000]), &pod(0, 0, MEMO_LIMIT as u32 + 5), false);
        assert_eq!(k.and_then(|k| m.get(&k)), Some((50, 0)));
        m.clear();
        assert!(m.is_empty());
    }
}
