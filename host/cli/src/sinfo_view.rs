//! `gantry nodes` as `sinfo -N` shows nodes: one line each, with its state, GPUs (how many,
//! how much of them is allocated, in GPUs), CPU and memory allocated of the total, where its
//! tasks run (`local` or the agent's address) and why it is not usable, if it is not.
//! `gantry nodes -l` keeps the long form (`cli::print_nodes`: every GPU, its holders,
//! health and MIG devices).
//!
//! Owns: the one-line layout, as text. Does not own what a node reports (`NodeView`).

use gantry_api::views::NodeView;

/// Why `n` cannot take work, or `-`: down, drained, or some GPUs unhealthy.
fn why_not(n: &NodeView) -> String {
    if let Some(reason) = &n.down_reason {
        return format!("down: {reason}");
    }
    if let Some(d) = &n.drain {
        return format!("drained by {}: {}", d.by, d.reason);
    }
    let sick = n.gpus.iter().filter(|g| !g.healthy).count();
    if sick > 0 {
        return format!("{sick} GPU(s) unhealthy");
    }
    "-".into()
}

/// The table: a header, then a line per node.
pub fn render(nodes: &[NodeView]) -> Vec<String> {
    let mut out = vec![format!(
        "{:<16} {:<9} {:>4} {:>9} {:>13} {:>15}  {:<21} REASON",
        "NODE", "STATE", "GPUS", "GPU-ALLOC", "CPU(milli)", "MEM(MiB)", "WHERE"
    )];
    for n in nodes {
        let allocated: u64 = n.gpus.iter().map(|g| u64::from(g.allocated_milli)).sum();
        let name: String = n.name.chars().take(16).collect();
        let place = if n.agent == "local" {
            "local".to_string()
        } else {
            n.addr.chars().take(21).collect()
        };
        out.push(format!(
            "{name:<16} {:<9} {:>4} {:>9} {:>13} {:>15}  {place:<21} {}",
            n.state,
            n.gpus.len(),
            format!("{}.{:02}", allocated / 1000, allocated % 1000 / 10),
            format!("{}/{}", n.cpu_milli_allocated, n.cpu_milli),
            format!("{}/{}", n.memory_mib_allocated, n.memory_mib),
            why_not(n)
        ));
    }
    out
}

/// The line under the table that says which controller leads, from `GET /v1/health`'s
/// `leadership` (`None` for a controller alone on its own store, which has none).
pub fn leader_line(health: &serde_json::Value) -> Option<String> {
    let leadership = health.get("leadership").filter(|l| !l.is_null())?;
    let text = |v: &serde_json::Value| v.as_str().unwrap_or("?").to_string();
    let since = |leader: &serde_json::Value| {
        leader["since_ms"]
            .as_i64()
            .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
            .map_or_else(
                || "?".into(),
                |t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string(),
            )
    };
    let leader = &leadership["leader"];
    Some(match (leadership["role"].as_str(), leader.is_null()) {
        (Some("leader"), _) => format!(
            "controller: {} leads since {} (term {})",
            text(&leadership["name"]),
            since(leader),
            leadership["term"]
        ),
        (_, false) => format!(
            "controller: {} at {} leads since {}; {} answering here stands by",
            text(&leader["name"]),
            text(&leader["url"]),
            since(leader),
            text(&leadership["name"])
        ),
        (_, true) => match leadership["store_error"].as_str() {
            Some(e) => format!("controller: nobody leads: the state store cannot be reached ({e})"),
            None => "controller: nobody leads now (an election is under way)".into(),
        },
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn one_line_per_node_with_what_is_allocated_and_why_it_is_not_usable() {
        let gpu = |milli: u32, healthy: bool| {
            json!({"index": 0, "model": "A100", "memory_mib": 81920, "healthy": healthy,
                   "allocated_milli": milli, "jobs": [], "nvlink_peers": [],
                   "mig_enabled": false, "mig_devices": []})
        };
        let node = |name: &str, drain: serde_json::Value, gpus: Vec<serde_json::Value>| {
            serde_json::from_value::<NodeView>(json!({
                "name": name, "state": "up", "agent": "local", "addr": "", "gpu_source": "config",
                "labels": {}, "cpu_milli": 2000, "cpu_milli_allocated": 500,
                "memory_mib": 32768, "memory_mib_allocated": 1024, "gpus": gpus,
                "notes": [], "drain": drain,
            }))
            .unwrap()
        };
        let drained = json!({"reason": "fan", "by": "ops", "since_ms": 0});
        let lines = render(&[
            node(
                "a",
                serde_json::Value::Null,
                vec![gpu(1000, true), gpu(500, true)],
            ),
            node("b", drained, vec![gpu(0, true)]),
            node("c", serde_json::Value::Null, vec![gpu(0, false)]),
        ]);
        assert_eq!(lines.len(), 4, "{lines:#?}");
        assert!(
            lines[1].contains(" 1.50 ") && lines[1].contains("500/2000"),
            "{}",
            lines[1]
        );
        assert!(lines[2].ends_with("drained by ops: fan"), "{}", lines[2]);
        assert!(lines[3].ends_with("1 GPU(s) unhealthy"), "{}", lines[3]);
    }

    #[test]
    fn the_leader_line_says_who_leads_since_when_or_why_nobody_does() {
        assert_eq!(
            leader_line(&json!({"status": "ok", "leadership": null})),
            None
        );
        let leader = json!({"name": "ctl-a", "url": "http://10.0.0.1:8080", "since_ms": 0});
        let leads =
            json!({"leadership": {"role": "leader", "name": "ctl-a", "term": 7, "leader": leader}});
        assert_eq!(
            leader_line(&leads).unwrap(),
            "controller: ctl-a leads since 1970-01-01 00:00:00 UTC (term 7)"
        );
        let standby = json!({"leadership": {"role": "standby", "name": "ctl-b", "term": 0, "leader": leader}});
        assert_eq!(
            leader_line(&standby).unwrap(),
            "controller: ctl-a at http://10.0.0.1:8080 leads since 1970-01-01 00:00:00 UTC; ctl-b answering here stands by"
        );
        let lost = json!({"leadership": {"role": "standby", "name": "ctl-b", "leader": null, "store_error": "etcd at 127.0.0.1:2379: refused"}});
        assert!(
            leader_line(&lost)
                .unwrap()
                .contains("cannot be reached (etcd at 127.0.0.1:2379: refused)")
        );
    }
}
