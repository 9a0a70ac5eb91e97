//! Tie-breaking (`docs/fgd-replay/method.md` §5) and deterministic randomness.
//!
//! Owns the fixed per-seed node priority: `rank(node) = splitmix64(splitmix64(seed) ^
//! fnv1a64(name))`, smaller wins, then the node name, then the node id. It needs no
//! sorting and no state, so the same seed and node name give the same rank in every
//! call, in wasm and natively. Also owns [`Rng`], the seeded generator of the random
//! policy. Does not own scores or the choice among scored nodes (`place`).

use std::cmp::Ordering;

/// FNV-1a, 64-bit, over `bytes`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET, |h, b| (h ^ u64::from(*b)).wrapping_mul(PRIME))
}

/// The splitmix64 finaliser: a bijective 64-bit mix.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The tie-break rank of the node named `name` under `seed` (smaller wins).
pub fn rank(seed: u64, name: &str) -> u64 {
    splitmix64(splitmix64(seed) ^ fnv1a64(name.as_bytes()))
}

/// Orders two tied nodes: smaller rank first, then smaller name, then smaller id.
pub fn tie_order(a: (u64, &str, u32), b: (u64, &str, u32)) -> Ordering {
    a.0.cmp(&b.0)
        .then_with(|| a.1.cmp(b.1))
        .then_with(|| a.2.cmp(&b.2))
}

/// Ranks of the nodes of the previous call, by position: a node at the same position
/// with the same id, name and seed reuses its rank instead of hashing its name again.
/// Pure: a hit returns exactly what [`rank`] would.
#[derive(Debug, Default)]
pub struct RankCache {
    entries: Vec<(u32, u64, String, u64)>,
}

impl RankCache {
    /// The rank of node `id` named `name` at view position `pos` (positions are asked
    /// in order 0, 1, 2, ...).
    pub fn rank(&mut self, pos: usize, id: u32, seed: u64, name: &str) -> u64 {
        if let Some(e) = self.entries.get_mut(pos) {
            if e.0 == id && e.1 == seed && e.2 == name {
                return e.3;
            }
            let r = rank(seed, name);
            e.0 = id;
            e.1 = seed;
            e.2.clear();
            e.2.push_str(name);
            e.3 = r;
            return r;
        }
        let r = rank(seed, name);
        self.entries.push((id, seed, name.to_string(), r));
        r
    }
}

/// A small deterministic generator (splitmix64 stream).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for one decision, seeded by `(seed, job, task)`.
    pub fn for_task(seed: u64, job: u64, task: u64) -> Self {
        Self(splitmix64(splitmix64(splitmix64(seed) ^ job) ^ task))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        splitmix64(self.0)
    }

    /// Uniform in `0..n` (`n > 0`), without modulo bias (rejection sampling).
    pub fn below(&mut self, n: u64) -> u64 {
        if n <= 1 {
            return 0;
        }
        // Accept only draws below the largest multiple of n.
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_reference_values() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn rank_is_deterministic_and_seed_dependent() {
        let names: Vec<String> = (0..200).map(|i| format!("openb-node-{i:04}")).collect();
        let a: Vec<u64> = names.iter().map(|n| rank(42, n)).collect();
        let b: Vec<u64> = names.iter().map(|n| rank(42, n)).collect();
        let c: Vec<u64> = names.iter().map(|n| rank(43, n)).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        // A permutation-like spread: no collisions, and not the name order.
        let mut sorted = a.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), a.len());
        assert!(a.windows(2).any(|w| w[0] > w[1]));
        assert_eq!(rank(7, "n1"), rank(7, "n1"));
    }

    #[test]
    fn rank_cache_returns_what_rank_computes() {
        let mut c = RankCache::default();
        assert_eq!(c.rank(0, 1, 42, "a"), rank(42, "a"));
        assert_eq!(c.rank(1, 2, 42, "b"), rank(42, "b"));
        assert_eq!(c.rank(0, 1, 42, "a"), rank(42, "a"));
        assert_eq!(c.rank(0, 1, 43, "a"), rank(43, "a"));
        assert_eq!(c.rank(0, 1, 43, "z"), rank(43, "z"));
        assert_eq!(c.rank(1, 7, 43, "z"), rank(43, "z"));
    }

    #[test]
    fn tie_order_falls_back_to_name_then_id() {
        assert_eq!(tie_order((1, "b", 9), (2, "a", 0)), Ordering::Less);
        assert_eq!(tie_order((1, "a", 9), (1, "b", 0)), Ordering::Less);
        assert_eq!(tie_order((1, "a", 0), (1, "a", 1)), Ordering::Less);
    }

    #[test]
    fn rng_is_uniform_enough_and_reproducible() {
        let mut r = Rng::for_task(42, 7, 0);
        let mut counts = [0u32; 5];
        for _ in 0..5000 {
            counts[r.below(5) as usize] += 1;
        }
        assert!(counts.iter().all(|c| (900..1100).contains(c)), "{counts:?}");
        let x: Vec<u64> = (0..4).map(|_| Rng::for_task(1, 2, 3).next_u64()).collect();
        assert!(x.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(
            Rng::for_task(1, 2, 3).next_u64(),
            Rng::for_task(1, 2, 4).next_u64()
        );
        assert_eq!(r.below(1), 0);
    }
}
