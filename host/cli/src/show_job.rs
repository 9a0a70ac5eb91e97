//! `gantry job ID` as `scontrol show job` shows a job: `Key=Value` lines a person reads
//! (state, reason, times as UTC and durations, tasks, nodes and GPUs, working directory,
//! command, dependencies, who held it, each task's measured GPU use, a pending job's start
//! forecast), and `--json` for the record as the API returns it.
//!
//! Owns: that layout, as text. Does not own the record (`gantry-api`).

use crate::accounting_cli::format_utc;
use crate::squeue_view::slurm_duration;
use gantry_api::model::{JobRecord, JobState};

/// The `Key=Value` lines of `job`, at `now_ms`.
pub fn render(job: &JobRecord, now_ms: u64) -> Vec<String> {
    let spec = &job.spec;
    let or_none = |v: Option<String>| v.unwrap_or_else(|| "None".into());
    let reason = job.reason.as_ref().map(|r| {
        let note = r
            .priority_note
            .as_ref()
            .map_or_else(String::new, |n| format!("; priority: {n}"));
        format!(
            "{}: {} (stage {}, plugin {}{note})",
            crate::cli::wire_text(&r.code),
            r.message,
            r.stage,
            r.plugin
        )
    });
    let run_s = match (job.start_ms, job.end_ms) {
        (Some(s), Some(e)) => e.saturating_sub(s) / 1000,
        (Some(s), None) => now_ms.saturating_sub(s) / 1000,
        _ => 0,
    };
    let limit = match spec.time_limit_s {
        0 => "UNLIMITED".into(),
        s => slurm_duration(s),
    };
    let id = match job.array {
        Some(a) => format!(
            "{} ArrayJobId={} ArrayTaskId={}",
            job.id, a.array_id, a.index
        ),
        None => job.id.to_string(),
    };
    let nodes: Vec<String> = job.tasks.iter().map(|t| t.node.clone()).collect();
    let deps: Vec<String> = spec
        .dependencies
        .iter()
        .map(|d| format!("{}:{}", d.kind.as_str(), d.job))
        .collect();
    let command = spec
        .script
        .as_ref()
        .map_or_else(|| spec.argv.join(" "), |_| "(batch script)".into());
    let mut lines = vec![
        format!("JobId={id} JobName={}", spec.name),
        format!(
            "   UserId={} Account={} Queue={} Kind={} Tier={}",
            spec.user,
            spec.account,
            spec.queue,
            crate::cli::wire_text(&spec.kind),
            job.tier
        ),
        format!(
            "   JobState={} Reason={} ExitCode={} EndReason={}",
            job.state.as_str(),
            or_none(reason),
            job.exit_code.map_or_else(|| "-".into(), |c| c.to_string()),
            or_none(job.end_reason.clone())
        ),
        format!(
            "   SubmitTime={} EligibleTime={} StartTime={} EndTime={}",
            format_utc(job.submit_ms),
            format_utc(
                job.spec
                    .begin_ms
                    .unwrap_or(job.submit_ms)
                    .max(job.submit_ms)
            ),
            or_none(
                job.start_ms
                    .or_else(|| job.start_forecast.as_ref().and_then(|f| f.p50_ms))
                    .map(format_utc)
            ),
            or_none(job.end_ms.map(format_utc))
        ),
        format!(
            "   RunTime={} TimeLimit={limit} Requeues={} Restarts={}",
            slurm_duration(run_s),
            job.requeues,
            job.restarts
        ),
        format!(
            "   NumTasks={} Nodes={} GPUs=[{}]",
            spec.task_count(),
            if nodes.is_empty() {
                "None".into()
            } else {
                nodes.join(",")
            },
            crate::squeue_view::gpus_per_task(job)
        ),
        format!(
            "   WorkDir={} Command={command}",
            spec.workdir.as_deref().unwrap_or("(its scratch directory)")
        ),
        format!(
            "   Dependency={} HeldBy={}",
            if deps.is_empty() {
                "None".into()
            } else {
                deps.join(",")
            },
            or_none(job.held_by.clone())
        ),
    ];
    for (i, t) in job.tasks.iter().enumerate() {
        if let Some(u) = &t.gpu_usage {
            lines.push(format!(
                "   GpuUse={i}:{} Util={}% Mem={}M MemPeak={}M UsedGpuSec={:.1} Samples={} Since={}",
                t.node,
                u.util_percent,
                u.memory_mib,
                u.memory_peak_mib,
                u.used_gpu_seconds(),
                u.samples,
                format_utc(u.sampled_since_ms)
            ));
        }
    }
    if let Some(f) = job
        .start_forecast
        .as_ref()
        .filter(|_| job.state == JobState::Pending)
    {
        lines.push(format!(
            "   StartForecast={} P90={} Why=\"{}\" ForecastAt={}",
            or_none(f.p50_ms.map(format_utc)),
            or_none(f.p90_ms.map(format_utc)),
            f.reason,
            format_utc(f.computed_ms)
        ));
    }
    if job.state == JobState::Pending && job.held_by.is_some() {
        lines.push(format!("   (gantry release {} lets it start)", job.id));
    }
    lines
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use gantry_api::model::JobSpec;

    #[test]
    fn a_job_reads_as_scontrol_show_job_does() {
        let spec: JobSpec = serde_json::from_str(
            r#"{"name": "train", "argv": ["python", "train.py"], "time_limit_s": 7200,
                "user": "alice", "dependencies": [{"kind": "afterok", "job": 4}]}"#,
        )
        .unwrap();
        let mut job = JobRecord::new(5, spec, 0);
        job.start_ms = Some(1_000);
        job.state = JobState::Running;
        let lines = render(&job, 3_723_000 + 1_000);
        let text = lines.join("\n");
        assert!(lines[0].starts_with("JobId=5 JobName=train"), "{text}");
        assert!(text.contains("UserId=alice"), "{text}");
        assert!(text.contains("JobState=running"), "{text}");
        assert!(text.contains("StartTime=1970-01-01T00:00:01Z"), "{text}");
        assert!(text.contains("RunTime=1:02:03 TimeLimit=2:00:00"), "{text}");
        assert!(text.contains("Command=python train.py"), "{text}");
        assert!(text.contains("Dependency=afterok:4 HeldBy=None"), "{text}");
    }

    #[test]
    fn a_pending_job_shows_its_forecast_as_its_start() {
        let spec: JobSpec = serde_json::from_str(r#"{"name": "wait", "argv": ["true"]}"#).unwrap();
        let mut job = JobRecord::new(6, spec, 0);
        job.start_forecast = Some(gantry_api::model::StartForecast {
            p50_ms: Some(3_600_000),
            p90_ms: Some(7_200_000),
            reason: "when job 5 ends; first in line".into(),
            computed_ms: 60_000,
        });
        let text = render(&job, 120_000).join("\n");
        assert!(text.contains("StartTime=1970-01-01T01:00:00Z"), "{text}");
        assert!(
            text.contains("StartForecast=1970-01-01T01:00:00Z P90=1970-01-01T02:00:00Z"),
            "{text}"
        );
        assert!(
            text.contains("Why=\"when job 5 ends; first in line\""),
            "{text}"
        );
    }
}
