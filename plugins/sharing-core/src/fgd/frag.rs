//! Node fragmentation and the gradient score (`docs/fgd-replay/method.md` §8).
//!
//! Owns: the per-shape summary of a node's GPUs ([`ShapeFit`]), the classification of
//! a shape on a node state into the seven buckets (lack both, lack GPU, satisfied,
//! lack CPU, CPU shape fits, CPU shape lacks CPU, no access) with its fragment, the
//! float evaluation of `F` in the authors' order (weights `w_t`, per shape in target
//! order into the buckets, the satisfied share excluded, the other six summed in
//! order), the exact integer `Σ count_t·frag_t`, and the score
//! `trunc(100·sigmoid(−ΔF/1000))` with a portable `exp` (basic IEEE operations only,
//! so wasm and native builds agree bit for bit). Does not own GPU candidates or the
//! memo (`scorer`).

use crate::fgd::target::ResolvedShape;
use crate::node_view::GpuFree;

/// Bucket: the shape lacks both GPU and CPU.
pub const LACK_BOTH: usize = 0;
/// Bucket: the shape lacks GPU (also the fragment of a satisfied shape).
pub const LACK_GPU: usize = 1;
/// Bucket: the shape fits (its non-fragment part; excluded from F).
pub const SATISFIED: usize = 2;
/// Bucket: the shape lacks CPU.
pub const LACK_CPU: usize = 3;
/// Bucket: a CPU-only shape fits.
pub const CPU_SHAPE_FITS: usize = 4;
/// Bucket: a CPU-only shape lacks CPU.
pub const CPU_SHAPE_LACKS_CPU: usize = 5;
/// Bucket: no GPU of the node has an allowed model.
pub const NO_ACCESS: usize = 6;

/// What a node's GPUs offer one GPU shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShapeFit {
    /// Some GPU of the node has a model the shape allows.
    pub access: bool,
    /// Allowed GPUs with `l ≥ m_t`.
    pub count: u32,
    /// Their free milli-GPU.
    pub sum: u64,
}

/// What a node has free besides GPUs: CPU (milli-cores) and memory (MiB). FGD counts CPU
/// only, which a room built from a CPU amount (`Room::from(cpu)`) expresses: memory then
/// never lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    /// Free CPU, milli-cores.
    pub cpu: i64,
    /// Free memory, MiB.
    pub memory: i64,
}

impl Room {
    /// The room left after taking `cpu` and `memory`.
    pub fn minus(self, cpu: i64, memory: i64) -> Self {
        Self {
            cpu: self.cpu - cpu,
            memory: self.memory - memory,
        }
    }
}

impl From<i64> for Room {
    fn from(cpu: i64) -> Self {
        Self {
            cpu,
            memory: i64::MAX / 2,
        }
    }
}

impl From<u32> for Room {
    fn from(cpu: u32) -> Self {
        Self::from(i64::from(cpu))
    }
}

/// The summary of `gpus` for `shape` (unused for CPU-only shapes).
pub fn fit_of(shape: &ResolvedShape, gpus: &[GpuFree]) -> ShapeFit {
    let mut f = ShapeFit::default();
    for g in gpus.iter().filter(|g| shape.allows(g.model)) {
        f.access = true;
        if g.free >= shape.milli {
            f.count += 1;
            f.sum += u64::from(g.free);
        }
    }
    f
}

/// `fit` after GPUs of the listed `(model, old free, new free)` changed.
pub fn refit(shape: &ResolvedShape, fit: ShapeFit, changed: &[(u8, u32, u32)]) -> ShapeFit {
    let mut f = fit;
    if shape.cpu_only {
        return f;
    }
    for &(model, old, new) in changed {
        if !shape.allows(model) {
            continue;
        }
        if old >= shape.milli {
            f.count -= 1;
            f.sum -= u64::from(old);
        }
        if new >= shape.milli {
            f.count += 1;
            f.sum += u64::from(new);
        }
    }
    f
}

/// The bucket of `shape` on a node with free CPU and memory `room`, free milli-GPU
/// `total` and GPU summary `fit`, and its fragment `frag_t` (milli-GPU). For a satisfied
/// shape the fragment goes to [`LACK_GPU`] and `total − frag` to [`SATISFIED`]. A shape
/// whose memory does not fit counts as lacking CPU (FGD's shapes ask for no memory).
pub fn classify(
    shape: &ResolvedShape,
    room: impl Into<Room>,
    total: u64,
    fit: ShapeFit,
) -> (usize, u64) {
    let room = room.into();
    let cpu_ok = room.cpu >= shape.cpu && room.memory >= shape.memory;
    if shape.cpu_only {
        return (
            if cpu_ok {
                CPU_SHAPE_FITS
            } else {
                CPU_SHAPE_LACKS_CPU
            },
            total,
        );
    }
    if !fit.access {
        return (NO_ACCESS, total);
    }
    match (fit.count >= shape.gpus, cpu_ok) {
        (true, true) => (SATISFIED, total - fit.sum),
        (true, false) => (LACK_CPU, total),
        (false, true) => (LACK_GPU, total),
        (false, false) => (LACK_BOTH, total),
    }
}

