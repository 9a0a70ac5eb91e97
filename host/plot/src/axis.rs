//! One numeric chart axis: the range shown, whether it is logarithmic, its ticks and
//! their labels, and the mapping from a data value to a fraction of the axis length.
//!
//! Owns: choosing an axis range from data or from an explicit range, and the
//! value→position transform. Does not own: tick value selection or number formatting
//! (`num`), or drawing (`frame`).

use crate::num::{log_ticks, nice_ticks, tick_labels, ticks_within};

/// Most ticks on any axis.
const MAX_TICKS: usize = 9;
/// Fewest ticks an axis aims for, however short.
const MIN_TICKS: usize = 3;

/// How many ticks at most suit an axis about `length` pixels long with ticks at
/// least `spacing` pixels apart.
pub(crate) fn tick_budget(length: f64, spacing: f64) -> usize {
    ((length / spacing).floor().max(0.0) as usize).clamp(MIN_TICKS, MAX_TICKS)
}

/// A numeric axis ready to draw.
#[derive(Debug, Clone)]
pub(crate) struct Axis {
    /// Value at the start (left or bottom) of the axis.
    pub lo: f64,
    /// Value at the end (right or top) of the axis.
    pub hi: f64,
    /// Whether positions are proportional to `log10(value)`.
    pub log: bool,
    /// Tick values, all within `lo..=hi`.
    pub ticks: Vec<f64>,
    /// One label per tick.
    pub labels: Vec<String>,
}

/// How an automatic range is fitted to the data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Fit {
    /// Ends at the data's extremes; ticks lie inside.
    Tight,
    /// Ends rounded out to whole tick steps, zero included when all data are >= 0
    /// (or all <= 0).
    NiceWithZero,
}

impl Axis {
    /// A linear axis with at most `max_ticks` ticks. `explicit` wins when it is finite
    /// and non-empty (ends sorted); otherwise the range comes from `data` (min, max)
    /// fitted by `fit`, or 0–1 without data.
    pub fn linear(
        data: Option<(f64, f64)>,
        explicit: Option<(f64, f64)>,
        fit: Fit,
        max_ticks: usize,
    ) -> Axis {
        if let Some((lo, hi)) = valid_range(explicit, false) {
            return Axis::with_ticks(lo, hi, false, ticks_within(lo, hi, max_ticks));
        }
        let Some((mut lo, mut hi)) = data else {
            return Axis::linear(None, Some((0.0, 1.0)), fit, max_ticks);
        };
        match fit {
            Fit::Tight if hi > lo => {
                Axis::with_ticks(lo, hi, false, ticks_within(lo, hi, max_ticks))
            }
            _ => {
                if fit == Fit::NiceWithZero {
                    if lo >= 0.0 {
                        lo = 0.0;
                    } else if hi <= 0.0 {
                        hi = 0.0;
                    }
                }
                let t = nice_ticks(lo, hi, max_ticks);
                Axis::with_ticks(t.lo, t.hi, false, t.ticks)
            }
        }
    }

    /// A log10 axis with at most `max_ticks` labelled ticks. `explicit` wins when both ends are finite and its upper end is
    /// positive (a lower end <= 0 is replaced by the data's smallest positive value or
    /// a thousandth of the upper end). Otherwise the range is the data's positive
    /// extent (`data_pos`: smallest positive value, largest value) widened to whole
    /// decades, or 1–10 without data.
    pub fn log(
        data_pos: Option<(f64, f64)>,
        explicit: Option<(f64, f64)>,
        max_ticks: usize,
    ) -> Axis {
        let range = match valid_range(explicit, true) {
            Some((lo, hi)) => Some((lo, hi)),
            None => valid_range(explicit, false)
                .filter(|&(_, hi)| hi > 0.0)
                .map(|(_, hi)| {
                    let lo = data_pos
                        .map(|d| d.0)
                        .filter(|&d| d < hi)
                        .unwrap_or(hi / 1000.0);
                    (lo.min(hi / 10.0), hi)
                }),
        };
        let (lo, hi) = match range {
            Some(r) => r,
            None => {
                let (dlo, dhi) = data_pos.unwrap_or((1.0, 10.0));
                let lo = 10f64.powi(dlo.log10().floor() as i32);
                let mut hi = 10f64.powi(dhi.log10().ceil() as i32);
                if hi <= lo {
                    hi = lo * 10.0;
                }
                (lo, hi)
            }
        };
        let decades = log_ticks(lo, hi, max_ticks);
        let ticks = if decades.len() >= 2 {
            decades
        } else {
            ticks_within(lo, hi, max_ticks)
                .into_iter()
                .filter(|&t| t > 0.0)
                .collect()
        };
        Axis::with_ticks(lo, hi, true, ticks)
    }

