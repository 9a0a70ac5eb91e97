//! `gantry images`: each node's image cache as a table (the controller's, then each
//! agent's), as `docker images` or `enroot list`
//! show theirs: digest (short), size, when last used, whether a container runs from it, and
//! the references tasks named it by.
//!
//! Owns: that rendering. Does not own the cache or its listing (`GET /v1/images`).

use serde_json::Value;

/// Now, ms since the epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// "3 min ago", "2 h ago", "4 d ago".
fn ago(now_ms: u64, then_ms: u64) -> String {
    let s = now_ms.saturating_sub(then_ms) / 1000;
    match s {
        0..60 => format!("{s} s ago"),
        60..3600 => format!("{} min ago", s / 60),
        3600..86_400 => format!("{} h ago", s / 3600),
        _ => format!("{} d ago", s / 86_400),
    }
}

/// The lines to print for `answer` (the body of `GET /v1/images`) at `now_ms`: the
/// controller's node, then each agent's node under a heading of its name.
pub fn render(answer: &Value, now_ms: u64) -> Vec<String> {
    let mut out = node_lines(answer, now_ms);
    for agent in answer["agents"].as_array().into_iter().flatten() {
        out.push(String::new());
        out.push(format!("node {}:", agent["node"].as_str().unwrap_or("?")));
        match agent["error"].as_str() {
            Some(why) => out.push(format!("cannot ask it: {why}")),
            None => out.extend(node_lines(agent, now_ms)),
        }
    }
    out
}

/// One node's cache (`enabled`, `cache_dir`, `cache_max_mib`, `images`).
fn node_lines(answer: &Value, now_ms: u64) -> Vec<String> {
    if answer["enabled"] != true {
        return vec![
            "containers are not set up on this node ([containers], docs/containers.md)".into(),
        ];
    }
    let images = answer["images"].as_array().cloned().unwrap_or_default();
    let total: u64 = images.iter().filter_map(|i| i["size_mib"].as_u64()).sum();
    let max = answer["cache_max_mib"].as_u64().unwrap_or(0);
    let limit = if max == 0 {
        "no limit".to_string()
    } else {
        format!("limit {max} MiB")
    };
    let mut out = vec![format!(
        "{} image(s), {total} MiB in {} ({limit})",
        images.len(),
        answer["cache_dir"].as_str().unwrap_or("?")
    )];
    if images.is_empty() {
        return out;
    }
    out.push(format!(
        "{:<19} {:>9} {:<12} {:<6} REFERENCES",
        "DIGEST", "SIZE", "LAST USED", "IN USE"
    ));
    for i in &images {
        let digest = i["digest"].as_str().unwrap_or("");
        let short: String = digest.chars().take(19).collect();
        let refs: Vec<&str> = i["references"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        out.push(format!(
            "{short:<19} {:>5} MiB {:<12} {:<6} {}",
            i["size_mib"].as_u64().unwrap_or(0),
            ago(now_ms, i["last_used_ms"].as_u64().unwrap_or(0)),
            if i["in_use"] == true { "yes" } else { "no" },
            refs.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cache_prints_as_a_table_and_an_unset_node_says_so() {
        let answer = json!({"enabled": true, "cache_dir": "/var/lib/gantry/images", "cache_max_mib": 100,
            "images": [{"digest": "sha256:0123456789abcdef", "size_mib": 12, "last_used_ms": 1_000,
                        "in_use": true, "references": ["reg/a:v1", "reg/a@sha256:01"]}]});
        let lines = render(&answer, 181_000);
        assert_eq!(
            lines[0],
            "1 image(s), 12 MiB in /var/lib/gantry/images (limit 100 MiB)"
        );
        assert!(lines[2].starts_with("sha256:0123456789a"), "{}", lines[2]);
        assert!(lines[2].contains("12 MiB 3 min ago"), "{}", lines[2]);
        assert!(
            lines[2].ends_with("yes    reg/a:v1, reg/a@sha256:01"),
            "{}",
            lines[2]
        );
        let off = render(&json!({"enabled": false}), 0);
        assert!(off[0].contains("not set up"), "{off:?}");
        let with_agents = render(
            &json!({"enabled": false, "agents": [
                {"node": "node-a", "enabled": true, "cache_dir": "/c", "cache_max_mib": 0, "images": []},
                {"node": "node-b", "error": "connection refused", "images": []}]}),
            0,
        );
        assert_eq!(
            with_agents[1..],
            [
                "",
                "node node-a:",
                "0 image(s), 0 MiB in /c (no limit)",
                "",
                "node node-b:",
                "cannot ask it: connection refused"
            ]
        );
    }
}
