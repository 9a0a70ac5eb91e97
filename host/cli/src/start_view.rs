//! `gantry jobs --start`: pending jobs with their expected start (the controller's
//! forecast: the median, the 90th percentile) and why they wait until then, soonest
//! first, as `squeue --start` lists them. An array member reads `2_1`. Also one forecast
//! in a line, as the what-ifs print it.
//!
//! Owns: that table, as text. Does not own the forecast (the controller) or the times'
//! spelling (`accounting_cli::format_utc`).

use crate::accounting_cli::format_utc;
use gantry_api::model::{JobRecord, JobState, StartForecast};

/// The id column: `ID`, or `ARRAY_INDEX` for an array member.
fn id_cell(job: &JobRecord) -> String {
    match job.array {
        Some(a) => format!("{}_{}", a.array_id, a.index),
        None => job.id.to_string(),
    }
}

/// The table of the pending jobs among `jobs`: soonest expected start first, those
/// without one (never, not yet forecast) last.
pub fn render(jobs: &[JobRecord]) -> Vec<String> {
    let mut pending: Vec<&JobRecord> = jobs
        .iter()
        .filter(|j| j.state == JobState::Pending)
        .collect();
    let start = |j: &JobRecord| j.start_forecast.as_ref().and_then(|f| f.p50_ms);
    pending.sort_by_key(|j| (start(j).is_none(), start(j), j.id));
    let mut out = vec![format!(
        "{:>12} {:<20} {:<10} {:<9} {:<20} {:<20}  WHY",
        "JOBID", "NAME", "USER", "QUEUE", "START (P50)", "P90"
    )];
    for j in pending {
        let name: String = j.spec.name.chars().take(20).collect();
        let user: String = j.spec.user.chars().take(10).collect();
        let queue: String = j.spec.queue.chars().take(9).collect();
        let (p50, p90, why) = match &j.start_forecast {
            Some(f) => (
                f.p50_ms.map_or_else(|| "N/A".into(), format_utc),
                f.p90_ms.map_or_else(|| "N/A".into(), format_utc),
                f.reason.clone(),
            ),
            None => ("N/A".into(), "N/A".into(), "not forecast yet".into()),
        };
        out.push(format!(
            "{:>12} {name:<20} {user:<10} {queue:<9} {p50:<20} {p90:<20}  {why}",
            id_cell(j)
        ));
    }
    out
}

/// One forecast in a line: `~<p50> (90 %: <p90>): <why>`, or `never: …`.
pub fn describe(f: &StartForecast) -> String {
    match (f.p50_ms, f.p90_ms) {
        (Some(p50), Some(p90)) => {
            format!(
                "~{} (90 %: by {}): {}",
                format_utc(p50),
                format_utc(p90),
                f.reason
            )
        }
        (Some(p50), None) => format!(
            "~{} (90 %: not within 30 days): {}",
            format_utc(p50),
            f.reason
        ),
        _ => f.reason.clone(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use gantry_api::model::{ArrayMember, JobSpec, StartForecast};

    fn pending(id: u64, p50: Option<u64>, array: Option<(u64, u32)>) -> JobRecord {
        let spec: JobSpec = serde_json::from_str(r#"{"name": "j", "argv": ["true"]}"#).unwrap();
        let mut j = JobRecord::new(id, spec, 0);
        j.array = array.map(|(array_id, index)| ArrayMember {
            array_id,
            index,
            max_running: None,
            count: 2,
            min: 1,
            max: 2,
        });
        j.start_forecast = Some(StartForecast {
            p50_ms: p50,
            p90_ms: p50.map(|t| t + 60_000),
            reason: if p50.is_some() {
                "when job 1 ends; first in line".into()
            } else {
                "never: no node has 16 GPUs".into()
            },
            computed_ms: 0,
        });
        j
    }

    #[test]
    fn soonest_first_array_members_by_their_index_and_never_last() {
        let jobs = vec![
            pending(3, None, None),
            pending(4, Some(7_200_000), Some((2, 1))),
            pending(5, Some(3_600_000), None),
        ];
        let lines = render(&jobs);
        assert!(lines[0].contains("START (P50)"), "{lines:?}");
        assert!(lines[1].trim_start().starts_with("5 "), "{lines:?}");
        assert!(lines[2].trim_start().starts_with("2_1 "), "{lines:?}");
        assert!(lines[2].contains("1970-01-01T02:00:00Z"), "{lines:?}");
        assert!(lines[3].contains("never: no node has 16 GPUs"), "{lines:?}");
    }
}