    fn with_ticks(lo: f64, hi: f64, log: bool, ticks: Vec<f64>) -> Axis {
        let labels = tick_labels(&ticks);
        Axis {
            lo,
            hi,
            log,
            ticks,
            labels,
        }
    }

    /// Position of `v` along the axis: 0 at `lo`, 1 at `hi`, outside for values
    /// outside the range. On a log axis values <= 0 sit at the start (0).
    pub fn frac(&self, v: f64) -> f64 {
        if self.log {
            if v <= 0.0 {
                return 0.0;
            }
            let (a, b) = (self.lo.log10(), self.hi.log10());
            (v.log10() - a) / (b - a)
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }
}

/// An explicit range usable as is: finite, non-empty, ends sorted; with
/// `positive`, both ends > 0.
fn valid_range(r: Option<(f64, f64)>, positive: bool) -> Option<(f64, f64)> {
    let (a, b) = r?;
    let (lo, hi) = (a.min(b), a.max(b));
    let ok = lo.is_finite() && hi.is_finite() && hi > lo && (!positive || lo > 0.0);
    ok.then_some((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_range_is_kept() {
        let a = Axis::linear(Some((3.0, 90.0)), Some((0.0, 130.0)), Fit::NiceWithZero, 9);
        assert_eq!((a.lo, a.hi), (0.0, 130.0));
        assert_eq!(a.ticks.last(), Some(&120.0));
        assert_eq!(a.frac(65.0), 0.5);
        let reversed = Axis::linear(None, Some((1.0, 0.0)), Fit::Tight, 9);
        assert_eq!((reversed.lo, reversed.hi), (0.0, 1.0));
        let bad = Axis::linear(Some((2.0, 4.0)), Some((f64::NAN, 1.0)), Fit::Tight, 9);
        assert_eq!((bad.lo, bad.hi), (2.0, 4.0));
    }

    #[test]
    fn auto_ranges() {
        let a = Axis::linear(Some((12.0, 97.0)), None, Fit::NiceWithZero, 9);
        assert_eq!((a.lo, a.hi), (0.0, 100.0));
        let a = Axis::linear(Some((0.5, 71.5)), None, Fit::Tight, 9);
        assert_eq!((a.lo, a.hi), (0.5, 71.5));
        assert_eq!(a.ticks.first(), Some(&10.0));
        let a = Axis::linear(Some((5.0, 5.0)), None, Fit::Tight, 9);
        assert!(a.hi > a.lo);
        let a = Axis::linear(None, None, Fit::Tight, 9);
        assert_eq!((a.lo, a.hi), (0.0, 1.0));
    }

    #[test]
    fn budget_follows_length() {
        assert_eq!(tick_budget(300.0, 35.0), 8);
        assert_eq!(tick_budget(50.0, 35.0), 3);
        assert_eq!(tick_budget(5000.0, 35.0), 9);
        assert_eq!(tick_budget(-10.0, 35.0), 3);
    }

    #[test]
    fn log_axis() {
        let a = Axis::log(Some((3.0, 86_400.0)), None, 9);
        assert_eq!((a.lo, a.hi), (1.0, 100_000.0));
        assert_eq!(a.labels, ["1", "10", "100", "1k", "10k", "100k"]);
        assert!((a.frac(100.0) - 0.4).abs() < 1e-12);
        assert_eq!(a.frac(0.0), 0.0);
        let a = Axis::log(Some((2.0, 8.0)), Some((2.0, 8.0)), 9);
        assert!(a.ticks.len() >= 2 && a.ticks.iter().all(|&t| (2.0..=8.0).contains(&t)));
        let a = Axis::log(None, Some((0.0, 100.0)), 9);
        assert!(a.lo > 0.0 && a.hi == 100.0);
    }
}
