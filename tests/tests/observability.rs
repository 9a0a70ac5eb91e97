//! Decisions you can see: `/metrics` parsed by Prometheus' own parser, the Grafana dashboard
//! in `deploy/grafana/` querying only what `/metrics` exports (issue 46, item 4), the per-job
//! decision log, a shadow pipeline that reports where it would differ (and cannot
//! disturb the live schedule even when it traps), and what-if replay of recorded
//! snapshots.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::{Daemon, WAIT, workspace};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::{Command, Stdio};

/// A 4-GPU job with a time limit, blocked until released.
fn limited(d: &Daemon, name: &str, limit_s: u64) -> Value {
    let mut j = d.blocking_job(name, 1, 4);
    j["time_limit_s"] = json!(limit_s);
    j
}

/// Parses `text` with prometheus_client's parser; returns "name{labels} value" lines.
fn prometheus_parse(text: &str) -> Vec<String> {
    let python = workspace().join("target/toolchains/py/bin/python");
    let script = "import sys\nfrom prometheus_client.parser import text_string_to_metric_families\n\
                  for f in text_string_to_metric_families(sys.stdin.read()):\n    for s in f.samples:\n        \
                  print(s.name + str(sorted(s.labels.items())), s.value)\n";
    let mut child = Command::new(&python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e}; run scripts/plugin-toolchains (scripts/test does it)",
                python.display()
            )
        });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "Prometheus' parser rejected /metrics: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn value(samples: &[String], prefix: &str) -> f64 {
    samples
        .iter()
        .find(|s| s.starts_with(prefix))
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no sample starting with {prefix}:\n{}", samples.join("\n")))
}

#[test]
fn metrics_parse_and_decisions_are_listed() {
    let d = Daemon::start(4);
    let running = d.submit(&d.blocking_job("runs", 1, 2));
    d.wait_state(running, "running");
    let waiting = d.submit(&d.blocking_job("waits", 1, 4));
    d.wait_for("the 4-GPU job to wait for GPUs", WAIT, || {
        (d.job(waiting)["reason"]["code"] == "insufficient-gpus").then_some(())
    });
    // A cycle's duration is observed when it has applied its outcome, after the waiting
    // job's reason is already visible: scrape until the second cycle has been timed.
    let samples = d.wait_for("two cycles to have been timed", WAIT, || {
        let (status, text) = d.get_text("/metrics");
        assert_eq!(status, 200);
        let samples = prometheus_parse(&text);
        (value(&samples, "gantry_cycle_duration_seconds_count[]") >= 2.0).then_some(samples)
    });
    assert_eq!(
        value(
            &samples,
            "gantry_jobs[('queue', 'default'), ('state', 'pending')]"
        ),
        1.0
    );
    assert_eq!(
        value(
            &samples,
            "gantry_jobs[('queue', 'default'), ('state', 'running')]"
        ),
        1.0
    );
    assert_eq!(
        value(&samples, "gantry_gpus_allocated[('model', 'fake')"),
        2.0
    );
    assert_eq!(value(&samples, "gantry_gpus[('model', 'fake')"), 4.0);
    assert_eq!(value(&samples, "gantry_submits_total[]"), 2.0);
    assert!(value(&samples, "gantry_cycles_total[]") >= 2.0);
    assert!(value(&samples, "gantry_cycle_duration_seconds_count[]") >= 2.0);
    let fifo_calls = value(
        &samples,
        "gantry_plugin_call_duration_seconds_count[('plugin', 'fifo'), ('stage', 'priority')]",
    );
    assert!(fifo_calls >= 2.0, "{fifo_calls}");

    // The waiting job's decisions: pending for lack of GPUs, then started.
    d.release(running);
    d.wait_state(waiting, "running");
    let (status, log) = d.get(&format!("/v1/jobs/{waiting}/decisions"));
    assert_eq!(status, 200, "{log}");
    let log = log.as_array().unwrap();
    let pending = log
        .iter()
        .find(|e| e["decision"] == "pending")
        .expect("a pending decision");
    assert_eq!(pending["reason_code"], "insufficient-gpus", "{pending}");
    assert!(pending["cycle"].as_u64().unwrap() > 0);
    let start = log.last().unwrap();
    assert_eq!(start["decision"], "start", "{log:?}");
    assert!(start["cycle"].as_u64() > pending["cycle"].as_u64());
    d.release(waiting);
}

