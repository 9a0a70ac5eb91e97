//! Grouped bar charts: one band per category (an account, say), one bar per group (a
//! policy, say) inside each band, for comparisons such as GPU-hours per account per
//! policy.
//!
//! Owns: [`BarChart`] and [`BarGroup`], band and bar geometry, category labels
//! (rotated when they do not fit) and value labels on bars when they fit. Does not
//! own: title, legend, y axis drawing (`frame`) or tick choice (`axis`, `num`).

use crate::axis::{Axis, Fit};
use crate::frame::{self, LegendEntry, Plot, Swatch, TICK_SIZE};
use crate::num::fmt_short;
use crate::svg::{AXIS, Anchor, Svg, TextStyle, series_color, text_width};
use crate::{DEFAULT_HEIGHT, DEFAULT_WIDTH, fmt_num};

/// Category labels longer than this many characters are cut with an ellipsis.
const MAX_LABEL_CHARS: usize = 24;
/// Rotation of category labels that do not fit their band, in degrees.
const LABEL_ANGLE: f64 = -40.0;
/// Least distance between rotated category labels, in pixels.
const LINE_PITCH: f64 = 15.0;
/// Font size of value labels on bars.
const VALUE_SIZE: f64 = 10.0;

/// One group of bars: a value per category, drawn in the group's colour.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BarGroup {
    /// Name shown in the legend.
    pub name: String,
    /// One value per category, in category order; missing, NaN or infinite values
    /// draw no bar.
    pub values: Vec<f64>,
}

impl BarGroup {
    /// A group named `name` with `values`.
    pub fn new(name: impl Into<String>, values: Vec<f64>) -> BarGroup {
        BarGroup {
            name: name.into(),
            values,
        }
    }
}

/// A grouped bar chart.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BarChart {
    /// Title above the chart.
    pub title: String,
    /// Label beside the y axis.
    pub y_label: String,
    /// Category names along the x axis.
    pub categories: Vec<String>,
    /// The groups, coloured in order from the palette.
    pub groups: Vec<BarGroup>,
}

impl BarChart {
    /// An empty chart with the given title and y label.
    pub fn new(title: impl Into<String>, y_label: impl Into<String>) -> BarChart {
        BarChart {
            title: title.into(),
            y_label: y_label.into(),
            ..BarChart::default()
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
        let n_cat = self.categories.len();
        let value = |g: &BarGroup, c: usize| g.values.get(c).copied().filter(|v| v.is_finite());
        let finite: Vec<f64> = self
            .groups
            .iter()
            .flat_map(|g| (0..n_cat).filter_map(move |c| value(g, c)))
            .collect();
        let extent = finite
            .iter()
            .fold(None, |acc: Option<(f64, f64)>, &v| match acc {
                None => Some((v.min(0.0), v.max(0.0))),
                Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
            });
        let y_axis = Axis::linear(extent, None, Fit::NiceWithZero, frame::y_ticks_for(h));

        let legend: Vec<LegendEntry> = self
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| LegendEntry {
                label: g.name.clone(),
                color: series_color(i),
                swatch: Swatch::Block,
            })
            .collect();
        let mut svg = Svg::new(w, h, &self.title);
        let top = frame::header(&mut svg, w, h, &self.title, &legend);

        let labels: Vec<String> = self.categories.iter().map(|c| shorten(c)).collect();
        let left = frame::left_margin(&y_axis, &self.y_label);
        let layout = CategoryLayout::fit(&labels, left, w - frame::right_margin(None), w);
        let bottom = (h - frame::bottom_margin("") - layout.drop.min(h * 0.3)).max(top + 20.0);
        let plot = Plot {
            left: layout.left,
            top,
            right: w - frame::right_margin(None),
            bottom,
        };
        let (left, band, right) = (plot.left, layout.band, plot.right);

        frame::y_axis(&mut svg, &plot, &y_axis, &self.y_label);
        for (c, label) in labels.iter().enumerate().step_by(layout.every) {
            let x = left + band * (c as f64 + 0.5);
            svg.line((x, bottom), (x, bottom + 4.0), AXIS, 1.0);
            let style = if layout.rotate {
                TextStyle {
                    rotate: LABEL_ANGLE,
                    ..TextStyle::new(TICK_SIZE, Anchor::End)
                }
            } else {
                TextStyle::new(TICK_SIZE, Anchor::Middle)
            };
            svg.text(x, bottom + 8.0 + TICK_SIZE * 0.8, label, style);
        }

        let zero = plot.y(&y_axis, 0.0);
        let n_groups = self.groups.len().max(1) as f64;
        let bar = band * 0.8 / n_groups;
        let gap = if bar > 6.0 { 1.5 } else { 0.0 };
        let widest_value = finite
            .iter()
            .map(|&v| text_width(&fmt_short(v), VALUE_SIZE))
            .fold(0.0, f64::max);
        let show_values = widest_value <= bar + 2.0;
        for (g, group) in self.groups.iter().enumerate() {
            for (c, category) in self.categories.iter().enumerate() {
                let Some(v) = value(group, c) else { continue };
                let x = left + band * (c as f64 + 0.1) + bar * g as f64;
                let y = plot.y(&y_axis, v);
                let tip = format!("{category} · {}: {}", group.name, fmt_num(v));
                svg.rect(
                    x + gap / 2.0,
                    y.min(zero),
                    bar - gap,
                    (y - zero).abs(),
                    series_color(g),
                    Some(&tip),
                );
                if show_values {
                    let ty = if v >= 0.0 {
                        y - 4.0
                    } else {
                        y + VALUE_SIZE + 2.0
                    };
                    let style = TextStyle::new(VALUE_SIZE, Anchor::Middle);
                    svg.text(x + bar / 2.0, ty, &fmt_short(v), style);
                }
            }
        }
        if y_axis.lo < 0.0 {
            svg.line((left, zero), (right, zero), AXIS, 1.0);
        }
        frame::axis_lines(&mut svg, &plot);
        if finite.is_empty() {
            frame::no_data(&mut svg, &plot);
        }
        svg.finish()
    }
}

