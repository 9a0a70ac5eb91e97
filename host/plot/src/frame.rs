//! What every chart has around its data: title, legend, plot-area layout, gridlines,
//! tick labels, axis labels and the "no data" notice.
//!
//! Owns: margins and the placement of everything outside the plot area. Does not own:
//! drawing the data (`line`, `bar`), choosing ticks (`axis`, `num`) or SVG syntax
//! (`svg`).

use crate::axis::{Axis, tick_budget};
use crate::svg::{AXIS, Anchor, GRID, INK, Svg, TextStyle, text_width};

/// Outer padding on every side.
const PAD: f64 = 14.0;
/// Font size of the title.
const TITLE_SIZE: f64 = 17.0;
/// Font size of axis labels.
const LABEL_SIZE: f64 = 13.0;
/// Font size of tick labels and legend entries.
pub(crate) const TICK_SIZE: f64 = 12.0;
/// Height of one legend row.
const LEGEND_ROW: f64 = 20.0;

/// The rectangle data is drawn in, in pixels (y grows downwards).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plot {
    /// Left edge.
    pub left: f64,
    /// Top edge.
    pub top: f64,
    /// Right edge.
    pub right: f64,
    /// Bottom edge.
    pub bottom: f64,
}

impl Plot {
    /// Pixel x of data value `v` on `axis`.
    pub fn x(&self, axis: &Axis, v: f64) -> f64 {
        self.left + axis.frac(v) * (self.right - self.left)
    }

    /// Pixel y of data value `v` on `axis`.
    pub fn y(&self, axis: &Axis, v: f64) -> f64 {
        self.bottom - axis.frac(v) * (self.bottom - self.top)
    }

    /// Width in pixels.
    pub fn width(&self) -> f64 {
        self.right - self.left
    }
}

/// What a legend entry's sample looks like.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Swatch {
    /// A short line, dashed like the series.
    Line(Option<&'static str>),
    /// A filled square, like a bar.
    Block,
}

/// One legend entry.
#[derive(Debug, Clone)]
pub(crate) struct LegendEntry {
    /// Text shown.
    pub label: String,
    /// Colour of the swatch.
    pub color: &'static str,
    /// Kind of swatch.
    pub swatch: Swatch,
}

/// Width taken by one legend entry, gap to the next included.
fn entry_width(e: &LegendEntry) -> f64 {
    26.0 + text_width(&e.label, TICK_SIZE) + 18.0
}

/// Splits the legend into centred rows fitting `width`, at most `max_rows`; entries
/// that do not fit are summarised as "+N more" on the last row.
fn legend_rows(entries: &[LegendEntry], width: f64, max_rows: usize) -> Vec<Vec<LegendEntry>> {
    let mut rows: Vec<Vec<LegendEntry>> = Vec::new();
    let mut used = f64::INFINITY;
    for (i, e) in entries.iter().enumerate() {
        let w = entry_width(e);
        if used + w > width {
            if rows.len() == max_rows.max(1) {
                let more = entries.len() - i + 1;
                if let Some(last) = rows.last_mut() {
                    last.pop();
                    last.push(LegendEntry {
                        label: format!("+{more} more"),
                        color: INK,
                        swatch: Swatch::Line(None),
                    });
                }
                break;
            }
            rows.push(Vec::new());
            used = 0.0;
        }
        used += w;
        if let Some(row) = rows.last_mut() {
            row.push(e.clone());
        }
    }
    rows
}

/// Draws the title and the legend across the top of a `width`×`height` chart and
/// returns the y at which the plot area may start.
pub(crate) fn header(
    svg: &mut Svg,
    width: f64,
    height: f64,
    title: &str,
    legend: &[LegendEntry],
) -> f64 {
    let mut y = PAD;
    if !title.is_empty() {
        let style = TextStyle {
            bold: true,
            fill: "#111111",
            ..TextStyle::new(TITLE_SIZE, Anchor::Middle)
        };
        svg.text(width / 2.0, y + TITLE_SIZE * 0.8, title, style);
        y += TITLE_SIZE + 10.0;
    }
    let max_rows = ((height * 0.25) / LEGEND_ROW).floor() as usize;
    for row in legend_rows(legend, width - 2.0 * PAD, max_rows) {
        let total: f64 = row.iter().map(entry_width).sum::<f64>() - 18.0;
        let mut x = (width - total) / 2.0;
        let mid = y + LEGEND_ROW / 2.0;
        for e in &row {
            match e.swatch {
                Swatch::Line(dash) => {
                    svg.polyline(&[(x, mid), (x + 20.0, mid)], e.color, dash, None);
                }
                Swatch::Block => svg.rect(x + 4.0, mid - 6.0, 12.0, 12.0, e.color, None),
            }
            svg.text(
                x + 26.0,
                mid + TICK_SIZE * 0.35,
                &e.label,
                TextStyle::new(TICK_SIZE, Anchor::Start),
            );
            x += entry_width(e);
        }
        y += LEGEND_ROW;
    }
    y + 10.0
}

/// Tick budget of a y axis on a chart `height` pixels tall (ticks ≥ 35 px apart on
/// the plot area that title, legend and x labels typically leave).
pub(crate) fn y_ticks_for(height: f64) -> usize {
    tick_budget(height - 150.0, 35.0)
}

/// Tick budget of an x axis on a chart `width` pixels wide (ticks ≥ 70 px apart, room
/// for labels such as `12.5k`).
pub(crate) fn x_ticks_for(width: f64) -> usize {
    tick_budget(width - 120.0, 70.0)
}