/// The dashboard shipped for Grafana.
const DASHBOARD: &str = "deploy/grafana/gantry-dashboard.json";

/// Every name a scrape of `text` (the OpenMetrics text format) may be queried by, with the
/// family it belongs to: each sample's name, and from each `# TYPE` line the names the type
/// gives its samples (`_total` of a counter; `_bucket`, `_sum`, `_count` of a histogram), so
/// that a family without samples yet (no plugin fault so far) still counts.
fn exported_names(text: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut words = rest.split_whitespace();
            let (Some(family), Some(kind)) = (words.next(), words.next()) else {
                panic!("a TYPE line without a name and a type: {line:?}");
            };
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                "summary" => &["", "_sum", "_count"],
                _ => &[""],
            };
            for suffix in suffixes {
                names.insert(format!("{family}{suffix}"), family.to_string());
            }
        } else if !line.starts_with('#') && !line.trim().is_empty() {
            let name: String = line
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let family = names.get(&name).cloned().unwrap_or_else(|| name.clone());
            names.insert(name, family);
        }
    }
    names
}

/// The metric names in a PromQL expression: each `gantry_...` word.
fn queried_names(expr: &str) -> Vec<String> {
    let is_name = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("gantry_") {
        let before = rest[..at].chars().next_back();
        let name: String = rest[at..].chars().take_while(|c| is_name(*c)).collect();
        if !before.is_some_and(|c| is_name(c) || c.is_ascii_uppercase()) {
            names.push(name.clone());
        }
        rest = &rest[at + name.len()..];
    }
    names
}

/// The dashboard's queries, each with where it is ("panel 3 (Cycle duration) target B"):
/// every panel's targets and every query variable. Fails unless the JSON is a dashboard:
/// panels with unique ids, each with a non-empty list of targets that hold an expression, on
/// the `DS_PROMETHEUS` data-source variable.
fn dashboard_queries(dashboard: &Value) -> Vec<(String, String)> {
    assert!(
        dashboard["schemaVersion"].as_u64().is_some_and(|v| v >= 36),
        "{DASHBOARD}: no schemaVersion of a current Grafana"
    );
    assert!(dashboard["title"].is_string() && dashboard["uid"].is_string());
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("templating.list");
    assert!(
        variables
            .iter()
            .any(|v| v["name"] == "DS_PROMETHEUS" && v["type"] == "datasource"),
        "{DASHBOARD}: no data-source variable DS_PROMETHEUS"
    );
    let panels = dashboard["panels"].as_array().expect("a list of panels");
    assert!(!panels.is_empty(), "{DASHBOARD}: no panels");
    let mut ids = BTreeSet::new();
    let mut queries = Vec::new();
    for panel in panels {
        let id = panel["id"].as_u64().expect("every panel has a numeric id");
        let title = panel["title"].as_str().unwrap_or_default();
        assert!(ids.insert(id), "{DASHBOARD}: panel id {id} twice");
        let targets = panel["targets"]
            .as_array()
            .unwrap_or_else(|| panic!("panel {id} ({title}) has no list of targets"));
        assert!(!targets.is_empty(), "panel {id} ({title}) has no targets");
        for target in targets {
            let expr = target["expr"]
                .as_str()
                .filter(|e| !e.trim().is_empty())
                .unwrap_or_else(|| panic!("panel {id} ({title}): a target without expr"));
            let uid = &target["datasource"]["uid"];
            assert_eq!(uid, "${DS_PROMETHEUS}", "panel {id} ({title}): data source");
            let at = format!("panel {id} ({title}) target {}", target["refId"]);
            queries.push((at, expr.to_string()));
        }
    }
    for v in variables.iter().filter(|v| v["type"] == "query") {
        let query = v["query"]["query"].as_str().or(v["query"].as_str());
        let at = format!("variable {}", v["name"]);
        queries.push((at, query.expect("a query variable's query").to_string()));
    }
    queries
}

