//! `gantry-plot`: charts as standalone SVG strings, for reports a person looks at
//! rather than reads (the simulator's `gantry simulate` reports: GPU allocation over
//! time or against arrived workload per policy, wait-time CDFs, usage per account).
//!
//! Owns: line and step charts ([`LineChart`], [`Series`]), grouped bar charts
//! ([`BarChart`], [`BarGroup`]), the empirical CDF and downsampling helpers ([`cdf`],
//! [`downsample`]), "nice" tick values ([`nice_ticks`]), noise-free number formatting
//! ([`fmt_num`]) and the colour-blind-friendly [`PALETTE`].
//!
//! Does not own and must not depend on: the simulator or any scheduling type, files,
//! I/O, clocks, external crates. Callers pass plain numbers and names and get a
//! `String` back; writing it somewhere (a file, an HTML page, where it can be inlined
//! as is: the output uses no element ids) is theirs.
//!
//! Every chart renders something readable whatever the input: NaN and infinite values
//! are skipped, and a chart without data says "no data" instead of panicking.
//!
//! ```
//! use gantry_plot::{LineChart, Series, cdf};
//!
//! let mut chart = LineChart::new("Wait time", "wait (s)", "fraction of jobs");
//! chart.series.push(Series::new("fifo", cdf(&[0.0, 12.0, 30.0, 3600.0])));
//! chart.step = true;
//! chart.x_log = true;
//! chart.y_range = Some((0.0, 1.0));
//! let svg = chart.to_svg();
//! assert!(svg.starts_with("<svg") && svg.contains("fifo"));
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod axis;
mod bar;
mod data;
mod frame;
mod line;
mod num;
mod svg;

pub use bar::{BarChart, BarGroup};
pub use data::{CDF_MAX_POINTS, cdf, downsample};
pub use line::{LineChart, Series};
pub use num::{NiceTicks, fmt_num, nice_ticks};
pub use svg::{PALETTE, series_color};

/// Default chart width in pixels (the SVG scales through its viewBox).
pub const DEFAULT_WIDTH: u32 = 800;
/// Default chart height in pixels.
pub const DEFAULT_HEIGHT: u32 = 450;
