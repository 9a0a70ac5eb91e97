//! The glue between the controller's job steps (`scheduler::job_trace`) and their traces
//! (`gantry_telemetry`): a [`JobTraceSink`] that hands each step to
//! `gantry_telemetry::record_job_step`, installed by telemetry's hook when job traces start
//! being exported. So a job's steps become spans exactly when traces are exported, and
//! neither the scheduler nor `gantry-telemetry` knows the other.
//!
//! Owns: the sink and its installation ([`install`]). Does not own the trace points (the
//! scheduler's) or the traces and their export (`gantry-telemetry`).

use gantry_controller::job_trace::{JobTraceSink, set_sink};

/// The controller's job steps, made spans by `gantry-telemetry`.
struct JobSteps;

impl JobTraceSink for JobSteps {
    fn step(&self, job_id: u64, step: &str, cycle: u64, detail: &str) {
        gantry_telemetry::record_job_step(job_id, step, cycle, detail);
    }

    fn dropped_spans(&self) -> u64 {
        gantry_telemetry::dropped_spans()
    }
}

/// Makes the controller's job steps reach `gantry-telemetry` once it exports traces: call
/// before `gantry_telemetry::init` (or `subscriber`) in a process that runs the controller.
/// A second call does nothing.
pub fn install() {
    gantry_telemetry::on_job_traces_enabled(|| {
        // A second install keeps the first sink, the same one.
        let _ = set_sink(&JobSteps);
    });
}