/// `F` of a node state in floating point, in the authors' evaluation order.
pub fn fragmentation(
    shapes: &[ResolvedShape],
    room: impl Into<Room>,
    total: u64,
    fit: impl Fn(usize, &ResolvedShape) -> ShapeFit,
) -> f64 {
    let room = room.into();
    let mut b = [0.0f64; 7];
    for (t, s) in shapes.iter().enumerate() {
        let (bucket, frag) = classify(s, room, total, fit(t, s));
        if bucket == SATISFIED {
            b[LACK_GPU] += s.weight * frag as f64;
            b[SATISFIED] += s.weight * (total - frag) as f64;
        } else {
            b[bucket] += s.weight * frag as f64;
        }
    }
    0.0 + b[LACK_BOTH]
        + b[LACK_GPU]
        + b[LACK_CPU]
        + b[CPU_SHAPE_FITS]
        + b[CPU_SHAPE_LACKS_CPU]
        + b[NO_ACCESS]
}

/// `F` exactly, scaled by the sum of kept counts: `Σ count_t·frag_t`.
pub fn fragmentation_exact(
    shapes: &[ResolvedShape],
    room: impl Into<Room>,
    total: u64,
    fit: impl Fn(usize, &ResolvedShape) -> ShapeFit,
) -> i128 {
    let room = room.into();
    shapes
        .iter()
        .enumerate()
        .map(|(t, s)| {
            let (_, frag) = classify(s, room, total, fit(t, s));
            i128::from(s.count) * i128::from(frag)
        })
        .sum()
}

/// The FGD score from `F` before and after: `trunc(100·sigmoid(−ΔF/1000))`.
pub fn gradient_score(f_before: f64, f_after: f64) -> i64 {
    (100.0 * sigmoid((f_before - f_after) / 1000.0)) as i64
}

/// The score of the policies that compare gradients exactly: `−ΔF` in thousandths of a
/// milli-GPU, rounded (larger is better, like [`gradient_score`], without its truncation to
/// 101 levels).
pub fn fine_score(f_before: f64, f_after: f64) -> i64 {
    ((f_before - f_after) * 1000.0).round() as i64
}

/// The same score from an exact `ΔF` scaled by `cum` (the sum of kept counts).
pub fn exact_gradient_score(delta_scaled: i128, cum: u64) -> i64 {
    if delta_scaled == 0 {
        return 50;
    }
    let delta = delta_scaled as f64 / cum as f64;
    (100.0 * sigmoid(-delta / 1000.0)) as i64
}

/// `1 / (1 + e^(−x))`.
pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + exp(-x))
}

/// ln 2 split into a high part with trailing zero bits (so `k·LN2_HI` is exact for
/// the `k` used here) and the rest.
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
/// 1/k! for k = 13 down to 0.
const INV_FACT: [f64; 14] = [
    1.0 / 6_227_020_800.0,
    1.0 / 479_001_600.0,
    1.0 / 39_916_800.0,
    1.0 / 3_628_800.0,
    1.0 / 362_880.0,
    1.0 / 40_320.0,
    1.0 / 5_040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    1.0 / 2.0,
    1.0,
    1.0,
];

/// `e^x` from basic IEEE operations: `x = k·ln2 + r` (Cody–Waite split), a degree-13
/// Taylor polynomial for `e^r` (`|r| ≤ ln2/2`), scaled by `2^k`. Within a few ulp of
/// the correctly rounded value; `exp(0) = 1` exactly.
pub fn exp(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x > 709.0 {
        return f64::INFINITY;
    }
    if x < -708.0 {
        return 0.0;
    }
    let k = (x * std::f64::consts::LOG2_E + 0.5).floor();
    let r = (x - k * LN2_HI) - k * LN2_LO;
    let p = INV_FACT.iter().fold(0.0, |acc, c| acc * r + c);
    // k is in -1022..=1023 here, so 2^k is a normal number.
    let two_k = f64::from_bits(((k as i64 + 1023) as u64) << 52);
    p * two_k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_matches_std_within_a_few_ulp() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(sigmoid(0.0), 0.5);
        assert_eq!(gradient_score(123.25, 123.25), 50);
        let mut x = -700.0;
        while x < 700.0 {
            let (a, b) = (exp(x), x.exp());
            assert!(((a - b) / b).abs() < 1e-15, "x={x} {a} {b}");
            x += 0.137;
        }
        for x in [1e-16, -1e-16, 1e-13, -1e-13, 1e-9, 0.3465, -0.3466, 1.0] {
            let (a, b) = (exp(x), x.exp());
            assert!(((a - b) / b).abs() < 1e-15, "x={x} {a} {b}");
        }
        assert_eq!(exp(800.0), f64::INFINITY);
        assert_eq!(exp(-800.0), 0.0);
        assert!(exp(f64::NAN).is_nan());
    }

    #[test]
    fn tiny_gradients_round_like_the_authors() {
        // A tiny positive ΔF (float noise) gives 49, a tiny negative one 50.
        assert_eq!(gradient_score(1000.0, 1000.0 + 1e-10), 49);
        assert_eq!(gradient_score(1000.0 + 1e-10, 1000.0), 50);
        assert_eq!(gradient_score(0.0, 1e9), 0);
        assert_eq!(gradient_score(1e9, 0.0), 100);
        // ΔF = +1000 → 100·sigmoid(−1) = 26.89 → 26; ΔF = −1000 → 73.
        assert_eq!(gradient_score(0.0, 1000.0), 26);
        assert_eq!(gradient_score(1000.0, 0.0), 73);
        assert_eq!(exact_gradient_score(0, 7), 50);
        assert_eq!(exact_gradient_score(7000, 7), 26);
    }
}
