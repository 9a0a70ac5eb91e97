//! The day's verdict: nothing acknowledged lost, nothing run twice. Reads the marker file the
//! tasks wrote (`s <job> <rank>` at start, `e <job> <rank>` at the end; see `day.rs`) and the
//! final state of every acknowledged job, and says which job broke which rule:
//!
//! * every acknowledged job has a final state (else it was **lost**);
//! * a job the day cancelled ended `cancelled`, and none of its tasks reached its end;
//! * every other job ended `succeeded` and each of its ranks reached its end **exactly once**;
//!   starting twice is allowed (a requeue or a lost node stops a run before its end).
//!
//! A run stopped by SIGTERM writes `k <job> <rank>`; one killed outright writes nothing and
//! counts as still running. A rank that reached its end twice is told apart by the order of
//! the append-only marker file: **at once** when its second run started before the first reached its end (two live
//! copies: the fault this check exists for), **one after the other** otherwise (a run whose
//! end was lost with its node and that was run again: at-least-once, as SLURM's requeue).
//!
//! Owns: these rules. Does not own how states are fetched (the cluster's side).

use super::day::{DayLog, Kind, Res};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// What the check found.
#[derive(Debug, Default)]
pub struct Verdict {
    pub acknowledged: usize,
    pub succeeded: usize,
    pub cancelled: usize,
    /// Jobs that started more than once (requeued by the day or by a lost node).
    pub restarted: usize,
    /// Acknowledged jobs with no final state.
    pub lost: Vec<String>,
    /// `(job, rank, ends)` with more than one end, the runs overlapping.
    pub ran_twice: Vec<(String, u32, usize)>,
    /// `(job, rank, ends)` with more than one end, one run after the other, of a job that ran
    /// on a node the day killed.
    pub rerun_after_end: Vec<(String, u32, usize)>,
    /// Jobs whose final state is not what the day asked for, with that state.
    pub wrong_state: Vec<(String, String)>,
    /// Succeeded jobs with a rank that never reached its end marker.
    pub missing_end: Vec<(String, u32)>,
}

impl Verdict {
    /// Whether every rule held.
    pub fn clean(&self) -> bool {
        self.lost.is_empty()
            && self.ran_twice.is_empty()
            && self.wrong_state.is_empty()
            && self.missing_end.is_empty()
    }

    /// One line for a report or an assertion message (the first few offenders of each rule).
    pub fn summary(&self) -> String {
        let few = |v: String| v.chars().take(400).collect::<String>();
        format!(
            "acknowledged {}, succeeded {}, cancelled {}, restarted {}; lost {} {}; ran twice at once {} {}; ran to the end again after an end {} {}; wrong state {} {}; missing end {} {}",
            self.acknowledged,
            self.succeeded,
            self.cancelled,
            self.restarted,
            self.lost.len(),
            few(format!("{:?}", self.lost)),
            self.ran_twice.len(),
            few(format!("{:?}", self.ran_twice)),
            self.rerun_after_end.len(),
            few(format!("{:?}", self.rerun_after_end)),
            self.wrong_state.len(),
            few(format!("{:?}", self.wrong_state)),
            self.missing_end.len(),
            few(format!("{:?}", self.missing_end)),
        )
    }
}

/// Per (job, rank): starts, ends, and whether two runs were ever live at once with both
/// reaching their end (a start while another run had started and not ended, then two ends).
#[derive(Clone, Copy, Default)]
struct Runs {
    starts: usize,
    ends: usize,
    open: usize,
    max_open: usize,
}

/// The markers per (job, rank).
fn read_markers(marker: &Path) -> Res<HashMap<(String, u32), Runs>> {
    let text = std::fs::read_to_string(marker)?;
    let mut seen: HashMap<(String, u32), Runs> = HashMap::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(what), Some(job), Some(rank)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let Ok(rank) = rank.parse::<u32>() else {
            continue;
        };
        let entry = seen.entry((job.to_string(), rank)).or_default();
        match what {
            "s" => {
                entry.starts += 1;
                entry.open += 1;
                entry.max_open = entry.max_open.max(entry.open);
            }
            "e" => {
                entry.ends += 1;
                entry.open = entry.open.saturating_sub(1);
            }
            "k" => entry.open = entry.open.saturating_sub(1),
            _ => {}
        }
    }
    Ok(seen)
}

/// Checks the day against the marker file and `states` (job id → final state, lower case:
/// `succeeded`, `cancelled`, `failed`, ...).
pub fn verify(log: &DayLog, marker: &Path, states: &BTreeMap<String, String>) -> Res<Verdict> {
    let markers = read_markers(marker)?;
    let on_lost_nodes: std::collections::HashSet<&String> =
        log.losses.iter().flat_map(|l| &l.jobs).collect();
    let mut v = Verdict::default();
    for sub in &log.submitted {
        for id in &sub.ids {
            v.acknowledged += 1;
            let Some(state) = states.get(id) else {
                v.lost.push(id.clone());
                continue;
            };
            let ranks: Vec<Runs> = (0..sub.kind.ranks())
                .map(|r| markers.get(&(id.clone(), r)).copied().unwrap_or_default())
                .collect();
            if ranks.iter().any(|r| r.starts > 1) {
                v.restarted += 1;
            }
            for (r, runs) in ranks.iter().enumerate() {
                // Runs live at once that both ended: a start before the other's end, and
                // as many ends as those starts.
                if runs.ends > 1 && runs.max_open > 1 && runs.ends >= runs.max_open {
                    v.ran_twice.push((id.clone(), r as u32, runs.ends));
                } else if runs.ends > 1 && on_lost_nodes.contains(id) {
                    v.rerun_after_end.push((id.clone(), r as u32, runs.ends));
                } else if runs.ends > 1 {
                    // Run again after its end with no node lost under it: unexplained.
                    v.ran_twice.push((id.clone(), r as u32, runs.ends));
                }
            }
            let want = if sub.kind == Kind::Cancelled {
                "cancelled"
            } else {
                "succeeded"
            };
            if state != want {
                v.wrong_state.push((id.clone(), state.clone()));
                continue;
            }
            if sub.kind == Kind::Cancelled {
                v.cancelled += 1;
                continue;
            }
            v.succeeded += 1;
            for (r, runs) in ranks.iter().enumerate() {
                if runs.ends == 0 {
                    v.missing_end.push((id.clone(), r as u32));
                }
            }
        }
    }
    Ok(v)
}
