//! Line and step charts: several named series over a shared numeric x axis (linear or
//! log) and y axis, for curves such as GPU allocation against arrived workload,
//! allocation over time, or wait-time CDFs (as steps).
//!
//! Owns: [`LineChart`] and [`Series`], fitting the axes to the data, turning points
//! into pixel polylines (steps, downsampling of long series, markers on short ones).
//! Does not own: titles, legend and axes drawing (`frame`), tick choice (`axis`,
//! `num`) or CDF computation (`data`).

use crate::axis::{Axis, Fit};
use crate::data::thin_by_column;
use crate::frame::{self, LegendEntry, Plot, Swatch};
use crate::svg::{Svg, series_color, series_dash};
use crate::{DEFAULT_HEIGHT, DEFAULT_WIDTH, fmt_num};

/// Series with more pixel points than this are reduced to first/min/max/last per
/// pixel column before drawing.
const DOWNSAMPLE_ABOVE: usize = 2000;
/// Series with at most this many points get a marker on each point.
const MARKERS_UP_TO: usize = 30;

/// One named series of `(x, y)` points, drawn in the given order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    /// Name shown in the legend.
    pub name: String,
    /// Points; NaN or infinite coordinates are skipped.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// A series named `name` through `points`.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points,
        }
    }
}

/// A chart of one or more series as lines (or steps) over numeric axes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LineChart {
    /// Title above the chart.
    pub title: String,
    /// Label under the x axis (say what the unit is: "hours", "% of capacity").
    pub x_label: String,
    /// Label beside the y axis.
    pub y_label: String,
    /// The series, coloured in order from the palette.
    pub series: Vec<Series>,
    /// Fixed x range; `None` fits the data exactly.
    pub x_range: Option<(f64, f64)>,
    /// Fixed y range; `None` fits the data, widened to round ticks and to include 0.
    pub y_range: Option<(f64, f64)>,
    /// Draw each series as a step function: the value of a point holds until the next
    /// point's x (right for CDFs and for values sampled at changes).
    pub step: bool,
    /// Logarithmic x axis (for values spanning decades, such as wait times). Points
    /// with x <= 0 are drawn at the left edge, so a CDF still shows the share of zeros.
    pub x_log: bool,
}

