//! The text of `gantry service`: the list (`ls`), one service with its replicas (`show`, and
//! the answer of `create`, `scale`, `update`, `rollback` and `stop`) and its revisions
//! (`history`), times in the local time zone. A replica of the current revision is
//! up to date; a draining one gets no new request and stops once those in flight are
//! answered.
//!
//! Owns these layouts. Does not own the calls (`service_cli`) nor the answers' shapes
//! (`gantry_api::model::ServiceView`).

use crate::policy_view::local_time;
use gantry_api::model::{
    AutoscaleSpec, HealthState, ReplicaView, Revision, RolloutState, RolloutStatus, ScaleSample,
    ServiceRecord, ServiceView,
};

/// `gantry service ls`: one line a service.
pub fn list_lines(views: &[ServiceView]) -> Vec<String> {
    let mut out = vec![format!(
        "{:<6} {:<24} {:>8} {:>10} {:>8} {:<9} {:<12} STATUS",
        "ID", "NAME", "REPLICAS", "UP-TO-DATE", "REVISION", "AUTOSCALE", "USER"
    )];
    for v in views {
        let s = &v.service;
        let running = v
            .replica_jobs
            .iter()
            .filter(|r| r.state == "running")
            .count();
        let autoscale = s.autoscale.as_ref().map_or("-".into(), |a| {
            format!("{}..{}", a.min_replicas, a.max_replicas)
        });
        out.push(format!(
            "{:<6} {:<24} {:>8} {:>10} {:>8} {:<9} {:<12} {}",
            s.id,
            s.name,
            format!("{running}/{}", s.replicas),
            up_to_date(v),
            s.revision,
            autoscale,
            s.template.user,
            status_text(v),
        ));
    }
    out
}

/// Replicas of the current revision that are not draining.
fn up_to_date(v: &ServiceView) -> usize {
    let current = v.service.revision;
    v.replica_jobs
        .iter()
        .filter(|r| r.revision == current && !r.draining)
        .count()
}

/// `ok`, `stopped`, why a replica cannot be made, or where the last rolling update stands;
/// then how many replicas drain.
fn status_text(v: &ServiceView) -> String {
    let s = &v.service;
    let mut status = if s.stopped {
        "stopped".to_string()
    } else if let Some(e) = &s.last_error {
        format!("cannot make a replica: {e}")
    } else {
        match &s.rollout {
            Some(r) if r.state == RolloutState::Progressing => {
                format!("rolling out revision {} -> {}", r.from, r.to)
            }
            Some(r) if r.state == RolloutState::RolledBack => {
                format!("revision {} rolled back to {}", r.to, r.from)
            }
            _ => "ok".to_string(),
        }
    };
    let draining = v.replica_jobs.iter().filter(|r| r.draining).count();
    if draining > 0 {
        status.push_str(&format!(", {draining} draining"));
    }
    status
}

/// `gantry service show ID`: the service, its settings, then one line a replica.
pub fn detail_lines(v: &ServiceView) -> Vec<String> {
    let s = &v.service;
    let mut out = vec![format!(
        "service {} ({}): {} replica(s) wanted, revision {}{}",
        s.id,
        s.name,
        s.replicas,
        s.revision,
        if s.stopped { ", stopped" } else { "" }
    )];
    out.extend(setting_lines(s));
    if let (Some(a), Some(sample)) = (&s.autoscale, v.scale_samples.last()) {
        out.push(sample_text(a, sample));
    }
    if let Some(e) = &s.last_error {
        out.push(format!("cannot make a replica: {e}"));
    }
    if let Some(e) = &v.endpoint_problem {
        out.push(format!("endpoint closed: {e}"));
    }
    out.push(format!(
        "{:<8} {:<10} {:<16} {:>6} {:<10} {:>8} {:>4} REASON",
        "JOB", "STATE", "NODE", "PORT", "HEALTH", "RESTARTS", "REV"
    ));
    out.extend(v.replica_jobs.iter().map(replica_line));
    out
}

