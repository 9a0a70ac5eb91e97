//! Numbers as a person reads them: noise-free formatting, compact tick labels and
//! "nice" tick selection (steps of 1, 2, 2.5 or 5 times a power of ten, or decades on
//! a log axis).
//!
//! Owns: every number-to-text conversion and every choice of tick values. Does not
//! own: where ticks are drawn (`axis`, `frame`) or XML escaping (`svg`).

/// Significant digits kept by [`fmt_num`].
const SIG_DIGITS: i32 = 6;

/// Formats a number without floating-point noise: integers print as integers, other
/// values with at most six significant digits and no trailing zeros, very large or
/// very small magnitudes in exponent form. `0.1 + 0.2` prints as `0.3`, `-0.0` as `0`.
pub fn fmt_num(v: f64) -> String {
    if v.is_nan() {
        return "NaN".to_string();
    }
    if v.is_infinite() {
        return if v > 0.0 { "∞" } else { "-∞" }.to_string();
    }
    if v == 0.0 {
        return "0".to_string();
    }
    let mag = v.abs().log10().floor() as i32;
    if !(-5..15).contains(&mag) {
        let s = format!("{:.*e}", (SIG_DIGITS - 1) as usize, v);
        return match s.split_once('e') {
            Some((mantissa, exp)) => format!("{}e{exp}", trim_zeros(mantissa)),
            None => s,
        };
    }
    let decimals = (SIG_DIGITS - 1 - mag).clamp(0, 20) as usize;
    let s = trim_zeros(&format!("{v:.decimals$}"));
    if s == "-0" { "0".to_string() } else { s }
}

/// Formats a number with three significant digits and a k/M/G/T suffix from a
/// thousand up: `1234.5` → `1.23k`, `0.4567` → `0.457`. Used for labels on bars.
pub(crate) fn fmt_short(v: f64) -> String {
    if !v.is_finite() || v == 0.0 {
        return fmt_num(v);
    }
    let (scaled, suffix) = with_suffix(v);
    let mag = scaled.abs().log10().floor() as i32;
    let decimals = (2 - mag).clamp(0, 12) as usize;
    let s = trim_zeros(&format!("{scaled:.decimals$}"));
    if s == "1000" && !suffix.is_empty() {
        // 999_950 rounds up to "1000k"; say "1M" instead.
        return fmt_short(v.signum() * 1000.0 * unit_of(suffix));
    }
    format!("{s}{suffix}")
}

/// Labels for one axis' ticks. When the largest tick reaches ten thousand every label
/// from a thousand up gets a k/M/G/T suffix (`5k`, `10k`, `1.5M`), so an axis reads
/// consistently; otherwise labels are plain [`fmt_num`] output.
pub(crate) fn tick_labels(ticks: &[f64]) -> Vec<String> {
    let largest = ticks.iter().fold(0.0f64, |m, t| m.max(t.abs()));
    ticks
        .iter()
        .map(|&t| {
            if largest >= 1e4 && t.abs() >= 1e3 {
                let (scaled, suffix) = with_suffix(t);
                format!("{}{suffix}", fmt_num(scaled))
            } else {
                fmt_num(t)
            }
        })
        .collect()
}

fn with_suffix(v: f64) -> (f64, &'static str) {
    for (unit, suffix) in [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")] {
        if v.abs() >= unit {
            return (v / unit, suffix);
        }
    }
    (v, "")
}

fn unit_of(suffix: &str) -> f64 {
    match suffix {
        "T" => 1e12,
        "G" => 1e9,
        "M" => 1e6,
        "k" => 1e3,
        _ => 1.0,
    }
}

