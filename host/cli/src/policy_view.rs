//! The policy commands as a person reads them (issue 27, item 5): `gantry policy show`,
//! `set`, `rollback` and `history`, `gantry plugin list`, `gantry policy shadow` and
//! `gantry replay` print tables and sentences, times in the local time zone; `--json` prints
//! the daemon's answer as it is, for scripts.
//!
//! The answers are read as JSON values, field by field, so a field the daemon adds later
//! changes nothing here and a missing one shows as `-`.
//!
//! Owns these layouts. Does not own the calls (`main.rs`) nor the answers' shapes (the
//! daemon's `scheduler::policy_ops` and `scheduler::shadow`).

use serde_json::Value;

/// `ms` since the epoch in the local time zone, `2026-12-03 09:15:02 CET`.
pub fn local_time(ms: u64) -> String {
    let at = i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok());
    match at {
        Some(at) => at
            .to_zoned(jiff::tz::TimeZone::system())
            .strftime("%Y-%m-%d %H:%M:%S %Z")
            .to_string(),
        None => format!("{ms} ms"),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// The elements of an array (none when `v` is not one).
fn items(v: &Value) -> &[Value] {
    v.as_array().map_or(&[], Vec::as_slice)
}

fn short_sha(v: &Value) -> String {
    v.as_str()
        .map_or("-".into(), |s| s.chars().take(12).collect())
}

/// Left-aligned columns, two spaces apart.
fn table(header: &[&str], rows: &[Vec<String>]) -> Vec<String> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_string()
    };
    let mut out = vec![line(header.iter().map(|h| (*h).to_string()).collect())];
    out.extend(rows.iter().map(|r| line(r.clone())));
    out
}

/// One stage per line of a pipeline version's `resolved` plugins.
fn stages(version: &Value) -> Vec<String> {
    let rows: Vec<Vec<String>> = items(&version["resolved"])
        .iter()
        .map(|p| {
            let config = match &p["config"] {
                Value::Object(m) if m.is_empty() => "-".to_string(),
                other => text(other),
            };
            vec![
                text(&p["stage"]),
                text(&p["name"]),
                text(&p["version"]),
                short_sha(&p["sha256"]),
                config,
            ]
        })
        .collect();
    table(&["STAGE", "PLUGIN", "VERSION", "SHA256", "CONFIG"], &rows)
}

/// The heading line of a pipeline version.
fn version_line(version: &Value) -> String {
    let since = version["activated_ms"]
        .as_u64()
        .map_or("-".into(), local_time);
    format!(
        "pipeline version {} ({}), active since {since}",
        text(&version["version"]),
        text(&version["action"])
    )
}

/// `gantry policy show` (and what `set` and `rollback` answer).
pub fn render_policy(v: &Value) -> Vec<String> {
    let active = if v.get("active").is_some() {
        &v["active"]
    } else {
        v
    };
    let mut out = vec![version_line(active)];
    out.extend(stages(active));
    if let Some(counts) = v["fault_counts"].as_object().filter(|c| !c.is_empty()) {
        let list: Vec<String> = counts.iter().map(|(k, n)| format!("{k} {n}")).collect();
        out.push(format!("faults: {}", list.join(", ")));
    }
    if let Some(q) = v["quarantined"].as_array().filter(|q| !q.is_empty()) {
        let list: Vec<String> = q.iter().map(text).collect();
        out.push(format!("quarantined: {}", list.join(", ")));
    }
    if let Some(fallback) = v["fallback_version"].as_u64() {
        out.push(format!("a failing stage falls back to version {fallback}"));
    }
    if let Some(ms) = v["swap_ms"].as_f64() {
        out.push(format!("swapped in {ms:.1} ms"));
    }
    out
}

/// `gantry policy history`: one line per version, newest last.
pub fn render_history(v: &Value) -> Vec<String> {
    let rows: Vec<Vec<String>> = items(v)
        .iter()
        .map(|version| {
            let plugins: Vec<String> = items(&version["resolved"])
                .iter()
                .map(|p| {
                    format!(
                        "{}={}@{}",
                        text(&p["stage"]),
                        text(&p["name"]),
                        text(&p["version"])
                    )
                })
                .collect();
            vec![
                text(&version["version"]),
                text(&version["action"]),
                version["activated_ms"]
                    .as_u64()
                    .map_or("-".into(), local_time),
                plugins.join(" "),
            ]
        })
        .collect();
    table(&["VERSION", "ACTION", "ACTIVATED", "PLUGINS"], &rows)
}

/// `gantry plugin list`.
pub fn render_plugins(v: &Value) -> Vec<String> {
    let rows: Vec<Vec<String>> = items(v)
        .iter()
        .map(|p| {
            let stages: Vec<String> = items(&p["stages"]).iter().map(text).collect();
            let kib = p["size_bytes"]
                .as_u64()
                .map_or("-".into(), |b| format!("{} KiB", b.div_ceil(1024)));
            vec![
                text(&p["name"]),
                text(&p["version"]),
                text(&p["contract"]),
                stages.join(","),
                kib,
                short_sha(&p["sha256"]),
            ]
        })
        .collect();
    table(
        &["NAME", "VERSION", "CONTRACT", "STAGES", "SIZE", "SHA256"],
        &rows,
    )
}