#[test]
fn the_grafana_dashboard_queries_only_metrics_the_daemon_exports() {
    let path = workspace().join(DASHBOARD);
    let text = std::fs::read_to_string(&path).unwrap();
    let dashboard: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()));
    let queries = dashboard_queries(&dashboard);

    // A family with labels is rendered once it has a series: a job running (jobs by state)
    // after its cycle called the plugins (call durations) and one of them faulted (a
    // placement plugin that traps, live after a swap with the queue empty; the cycle falls
    // back and the job starts all the same).
    let d = Daemon::start(2);
    let (status, info) = d.post_bytes("/v1/plugins", gantry_components::HOSTILE_TRAP);
    assert_eq!(status, 201, "{info}");
    let trapping = json!({
        "priority": [{"plugin": "fifo"}],
        "placement": {"plugin": "hostile-trap"},
        "preemption": {"plugin": "priority-preempt"},
    });
    let (status, body) = d.put("/v1/policy", &trapping);
    assert_eq!(status, 200, "{body}");
    let id = d.submit(&d.blocking_job("scraped", 1, 1));
    d.wait_state(id, "running");
    let series = [
        "gantry_jobs{",
        "gantry_plugin_call_duration_seconds_count{",
        "gantry_plugin_faults_total{",
        "gantry_cycle_duration_seconds_count ",
    ];
    let exported = d.wait_for("every family to have a series", WAIT, || {
        let (status, text) = d.get_text("/metrics");
        assert_eq!(status, 200, "{text}");
        series
            .iter()
            .all(|s| text.contains(s))
            .then(|| exported_names(&text))
    });
    d.release(id);

    let mut unknown = Vec::new();
    let mut shown = BTreeSet::new();
    for (at, expr) in &queries {
        let names = queried_names(expr);
        assert!(!names.is_empty(), "{at} queries no gantry_ metric: {expr}");
        for name in names {
            match exported.get(&name) {
                Some(family) => {
                    shown.insert(family.clone());
                }
                None => unknown.push(format!("{at}: {name} (in `{expr}`)")),
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "{DASHBOARD} queries metrics /metrics does not export:\n  {}\nexported: {}",
        unknown.join("\n  "),
        exported.keys().cloned().collect::<Vec<_>>().join(" ")
    );
    // And it shows every family the daemon exports (a new metric belongs on it too).
    let families: BTreeSet<&String> = exported.values().collect();
    let missing: Vec<&&String> = families.iter().filter(|f| !shown.contains(**f)).collect();
    assert!(
        missing.is_empty(),
        "families exported but on no panel of {DASHBOARD}: {missing:?}"
    );
}

#[test]
fn names_are_read_from_scrapes_and_queries_as_prometheus_names_them() {
    let text = "# HELP gantry_cycles Scheduling cycles run.\n# TYPE gantry_cycles counter\n\
                gantry_cycles_total 3\n# TYPE gantry_faults counter\n\
                # TYPE gantry_took_seconds histogram\n\
                gantry_took_seconds_bucket{le=\"0.1\"} 1\n# TYPE gantry_jobs gauge\n\
                gantry_jobs{state=\"pending\"} 2\n# EOF\n";
    let names = exported_names(text);
    for name in [
        "gantry_cycles_total",
        "gantry_faults_total",
        "gantry_took_seconds_bucket",
        "gantry_took_seconds_count",
        "gantry_jobs",
    ] {
        assert!(names.contains_key(name), "{name}: {names:?}");
    }
    assert!(!names.contains_key("gantry_cycles") && !names.contains_key("gantry_jobs_total"));
    assert_eq!(names["gantry_took_seconds_sum"], "gantry_took_seconds");
    let expr = "histogram_quantile(0.99, sum by (le) (rate(gantry_took_seconds_bucket{instance=~\"$instance\"}[5m]))) / gantry_jobs";
    assert_eq!(
        queried_names(expr),
        ["gantry_took_seconds_bucket", "gantry_jobs"]
    );
    assert!(queried_names("up{job=\"my_gantry_x\"}").is_empty());
}

#[test]
fn shadow_pipeline_reports_differences_and_cannot_disturb_the_live_one() {
    let d = Daemon::start(4);
    let blocker = d.submit(&d.blocking_job("blocker", 1, 4));
    d.wait_state(blocker, "running");
    let (status, _) = d.post_bytes("/v1/plugins", gantry_components::SHORTEST_FIRST);
    assert_eq!(status, 201);
    let (status, view) = d.put(
        "/v1/policy/shadow",
        &json!({"priority": [{"plugin": "shortest-first"}], "placement": {"plugin": "first-fit"}}),
    );
    assert_eq!(status, 200, "{view}");
    // Live fifo starts `long` first; the shadow (shortest first) would start `short`.
    let long = d.submit(&limited(&d, "long", 3000));
    let short = d.submit(&limited(&d, "short", 60));
    let diff = d.wait_for("the shadow to report a difference", WAIT, || {
        let (_, v) = d.get("/v1/policy/shadow/diff");
        (v["differences"].as_u64().unwrap_or(0) > 0).then_some(v)
    });
    let recent = diff["recent"].as_array().unwrap();
    let about = |job: u64| {
        recent
            .iter()
            .rev()
            .find(|x| x["job"] == job)
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(about(long)["live"], "pending: insufficient-gpus", "{diff}");
    assert_eq!(
        about(long)["other"],
        "pending: blocked-by-higher-priority",
        "{diff}"
    );
    assert_eq!(
        about(short)["live"],
        "pending: blocked-by-higher-priority",
        "{diff}"
    );
    // The live pipeline decides: `long` starts first.
    d.release(blocker);
    d.wait_state(long, "running");
    assert_eq!(d.job(short)["state"], "pending");

    // A shadow whose placement traps: faults counted on the shadow, live untouched.
    let (status, _) = d.post_bytes("/v1/plugins", gantry_components::HOSTILE_TRAP);
    assert_eq!(status, 201);
    let (status, _) = d.put(
        "/v1/policy/shadow",
        &json!({"priority": [{"plugin": "fifo"}], "placement": {"plugin": "hostile-trap"}}),
    );
    assert_eq!(status, 200);
    d.wait_for("the trapping shadow's faults", WAIT, || {
        let (_, v) = d.get("/v1/policy/shadow");
        (v["faults"].as_u64().unwrap_or(0) > 0).then_some(())
    });
    d.release(long);
    d.wait_state(short, "running");
    let (_, faults) = d.get("/v1/faults");
    assert_eq!(
        faults,
        json!([]),
        "shadow faults must not reach the live cycle"
    );
    let (status, last) = d.delete("/v1/policy/shadow");
    assert_eq!(status, 200, "{last}");
    let (status, _) = d.get("/v1/policy/shadow");
    assert_eq!(status, 404);
    d.release(short);
}

#[test]
fn replay_of_recorded_snapshots() {
    let d = Daemon::start(4);
    let blocker = d.submit(&d.blocking_job("blocker", 1, 4));
    d.wait_state(blocker, "running");
    let long = d.submit(&limited(&d, "long", 3000));
    let short = d.submit(&limited(&d, "short", 60));
    d.wait_for("both to wait", WAIT, || {
        (d.job(short)["reason"]["code"] == "blocked-by-higher-priority").then_some(())
    });
    let live = json!({"priority": [{"plugin": "fifo"}], "placement": {"plugin": "first-fit"}, "preemption": {"plugin": "priority-preempt"}});
    let (status, same) = d.post("/v1/replay", &json!({"pipeline": live, "since_s": 3600}));
    assert_eq!(status, 200, "{same}");
    assert!(same["cycles"].as_u64().unwrap() > 0, "{same}");
    assert_eq!(
        same["differences"], 0,
        "the live pipeline replays identically: {same}"
    );
    let (status, _) = d.post_bytes("/v1/plugins", gantry_components::SHORTEST_FIRST);
    assert_eq!(status, 201);
    let candidate =
        json!({"priority": [{"plugin": "shortest-first"}], "placement": {"plugin": "first-fit"}});
    let (status, other) = d.post(
        "/v1/replay",
        &json!({"pipeline": candidate, "since_s": 3600}),
    );
    assert_eq!(status, 200, "{other}");
    assert!(other["differences"].as_u64().unwrap() > 0, "{other}");
    let jobs: Vec<u64> = other["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["job"].as_u64().unwrap())
        .collect();
    assert!(jobs.contains(&long) && jobs.contains(&short), "{other}");
    for id in [blocker, long, short] {
        d.release(id);
    }
}
