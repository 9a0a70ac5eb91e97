//! Turning raw numbers into points worth drawing: the empirical CDF of a sample, and
//! downsampling of long series that keeps every peak and trough.
//!
//! Owns: which points survive. Does not own: where they are drawn (`line`) or any
//! SVG text.

/// Most points [`cdf`] returns.
pub const CDF_MAX_POINTS: usize = 500;

/// The empirical CDF of `values`: points `(x, fraction of values <= x)` in increasing
/// `x`, starting with `(smallest, 0)` and ending at `(largest, 1)`, meant to be drawn
/// as a step chart. NaN and infinite values are ignored; an input with none left gives
/// no points. Repeated values become one point. Inputs with more than
/// [`CDF_MAX_POINTS`] distinct values are thinned so that between two kept points the
/// fraction rises by at most 1/498 (invisible at chart size), the first and last point
/// always kept.
pub fn cdf(values: &[f64]) -> Vec<(f64, f64)> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return Vec::new();
    }
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len() as f64;
    let mut distinct: Vec<(f64, f64)> = Vec::new();
    for (i, &x) in sorted.iter().enumerate() {
        let y = (i + 1) as f64 / n;
        match distinct.last_mut() {
            Some(last) if last.0 == x => last.1 = y,
            _ => distinct.push((x, y)),
        }
    }
    // The fraction of the largest value is n/n, exactly 1.
    let mut out = Vec::with_capacity(distinct.len().min(CDF_MAX_POINTS) + 1);
    out.push((sorted[0], 0.0));
    if distinct.len() < CDF_MAX_POINTS {
        out.extend(distinct);
        return out;
    }
    let min_rise = 1.0 / (CDF_MAX_POINTS - 2) as f64;
    let last = distinct.len() - 1;
    let mut kept_y = 0.0;
    for (i, &(x, y)) in distinct.iter().enumerate() {
        if i == last || y - kept_y >= min_rise {
            out.push((x, y));
            kept_y = y;
        }
    }
    out
}

/// Downsamples a series to about `max_points` points while keeping its shape: the x
/// range is cut into `max_points / 4` equal columns and each run of consecutive points
/// in one column is reduced to its first, lowest, highest and last point (in their
/// original order), so peaks and troughs survive. NaN and infinite points are dropped.
/// A series already short enough is returned unchanged (less non-finite points). The
/// bound holds for series ordered by x (such as values over time); an unordered series
/// may keep more points, never more than it had.
pub fn downsample(points: &[(f64, f64)], max_points: usize) -> Vec<(f64, f64)> {
    let finite: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    if finite.len() <= max_points.max(4) {
        return finite;
    }
    let (lo, hi) = finite
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
            (lo.min(p.0), hi.max(p.0))
        });
    let columns = (max_points / 4).max(1) as f64;
    let width = (hi - lo).max(f64::MIN_POSITIVE);
    thin_by_column(&finite, |x| {
        (((x - lo) / width * columns) as i64).min(columns as i64 - 1)
    })
}

/// Reduces each run of consecutive points with the same `column(x)` to its first,
/// lowest, highest and last point, in their original order.
pub(crate) fn thin_by_column(
    points: &[(f64, f64)],
    column: impl Fn(f64) -> i64,
) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < points.len() {
        let key = column(points[start].0);
        let mut end = start + 1;
        while end < points.len() && column(points[end].0) == key {
            end += 1;
        }
        let run = &points[start..end];
        let (mut lo_i, mut hi_i) = (0, 0);
        for (i, p) in run.iter().enumerate() {
            if p.1 < run[lo_i].1 {
                lo_i = i;
            }
            if p.1 > run[hi_i].1 {
                hi_i = i;
            }
        }
        let mut keep = [0, lo_i, hi_i, run.len() - 1];
        keep.sort_unstable();
        for (j, &i) in keep.iter().enumerate() {
            if j == 0 || keep[j - 1] != i {
                out.push(run[i]);
            }
        }
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_small() {
        let c = cdf(&[3.0, 1.0, f64::NAN, 2.0, 2.0, f64::INFINITY]);
        assert_eq!(c, [(1.0, 0.0), (1.0, 0.25), (2.0, 0.75), (3.0, 1.0)]);
        assert!(cdf(&[]).is_empty());
        assert!(cdf(&[f64::NAN]).is_empty());
        assert_eq!(cdf(&[7.0]), [(7.0, 0.0), (7.0, 1.0)]);
    }

    #[test]
    fn cdf_large_is_thinned_monotonic_and_ends_at_one() {
        // A heavy-tailed sample: many zeros, then a spread over six decades.
        let values: Vec<f64> = (0..100_000)
            .map(|i| {
                if i % 3 == 0 {
                    0.0
                } else {
                    (i as f64 * 0.618).fract() * 1e6
                }
            })
            .collect();
        let c = cdf(&values);
        assert!(c.len() <= CDF_MAX_POINTS, "{} points", c.len());
        assert!(c.len() > CDF_MAX_POINTS / 2);
        assert_eq!(c.last().map(|p| p.1), Some(1.0));
        assert_eq!(c[0], (0.0, 0.0));
        assert!(c.windows(2).all(|w| w[1].0 >= w[0].0 && w[1].1 >= w[0].1));
        // Read as a step function, the thinned CDF stays within 1/498 of the exact one.
        let mut sorted: Vec<f64> = values.clone();
        sorted.sort_by(f64::total_cmp);
        for k in 0..1000 {
            let x = k as f64 * 1000.0 + 0.5;
            let exact = sorted.partition_point(|&v| v <= x) as f64 / sorted.len() as f64;
            let drawn = c
                .iter()
                .take_while(|p| p.0 <= x)
                .last()
                .map_or(0.0, |p| p.1);
            assert!(
                (exact - drawn).abs() <= 1.0 / 498.0 + 1e-12,
                "at {x}: {exact} vs {drawn}"
            );
        }
        let max = values.iter().copied().fold(f64::MIN, f64::max);
        assert_eq!(c.last().map(|p| p.0), Some(max));
        // The mass at zero (about a third) shows as one jump.
        let zeros = values.iter().filter(|&&v| v == 0.0).count() as f64 / values.len() as f64;
        assert!(zeros > 0.33 && c[1] == (0.0, zeros), "{:?}", &c[..3]);
    }

    #[test]
    fn downsample_bounds_and_keeps_extremes() {
        let mut pts: Vec<(f64, f64)> = (0..100_000)
            .map(|i| (i as f64, (i as f64 * 0.01).sin()))
            .collect();
        pts[77_777].1 = 42.0;
        pts[12_345].1 = -9.0;
        pts[500].1 = f64::NAN;
        let d = downsample(&pts, 1000);
        assert!(d.len() <= 1000, "{} points", d.len());
        assert!(d.contains(&(77_777.0, 42.0)) && d.contains(&(12_345.0, -9.0)));
        assert_eq!(d.first(), Some(&(0.0, 0.0)));
        assert_eq!(d.last(), pts.last());
        assert!(d.windows(2).all(|w| w[1].0 > w[0].0));
        let short = [(0.0, 1.0), (1.0, f64::NAN), (2.0, 3.0)];
        assert_eq!(downsample(&short, 1000), [(0.0, 1.0), (2.0, 3.0)]);
        assert!(downsample(&[], 10).is_empty());
    }
}
