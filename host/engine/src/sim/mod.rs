//! The simulator core (`ARCHITECTURE.md`, "The simulator"): a virtual clock and an event queue that drive
//! the same cycle and the same plugins (wasm components or natively compiled) as the
//! daemon. No processes and no sleeping, so simulated days run in seconds.
//!
//! Two modes: [`timeline`] (jobs arrive, run their duration and leave; nodes go down
//! and up; preemption and requeue as in the daemon) and [`fill`] (the FGD paper's
//! protocol: offered one at a time, nothing departs).
//!
//! Owns: virtual time, simulated cluster state, results. Does not own file formats,
//! plots or progress bars (the daemon's `simulate` command), nor any decision.

pub mod events;
pub mod fill;
pub mod input;
pub mod results;
pub mod running_totals;
pub mod state;
pub mod timeline;
pub mod usage;

pub use fill::{FillPoint, FillResult, allocation_curve, run_fill};
pub use input::{NodeEvent, SimJob, SimNode, SimTask};
pub use results::{JobEnd, JobResult, Sample, Summary, TimelineResult};
pub use timeline::{CycleObserver, Progress, TimelineOptions, run_timeline, run_timeline_observed};