fn trim_zeros(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

/// Tick values chosen by [`nice_ticks`].
#[derive(Debug, Clone, PartialEq)]
pub struct NiceTicks {
    /// Lower end of the axis: the data's lower end rounded down to a whole step.
    pub lo: f64,
    /// Upper end of the axis: the data's upper end rounded up to a whole step.
    pub hi: f64,
    /// Distance between ticks: 1, 2, 2.5 or 5 times a power of ten.
    pub step: f64,
    /// Tick values from `lo` to `hi`, both included.
    pub ticks: Vec<f64>,
}

/// Chooses round tick values covering `lo..=hi` with at most `max_ticks` ticks
/// (at least 2): `nice_ticks(0.0, 130.0, 8)` gives 0, 20, …, 140. The ends are
/// swapped if reversed; an empty or non-finite range is widened to something drawable.
pub fn nice_ticks(lo: f64, hi: f64, max_ticks: usize) -> NiceTicks {
    let (lo, hi) = sane_range(lo, hi);
    let step = nice_step(lo, hi, max_ticks);
    let first = (lo / step + 1e-9).floor();
    let last = (hi / step - 1e-9).ceil();
    let ticks = (0..=(last - first) as i64)
        .map(|k| clean((first + k as f64) * step, step))
        .collect();
    NiceTicks {
        lo: clean(first * step, step),
        hi: clean(last * step, step),
        step,
        ticks,
    }
}

/// Round tick values lying inside `lo..=hi` (the axis keeps its exact ends).
pub(crate) fn ticks_within(lo: f64, hi: f64, max_ticks: usize) -> Vec<f64> {
    let (lo, hi) = sane_range(lo, hi);
    let step = nice_step(lo, hi, max_ticks);
    let first = (lo / step - 1e-9).ceil();
    let last = (hi / step + 1e-9).floor();
    if last < first {
        return vec![lo, hi];
    }
    (0..=(last - first) as i64)
        .map(|k| clean((first + k as f64) * step, step))
        .collect()
}

/// The smallest step of the form {1, 2, 2.5, 5} × 10^k giving at most
/// `max_ticks - 1` intervals once the range is widened to whole steps.
fn nice_step(lo: f64, hi: f64, max_ticks: usize) -> f64 {
    let intervals = max_ticks.max(2) as f64 - 1.0;
    let raw = (hi - lo) / intervals;
    let mut mag = 10f64.powi(raw.log10().floor() as i32);
    loop {
        for m in [1.0, 2.0, 2.5, 5.0] {
            let step = m * mag;
            let n = (hi / step - 1e-9).ceil() - (lo / step + 1e-9).floor();
            if n <= intervals {
                return step;
            }
        }
        mag *= 10.0;
    }
}

/// Snaps values within a millionth of a step of zero to exactly zero (no `-0`, no
/// `1e-17` next to ticks that should read 0).
fn clean(v: f64, step: f64) -> f64 {
    if v.abs() < step * 1e-6 { 0.0 } else { v }
}

fn sane_range(lo: f64, hi: f64) -> (f64, f64) {
    let (lo, hi) = match (lo.is_finite(), hi.is_finite()) {
        (true, true) => (lo.min(hi), lo.max(hi)),
        (true, false) => (lo, lo),
        (false, true) => (hi, hi),
        (false, false) => (0.0, 1.0),
    };
    if hi - lo > hi.abs().max(lo.abs()) * 1e-12 {
        (lo, hi)
    } else if lo == 0.0 {
        (0.0, 1.0)
    } else {
        let pad = lo.abs() * 0.1;
        (lo - pad, hi + pad)
    }
}

/// Decade ticks for a log axis over `lo..=hi` (both > 0): powers of ten, every
/// second or third one when the range spans many decades, at most `max_ticks`.
/// Returns the ticks inside the range; fewer than two means the caller should fall
/// back to linear ticks.
pub(crate) fn log_ticks(lo: f64, hi: f64, max_ticks: usize) -> Vec<f64> {
    let e0 = (lo.log10() - 1e-9).ceil() as i32;
    let e1 = (hi.log10() + 1e-9).floor() as i32;
    if e1 < e0 {
        return Vec::new();
    }
    let decades = (e1 - e0) as usize;
    let stride = decades.div_ceil(max_ticks.max(2) - 1).max(1);
    (e0..=e1).step_by(stride).map(|e| 10f64.powi(e)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_without_noise() {
        assert_eq!(fmt_num(0.1 + 0.2), "0.3");
        assert_eq!(fmt_num(3.0 * 0.1), "0.3");
        assert_eq!(fmt_num(-0.0), "0");
        assert_eq!(fmt_num(140.0), "140");
        assert_eq!(fmt_num(1.0 / 3.0), "0.333333");
        assert_eq!(fmt_num(-2.5), "-2.5");
        assert_eq!(fmt_num(123456789.0), "123456789");
        assert_eq!(fmt_num(1.5e20), "1.5e20");
        assert_eq!(fmt_num(2e-7), "2e-7");
        assert_eq!(fmt_num(0.00012), "0.00012");
        assert_eq!(fmt_num(f64::NAN), "NaN");
    }

    #[test]
    fn short_and_tick_labels() {
        assert_eq!(fmt_short(1234.5), "1.23k");
        assert_eq!(fmt_short(0.4567), "0.457");
        assert_eq!(fmt_short(999_950.0), "1M");
        assert_eq!(fmt_short(42.0), "42");
        assert_eq!(
            tick_labels(&[0.0, 5000.0, 10000.0, 15000.0]),
            ["0", "5k", "10k", "15k"]
        );
        assert_eq!(tick_labels(&[0.0, 2000.0, 4000.0]), ["0", "2000", "4000"]);
        assert_eq!(tick_labels(&[1e5, 1e6]), ["100k", "1M"]);
    }

    #[test]
    fn ticks_are_nice() {
        let t = nice_ticks(0.0, 130.0, 8);
        assert_eq!(t.ticks, [0.0, 20.0, 40.0, 60.0, 80.0, 100.0, 120.0, 140.0]);
        assert_eq!((t.lo, t.hi, t.step), (0.0, 140.0, 20.0));
        let t = nice_ticks(0.0, 1.0, 8);
        let labels: Vec<String> = t.ticks.iter().map(|&v| fmt_num(v)).collect();
        assert_eq!(labels, ["0", "0.2", "0.4", "0.6", "0.8", "1"]);
        let t = nice_ticks(-3.7, 12.2, 6);
        assert_eq!(t.ticks, [-5.0, 0.0, 5.0, 10.0, 15.0]);
        let t = nice_ticks(0.0, 72.0, 8);
        assert_eq!((t.step, t.hi), (20.0, 80.0));
        let t = nice_ticks(0.0, 72.0, 9);
        assert_eq!((t.step, t.hi), (10.0, 80.0));
        for (lo, hi) in [
            (0.0, 0.013),
            (1e9, 3.7e9),
            (-1e-3, 0.0),
            (5.0, 5.0),
            (1.0, f64::NAN),
        ] {
            let t = nice_ticks(lo, hi, 7);
            assert!(
                t.ticks.len() >= 2 && t.ticks.len() <= 7,
                "{lo}..{hi}: {t:?}"
            );
            assert!(t.lo <= lo.min(hi) || !hi.is_finite());
            let m = t.step / 10f64.powi(t.step.log10().floor() as i32);
            assert!(
                [1.0, 2.0, 2.5, 5.0].iter().any(|c| (c - m).abs() < 1e-9),
                "{t:?}"
            );
        }
    }

    #[test]
    fn ticks_within_keep_the_ends() {
        assert_eq!(
            ticks_within(0.0, 130.0, 8),
            [0.0, 20.0, 40.0, 60.0, 80.0, 100.0, 120.0]
        );
        assert_eq!(ticks_within(0.5, 3.5, 6), [1.0, 2.0, 3.0]);
    }

    #[test]
    fn decades() {
        assert_eq!(log_ticks(1.0, 1000.0, 8), [1.0, 10.0, 100.0, 1000.0]);
        assert_eq!(log_ticks(0.1, 1e8, 6).len(), 5);
        assert!(log_ticks(2.0, 8.0, 8).is_empty());
    }
}