/// The differing decisions of a shadow or a replay.
fn differences(list: &Value) -> Vec<String> {
    let rows: Vec<Vec<String>> = items(list)
        .iter()
        .map(|d| {
            vec![
                text(&d["cycle"]),
                text(&d["job"]),
                format!("{}: {}", text(&d["live"]), text(&d["live_reason"])),
                format!("{}: {}", text(&d["other"]), text(&d["other_reason"])),
            ]
        })
        .collect();
    if rows.is_empty() {
        return vec!["no job was decided differently".into()];
    }
    table(&["CYCLE", "JOB", "LIVE", "CANDIDATE"], &rows)
}

fn counts_line(v: &Value, faults: usize) -> String {
    format!(
        "{} cycles, {} decided differently ({} job decisions), {faults} faults",
        text(&v["cycles"]),
        text(&v["cycles_differing"]),
        text(&v["differences"]),
    )
}

/// `gantry policy shadow` (and `shadow FILE`): the candidate, what it saw, where it differs.
pub fn render_shadow(v: &Value) -> Vec<String> {
    let since = v["since_ms"].as_u64().map_or("-".into(), local_time);
    let mut out = vec![format!("shadow pipeline, running since {since}")];
    out.extend(stages(v));
    out.push(counts_line(v, v["faults"].as_u64().unwrap_or(0) as usize));
    out.extend(differences(&v["recent"]));
    for fault in items(&v["recent_faults"]) {
        out.push(format!("fault: {}", text(fault)));
    }
    out
}

/// `gantry replay`.
pub fn render_replay(v: &Value) -> Vec<String> {
    let faults = items(&v["faults"]);
    let mut out = vec![format!("replayed {}", counts_line(v, faults.len()))];
    out.extend(differences(&v["details"]));
    out.extend(faults.iter().map(|f| format!("fault: {}", text(f))));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn version() -> Value {
        json!({
            "version": 3, "action": "set", "activated_ms": 1_796_285_518_408u64,
            "resolved": [
                {"stage": "priority", "name": "fifo", "version": "0.1.0", "sha256": "40cfca605c16c38e46a8", "config": {}},
                {"stage": "placement", "name": "best-fit", "version": "0.1.0", "sha256": "771e602321b1310ab07f", "config": {"seed": 4}},
            ],
        })
    }

    #[test]
    fn the_policy_reads_as_a_table_of_stages_with_its_faults() {
        let view = json!({"active": version(), "fault_counts": {"best-fit": 2}, "quarantined": [], "fallback_version": null});
        let lines = render_policy(&view);
        assert!(
            lines[0].starts_with("pipeline version 3 (set), active since 2026-"),
            "{lines:?}"
        );
        assert_eq!(
            lines[1],
            "STAGE      PLUGIN    VERSION  SHA256        CONFIG"
        );
        assert_eq!(lines[2], "priority   fifo      0.1.0    40cfca605c16  -");
        assert_eq!(
            lines[3],
            "placement  best-fit  0.1.0    771e602321b1  {\"seed\":4}"
        );
        assert_eq!(lines[4], "faults: best-fit 2");
        assert_eq!(lines.len(), 5);
        let history = render_history(&json!([version()]));
        assert!(
            history[1].contains("priority=fifo@0.1.0 placement=best-fit@0.1.0"),
            "{history:?}"
        );
    }

    #[test]
    fn plugins_shadow_and_replay_read_as_tables_and_sentences() {
        let plugins = json!([{"name": "fifo", "version": "0.1.0", "contract": "0.1.0", "stages": ["priority"], "size_bytes": 2048, "sha256": "abcdef0123456789"}]);
        assert_eq!(
            render_plugins(&plugins),
            [
                "NAME  VERSION  CONTRACT  STAGES    SIZE   SHA256",
                "fifo  0.1.0    0.1.0     priority  2 KiB  abcdef012345"
            ]
        );
        let replay = json!({"cycles": 10, "cycles_differing": 1, "differences": 1, "faults": [],
            "details": [{"cycle": 7, "job": 12, "live": "started", "other": "waits", "live_reason": "on node-a", "other_reason": "no GPU free"}]});
        let lines = render_replay(&replay);
        assert_eq!(
            lines[0],
            "replayed 10 cycles, 1 decided differently (1 job decisions), 0 faults"
        );
        assert_eq!(
            lines[2],
            "7      12   started: on node-a  waits: no GPU free"
        );
        let shadow = json!({"cycles": 0, "cycles_differing": 0, "differences": 0, "faults": 0, "recent": [], "recent_faults": ["boom"], "resolved": []});
        let lines = render_shadow(&shadow);
        assert!(
            lines.contains(&"no job was decided differently".to_string()),
            "{lines:?}"
        );
        assert_eq!(lines.last().unwrap(), "fault: boom");
    }
}