/// Left margin needed for y tick labels of `axis` and, when present, the y label.
pub(crate) fn left_margin(axis: &Axis, y_label: &str) -> f64 {
    let widest = axis
        .labels
        .iter()
        .map(|l| text_width(l, TICK_SIZE))
        .fold(0.0, f64::max);
    PAD + if y_label.is_empty() {
        0.0
    } else {
        LABEL_SIZE + 8.0
    } + widest
        + 8.0
}

/// Height below the plot area needed for one row of tick labels and, when present,
/// the x label.
pub(crate) fn bottom_margin(x_label: &str) -> f64 {
    PAD + if x_label.is_empty() {
        0.0
    } else {
        LABEL_SIZE + 8.0
    } + TICK_SIZE
        + 10.0
}

/// Right margin leaving room for half of the last x tick label.
pub(crate) fn right_margin(x_axis: Option<&Axis>) -> f64 {
    let last = x_axis
        .and_then(|a| a.labels.last())
        .map_or(0.0, |l| text_width(l, TICK_SIZE) / 2.0);
    (last + 6.0).max(24.0)
}

/// Horizontal gridlines, y tick labels and the rotated y label.
pub(crate) fn y_axis(svg: &mut Svg, plot: &Plot, axis: &Axis, label: &str) {
    for (&t, text) in axis.ticks.iter().zip(&axis.labels) {
        let y = plot.y(axis, t);
        svg.line((plot.left, y), (plot.right, y), GRID, 1.0);
        svg.text(
            plot.left - 8.0,
            y + TICK_SIZE * 0.35,
            text,
            TextStyle::new(TICK_SIZE, Anchor::End),
        );
    }
    if !label.is_empty() {
        // Baseline just left of the widest tick label; the rotated text's body lies
        // further left, its descenders in the gap.
        let widest = axis
            .labels
            .iter()
            .map(|l| text_width(l, TICK_SIZE))
            .fold(0.0, f64::max);
        let style = TextStyle {
            rotate: -90.0,
            ..TextStyle::new(LABEL_SIZE, Anchor::Middle)
        };
        svg.text(
            plot.left - 16.0 - widest,
            (plot.top + plot.bottom) / 2.0,
            label,
            style,
        );
    }
}

/// Vertical gridlines (with unlabelled ones at 2–9 × each decade on a log axis spanning
/// few decades), x tick labels and the x label.
pub(crate) fn x_axis(svg: &mut Svg, plot: &Plot, axis: &Axis, label: &str, height: f64) {
    if axis.log
        && axis.ticks.len() >= 2
        && axis.ticks.len() <= 7
        && axis.ticks[1] / axis.ticks[0] < 11.0
    {
        let first = axis.lo.log10().floor() as i32;
        let last = axis.hi.log10().ceil() as i32;
        for e in first..last {
            for m in 2..10 {
                let v = f64::from(m) * 10f64.powi(e);
                if v > axis.lo && v < axis.hi {
                    let x = plot.x(axis, v);
                    svg.line((x, plot.top), (x, plot.bottom), "#f1f1f1", 1.0);
                }
            }
        }
    }
    for (&t, text) in axis.ticks.iter().zip(&axis.labels) {
        let x = plot.x(axis, t);
        svg.line((x, plot.top), (x, plot.bottom), GRID, 1.0);
        svg.line((x, plot.bottom), (x, plot.bottom + 4.0), AXIS, 1.0);
        svg.text(
            x,
            plot.bottom + 8.0 + TICK_SIZE * 0.8,
            text,
            TextStyle::new(TICK_SIZE, Anchor::Middle),
        );
    }
    x_label(svg, plot, label, height);
}

/// The x label, centred under the plot area at the bottom of the chart.
pub(crate) fn x_label(svg: &mut Svg, plot: &Plot, label: &str, height: f64) {
    if !label.is_empty() {
        let x = (plot.left + plot.right) / 2.0;
        svg.text(
            x,
            height - PAD,
            label,
            TextStyle::new(LABEL_SIZE, Anchor::Middle),
        );
    }
}

/// The left and bottom axis lines (drawn over the data so they stay crisp).
pub(crate) fn axis_lines(svg: &mut Svg, plot: &Plot) {
    svg.line((plot.left, plot.top), (plot.left, plot.bottom), AXIS, 1.0);
    svg.line(
        (plot.left, plot.bottom),
        (plot.right, plot.bottom),
        AXIS,
        1.0,
    );
}

/// A "no data" notice in the middle of the plot area.
pub(crate) fn no_data(svg: &mut Svg, plot: &Plot) {
    let style = TextStyle {
        fill: "#888888",
        ..TextStyle::new(16.0, Anchor::Middle)
    };
    svg.text(
        (plot.left + plot.right) / 2.0,
        (plot.top + plot.bottom) / 2.0 + 6.0,
        "no data",
        style,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(label: &str) -> LegendEntry {
        LegendEntry {
            label: label.to_string(),
            color: "#000000",
            swatch: Swatch::Block,
        }
    }

    #[test]
    fn legend_wraps_and_caps() {
        let entries: Vec<LegendEntry> = (0..6).map(|i| entry(&format!("policy-{i}"))).collect();
        let rows = legend_rows(&entries, 300.0, 10);
        assert!(rows.len() > 1);
        assert_eq!(rows.iter().map(Vec::len).sum::<usize>(), 6);
        let capped = legend_rows(&entries, 300.0, 1);
        assert_eq!(capped.len(), 1);
        let last = capped[0]
            .last()
            .map(|e| e.label.clone())
            .unwrap_or_default();
        assert!(last.starts_with('+') && last.ends_with("more"), "{last}");
        assert!(legend_rows(&[], 300.0, 3).is_empty());
    }
}