/// The endpoint, the update strategy, the last rolling update and the autoscaler's settings.
fn setting_lines(s: &ServiceRecord) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(port) = s.endpoint_port {
        out.push(format!("endpoint: port {port}"));
    }
    let st = &s.strategy;
    out.push(format!(
        "strategy: max surge {}, max unavailable {}, progress deadline {} s",
        st.max_surge, st.max_unavailable, st.progress_deadline_s
    ));
    if let Some(r) = &s.rollout {
        out.push(format!("rollout: {}", rollout_text(r)));
    }
    if let Some(a) = &s.autoscale {
        out.push(format!("autoscale: {}", autoscale_text(a)));
    }
    out
}

fn replica_line(r: &ReplicaView) -> String {
    let health = match r.health {
        Some(HealthState::Healthy) => "healthy",
        Some(HealthState::Unhealthy) => "unhealthy",
        Some(HealthState::Starting) => "starting",
        Some(HealthState::Unchecked) | None => "-",
    };
    // A draining replica is running; one in another state says both.
    let state = match (r.draining, r.state.as_str()) {
        (true, "running") => "draining".to_string(),
        (true, other) => format!("{other},draining"),
        (false, other) => other.to_string(),
    };
    format!(
        "{:<8} {:<10} {:<16} {:>6} {:<10} {:>8} {:>4} {}",
        r.job,
        state,
        r.node.as_deref().unwrap_or("-"),
        r.port.map_or("-".into(), |p| p.to_string()),
        health,
        r.restarts,
        if r.revision == 0 {
            "-".to_string()
        } else {
            r.revision.to_string()
        },
        r.reason.as_deref().unwrap_or("")
    )
}

/// `revision 3 -> 4 progressing since ...`, or `complete`/`rolled back` with both times.
pub fn rollout_text(r: &RolloutStatus) -> String {
    let state = match r.state {
        RolloutState::Progressing => "progressing",
        RolloutState::Complete => "complete",
        RolloutState::RolledBack => "rolled back",
    };
    let when = match r.ended_ms {
        Some(end) => format!(
            "started {}, ended {}",
            local_time(r.started_ms),
            local_time(end)
        ),
        None => format!("since {}", local_time(r.started_ms)),
    };
    format!("revision {} -> {} {state}, {when}", r.from, r.to)
}

/// `1..8 replicas on METRIC, target X per replica (...)`.
pub fn autoscale_text(a: &AutoscaleSpec) -> String {
    let zero = a
        .scale_to_zero_after_s
        .map_or(String::new(), |s| format!(", to zero after {s} s idle"));
    format!(
        "{}..{} replicas on {}, target {} per replica ({} every {} s, scale down over {} s{zero})",
        a.min_replicas,
        a.max_replicas,
        a.metric,
        a.target,
        a.path,
        a.period_s,
        a.scale_down_window_s
    )
}

/// The autoscaler's last reading.
fn sample_text(a: &AutoscaleSpec, s: &ScaleSample) -> String {
    format!(
        "last reading ({}): {} = {} over {} ready replica(s), {} wanted",
        local_time(s.t_ms),
        a.metric,
        s.value,
        s.ready,
        s.replicas
    )
}

/// `gantry service history ID`: one line a revision kept, oldest first, then the last
/// rolling update.
pub fn history_lines(v: &ServiceView) -> Vec<String> {
    let s = &v.service;
    let mut out = vec![format!(
        "service {} ({}): revision {}",
        s.id, s.name, s.revision
    )];
    if s.history.is_empty() {
        out.push("no revision kept".into());
    } else {
        out.push(format!("{:>8}  {:<25}  CHANGE", "REVISION", "CREATED"));
        out.extend(s.history.iter().map(|h| revision_line(h, s.revision)));
    }
    out.push(match &s.rollout {
        Some(r) => format!("last rollout: {}", rollout_text(r)),
        None => "no rolling update yet".into(),
    });
    out
}

fn revision_line(h: &Revision, current: u32) -> String {
    let mut notes = Vec::new();
    if h.revision == current {
        notes.push("current".to_string());
    }
    if let Some(why) = &h.rolled_back {
        notes.push(format!("rolled back: {why}"));
    }
    let change = if h.change.is_empty() { "-" } else { &h.change };
    let notes = if notes.is_empty() {
        String::new()
    } else {
        format!("  ({})", notes.join("; "))
    };
    format!(
        "{:>8}  {:<25}  {change}{notes}",
        h.revision,
        local_time(h.created_ms)
    )
}