impl LineChart {
    /// An empty chart with the given title and axis labels (add series, ranges and
    /// options by setting the public fields).
    pub fn new(
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
    ) -> LineChart {
        LineChart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            ..LineChart::default()
        }
    }

    /// The chart as a standalone SVG document of the default size (800×450, scalable).
    pub fn to_svg(&self) -> String {
        self.to_svg_sized(DEFAULT_WIDTH, DEFAULT_HEIGHT)
    }

    /// The chart as a standalone SVG document of `width`×`height` pixels (at least
    /// 240×160).
    pub fn to_svg_sized(&self, width: u32, height: u32) -> String {
        let (w, h) = (f64::from(width.max(240)), f64::from(height.max(160)));
        let clean: Vec<Vec<(f64, f64)>> = self
            .series
            .iter()
            .map(|s| {
                s.points
                    .iter()
                    .copied()
                    .filter(|(x, y)| x.is_finite() && y.is_finite())
                    .collect()
            })
            .collect();
        let (x_axis, y_axis) = self.axes(&clean, frame::x_ticks_for(w), frame::y_ticks_for(h));

        let legend: Vec<LegendEntry> = self
            .series
            .iter()
            .zip(&clean)
            .enumerate()
            .map(|(i, (s, pts))| LegendEntry {
                label: if pts.is_empty() {
                    format!("{} (no data)", s.name)
                } else {
                    s.name.clone()
                },
                color: series_color(i),
                swatch: Swatch::Line(series_dash(i)),
            })
            .collect();

        let mut svg = Svg::new(w, h, &self.title);
        let top = frame::header(&mut svg, w, h, &self.title, &legend);
        let left = frame::left_margin(&y_axis, &self.y_label);
        let plot = Plot {
            left,
            top,
            right: w - frame::right_margin(Some(&x_axis)),
            bottom: (h - frame::bottom_margin(&self.x_label)).max(top + 20.0),
        };
        frame::y_axis(&mut svg, &plot, &y_axis, &self.y_label);
        frame::x_axis(&mut svg, &plot, &x_axis, &self.x_label, h);

        svg.open_clip(
            plot.left - 4.0,
            plot.top - 4.0,
            plot.width() + 8.0,
            plot.bottom - plot.top + 8.0,
        );
        for (i, (s, pts)) in self.series.iter().zip(&clean).enumerate() {
            self.draw_series(&mut svg, &plot, (&x_axis, &y_axis), i, &s.name, pts);
        }
        svg.close_clip();
        frame::axis_lines(&mut svg, &plot);
        if clean.iter().all(Vec::is_empty) {
            frame::no_data(&mut svg, &plot);
        }
        svg.finish()
    }

    /// The x and y axes fitted to the finite points (and the fixed ranges), with at
    /// most `x_ticks` and `y_ticks` ticks.
    fn axes(&self, clean: &[Vec<(f64, f64)>], x_ticks: usize, y_ticks: usize) -> (Axis, Axis) {
        let all = || clean.iter().flatten();
        let extent = |vals: &mut dyn Iterator<Item = f64>| {
            vals.fold(None, |acc: Option<(f64, f64)>, v| match acc {
                None => Some((v, v)),
                Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
            })
        };
        let x_axis = if self.x_log {
            let positive = extent(&mut all().map(|p| p.0).filter(|&x| x > 0.0));
            Axis::log(positive, self.x_range, x_ticks)
        } else {
            Axis::linear(
                extent(&mut all().map(|p| p.0)),
                self.x_range,
                Fit::Tight,
                x_ticks,
            )
        };
        let y_axis = Axis::linear(
            extent(&mut all().map(|p| p.1)),
            self.y_range,
            Fit::NiceWithZero,
            y_ticks,
        );
        (x_axis, y_axis)
    }

    fn draw_series(
        &self,
        svg: &mut Svg,
        plot: &Plot,
        axes: (&Axis, &Axis),
        i: usize,
        name: &str,
        pts: &[(f64, f64)],
    ) {
        let (x_axis, y_axis) = axes;
        let mapped: Vec<(f64, f64)> = pts
            .iter()
            .map(|&(x, y)| (plot.x(x_axis, x), plot.y(y_axis, y)))
            .collect();
        let mut line = if self.step {
            steps(&mapped)
        } else {
            mapped.clone()
        };
        if line.len() > DOWNSAMPLE_ABOVE {
            line = thin_by_column(&line, |px| px.floor() as i64);
        }
        let color = series_color(i);
        let tooltip = match (pts.first(), pts.last()) {
            (Some(a), Some(b)) if pts.len() > 1 => {
                format!(
                    "{name}: {} points, x {} to {}",
                    pts.len(),
                    fmt_num(a.0),
                    fmt_num(b.0)
                )
            }
            _ => name.to_string(),
        };
        if line.len() > 1 {
            svg.polyline(&line, color, series_dash(i), Some(&tooltip));
        }
        if mapped.len() == 1 || (!self.step && mapped.len() <= MARKERS_UP_TO) {
            for &(x, y) in &mapped {
                svg.circle(x, y, 3.0, color);
            }
        }
    }
}

/// Step expansion in pixel space: each point's y holds until the next point's x.
fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    for (j, &p) in points.iter().enumerate() {
        if j > 0 {
            out.push((p.0, points[j - 1].1));
        }
        out.push(p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_hold_value_until_next_x() {
        assert_eq!(
            steps(&[(0.0, 1.0), (2.0, 3.0), (5.0, 4.0)]),
            [(0.0, 1.0), (2.0, 1.0), (2.0, 3.0), (5.0, 3.0), (5.0, 4.0)]
        );
        assert!(steps(&[]).is_empty());
    }

    #[test]
    fn long_series_is_thinned_in_the_svg() {
        let pts: Vec<(f64, f64)> = (0..200_000)
            .map(|i| (i as f64, ((i * 7919) % 1000) as f64))
            .collect();
        let mut chart = LineChart::new("t", "x", "y");
        chart.series.push(Series::new("noisy", pts));
        let svg = chart.to_svg();
        let line = svg
            .lines()
            .find(|l| l.contains("<title>noisy:"))
            .unwrap_or_default();
        let coords = line.split("points=\"").nth(1).map_or(0, |s| {
            s.split('"').next().map_or(0, |p| p.split(' ').count())
        });
        assert!(coords > 100 && coords <= 4 * 800, "{coords} coordinates");
        assert!(!svg.contains("<circle"));
    }
}