/// Where category bands and their labels go.
struct CategoryLayout {
    /// Left edge of the plot area (moved right when rotated labels need room).
    left: f64,
    /// Width of one category band.
    band: f64,
    /// Whether labels are rotated by [`LABEL_ANGLE`].
    rotate: bool,
    /// Every how many categories a label is drawn.
    every: usize,
    /// Extra height the labels take below the plot area.
    drop: f64,
}

impl CategoryLayout {
    /// Fits `labels` under a plot area spanning `left..right` of a chart `width` wide.
    /// Labels too wide for their band are rotated; rotated labels closer than a line
    /// apart are thinned; the plot area moves right (up to 30% of the width) so the
    /// first rotated labels stay on the page.
    fn fit(labels: &[String], left: f64, right: f64, width: f64) -> CategoryLayout {
        let n = labels.len().max(1) as f64;
        let band = (right - left) / n;
        let widest = labels
            .iter()
            .map(|l| text_width(l, TICK_SIZE))
            .fold(0.0, f64::max);
        if widest <= band - 6.0 {
            return CategoryLayout {
                left,
                band,
                rotate: false,
                every: 1,
                drop: 0.0,
            };
        }
        let (sin, cos) = (
            LABEL_ANGLE.to_radians().sin().abs(),
            LABEL_ANGLE.to_radians().cos(),
        );
        let every = (LINE_PITCH / (band * sin)).ceil().max(1.0) as usize;
        let needed = labels
            .iter()
            .enumerate()
            .step_by(every)
            .map(|(c, l)| 10.0 + text_width(l, TICK_SIZE) * cos - band * (c as f64 + 0.5))
            .fold(left, f64::max)
            .min(width * 0.3)
            .max(left);
        CategoryLayout {
            left: needed,
            band: (right - needed) / n,
            rotate: true,
            every,
            drop: widest * sin + 8.0,
        }
    }
}

/// A category label cut to [`MAX_LABEL_CHARS`] characters by an ellipsis in the
/// middle, so labels sharing a long prefix (`team-research-vision-3`) stay distinct.
fn shorten(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    if chars.len() <= MAX_LABEL_CHARS {
        return s.to_string();
    }
    let head = (MAX_LABEL_CHARS - 1) / 2;
    let tail = MAX_LABEL_CHARS - 1 - head;
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[chars.len() - tail..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortens_long_labels() {
        assert_eq!(shorten("team-a"), "team-a");
        let long = shorten("account-with-a-long-name-17");
        assert_eq!(long.chars().count(), MAX_LABEL_CHARS);
        assert_eq!(long, "account-wit…long-name-17");
    }

    #[test]
    fn bars_skip_missing_and_nan_values() {
        let mut chart = BarChart::new("t", "GPU-hours");
        chart.categories = vec!["a".into(), "b".into(), "c".into()];
        chart
            .groups
            .push(BarGroup::new("fifo", vec![1.0, f64::NAN]));
        chart
            .groups
            .push(BarGroup::new("fair", vec![2.0, 3.0, 4.0, 99.0]));
        let svg = chart.to_svg();
        // 1 + 3 bars with tooltips, plus the two legend blocks and the background.
        assert_eq!(svg.matches("<rect").count(), 4 + 2 + 1);
        assert!(!svg.contains(": 99<"));
        assert!(!svg.contains("no data"));
    }
}
