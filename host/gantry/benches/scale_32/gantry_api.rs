//! The day's calls on Gantry, over its REST API on 127.0.0.1: submit each kind of item,
//! cancel, requeue, count active jobs (the `gantry_jobs` gauge), list a node's running jobs,
//! read every job's final state (paged listing), the 3-replica service and the scheduling
//! cycle histogram. Shared by the benchmark and its small version in the suite.
//!
//! Owns: request bodies and answers. Does not own the processes (the benchmark's
//! `gantry_cluster.rs`, or the suite's harness).

use super::day::{Cluster, Kind, Res, task_script};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The queue of the day's service, whose replicas never end while it runs.
pub const SERVE: &str = "serve";

/// One HTTP client per caller thread is not needed: ureq's agent pools connections.
pub struct GantryApi {
    pub base: String,
    pub http: ureq::Agent,
}

fn body(mut resp: ureq::http::Response<ureq::Body>) -> Res<(u16, String)> {
    let status = resp.status().as_u16();
    let text = resp
        .body_mut()
        .with_config()
        .limit(1 << 30)
        .read_to_string()?;
    Ok((status, text))
}

impl GantryApi {
    pub fn new(base: &str) -> Self {
        let http = ureq::Agent::new_with_config(
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .proxy(None)
                .timeout_global(Some(Duration::from_secs(120)))
                .build(),
        );
        Self {
            base: base.to_string(),
            http,
        }
    }

    pub fn get(&self, path: &str) -> Res<Value> {
        let (status, text) = body(self.http.get(format!("{}{path}", self.base)).call()?)?;
        if status != 200 {
            return Err(format!("GET {path} answered {status}: {text}").into());
        }
        Ok(serde_json::from_str(&text)?)
    }

    pub fn post(&self, path: &str, json: &Value) -> Res<(u16, Value)> {
        let (status, text) = body(
            self.http
                .post(format!("{}{path}", self.base))
                .send_json(json)?,
        )?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    pub fn put(&self, path: &str, json: &Value) -> Res<(u16, Value)> {
        let (status, text) = body(
            self.http
                .put(format!("{}{path}", self.base))
                .send_json(json)?,
        )?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    /// The job spec of one item.
    pub fn spec(kind: Kind, marker: &Path) -> Value {
        let task = |count: u32, gpus: u32| json!([{"count": count, "gpus": gpus, "cpu_milli": 1000, "memory_mib": 256}]);
        let mut spec = json!({
            "name": format!("day-{}", kind.label()),
            "argv": ["/bin/sh", "-c", task_script(kind.sleep_s())],
            "env": {"M": marker.to_string_lossy()},
            "tasks": task(1, 1),
            "time_limit_s": if kind == Kind::Cancelled { 600 } else { 60 },
        });
        match kind {
            Kind::Array { members } => {
                spec["array"] = json!({"indices": (0..members).collect::<Vec<_>>()});
            }
            Kind::Gang { nodes } => spec["tasks"] = task(nodes, 8),
            Kind::Interactive => spec["kind"] = json!("interactive"),
            _ => {}
        }
        spec
    }

    /// Submits an item; the ids of its jobs.
    pub fn submit(&self, kind: Kind, marker: &Path) -> Res<Vec<String>> {
        let (status, answer) = self.post("/v1/jobs", &Self::spec(kind, marker))?;
        if status != 201 {
            return Err(format!("submit answered {status}: {answer}").into());
        }
        if let Some(ids) = answer["array_job_ids"].as_array() {
            return Ok(ids.iter().map(|i| i.to_string()).collect());
        }
        Ok(vec![answer["id"].as_u64().ok_or("no id")?.to_string()])
    }

    /// A gang of one 8-GPU rank per node on `nodes` nodes; its id.
    pub fn submit_wide(&self, nodes: usize, marker: &Path) -> Res<String> {
        let spec = json!({
            "name": "day-wide",
            "argv": ["/bin/sh", "-c", super::day::wide_script()],
            "env": {"M": marker.to_string_lossy()},
            "tasks": [{"count": nodes, "gpus": 8, "cpu_milli": 1000, "memory_mib": 256}],
            "time_limit_s": 60,
        });
        let (status, answer) = self.post("/v1/jobs", &spec)?;
        if status != 201 {
            return Err(format!("wide gang answered {status}: {answer}").into());
        }
        Ok(answer["id"].as_u64().ok_or("no id")?.to_string())
    }

    /// When job `id` was placed (its `start_ms`), seconds since the epoch.
    pub fn placed_at(&self, id: &str) -> Res<Option<f64>> {
        let job = self.get(&format!("/v1/jobs/{id}"))?;
        Ok(job["start_ms"].as_f64().map(|ms| ms / 1000.0))
    }

    pub fn cancel(&self, id: &str) -> Res<()> {
        let (status, answer) = self.post(&format!("/v1/jobs/{id}/cancel"), &json!({}))?;
        match status {
            200 | 202 => Ok(()),
            _ => Err(format!("cancel {id} answered {status}: {answer}").into()),
        }
    }

    /// `Ok(false)` while the job is not running yet (409).
    pub fn requeue(&self, id: &str) -> Res<bool> {
        let (status, answer) = self.post(&format!("/v1/jobs/{id}/requeue"), &json!({}))?;
        match status {
            200 | 202 => Ok(true),
            409 => Ok(false),
            _ => Err(format!("requeue {id} answered {status}: {answer}").into()),
        }
    }

    /// Pending plus running jobs, from `/metrics`, but for the service's (queue [`SERVE`]).
    pub fn active(&self) -> Res<usize> {
        Ok(self
            .gauges("gantry_jobs{")?
            .iter()
            .filter(|(k, _)| !k.contains(&format!("queue=\"{SERVE}\"")))
            .map(|(_, v)| *v)
            .sum::<f64>() as usize)
    }

    /// Samples of a metric family whose lines start with `prefix`: (labels, value).
    pub fn gauges(&self, prefix: &str) -> Res<Vec<(String, f64)>> {
        let (status, text) = body(self.http.get(format!("{}/metrics", self.base)).call()?)?;
        if status != 200 {
            return Err(format!("/metrics answered {status}").into());
        }
        Ok(text
            .lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| {
                let (k, v) = l.rsplit_once(' ')?;
                Some((k.to_string(), v.parse().ok()?))
            })
            .collect())
    }

    /// Pending jobs now.
    pub fn pending(&self) -> Res<usize> {
        Ok(self
            .gauges("gantry_jobs{")?
            .iter()
            .filter(|(k, _)| k.contains("state=\"pending\""))
            .map(|(_, v)| *v)
            .sum::<f64>() as usize)
    }

    /// The cycle-time histogram: cumulative counts by upper bound (seconds).
    pub fn cycle_buckets(&self) -> Res<Vec<(f64, f64)>> {
        Ok(self
            .gauges("gantry_cycle_duration_seconds_bucket{")?
            .into_iter()
            .filter_map(|(k, v)| {
                let le = k.split("le=\"").nth(1)?.split('"').next()?;
                let bound = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().ok()?
                };
                Some((bound, v))
            })
            .collect())
    }

    /// Ids of the jobs with a task running on `node`.
    pub fn jobs_on_node(&self, node: &str) -> Res<Vec<String>> {
        let jobs = self.get("/v1/jobs?state=running&limit=10000")?;
        Ok(jobs
            .as_array()
            .into_iter()
            .flatten()
            .filter(|j| {
                j["tasks"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|t| t["node"] == node && t["exit"].is_null())
            })
            .filter_map(|j| j["id"].as_u64().map(|i| i.to_string()))
            .collect())
    }

    /// Whether `node` is listed and not up.
    pub fn node_down(&self, node: &str) -> Res<bool> {
        let nodes = self.get("/v1/nodes")?;
        Ok(nodes
            .as_array()
            .into_iter()
            .flatten()
            .any(|n| n["name"] == node && n["state"] != "up"))
    }

    /// Nodes up.
    pub fn nodes_up(&self) -> Res<usize> {
        let nodes = self.get("/v1/nodes")?;
        Ok(nodes
            .as_array()
            .into_iter()
            .flatten()
            .filter(|n| n["state"] == "up")
            .count())
    }

    /// Every job's state, from the paged listing (newest first, 10,000 a page).
    pub fn final_states(&self) -> Res<BTreeMap<String, String>> {
        let mut states = BTreeMap::new();
        let mut after: Option<String> = None;
        loop {
            let path = match &after {
                Some(a) => format!("/v1/jobs?limit=10000&after={a}"),
                None => "/v1/jobs?limit=10000".to_string(),
            };
            let resp = self.http.get(format!("{}{path}", self.base)).call()?;
            let next = resp
                .headers()
                .get("x-next-after")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let (status, text) = body(resp)?;
            if status != 200 {
                return Err(format!("GET {path} answered {status}: {text}").into());
            }
            let page: Value = serde_json::from_str(&text)?;
            for j in page.as_array().into_iter().flatten() {
                if let (Some(id), Some(state)) = (j["id"].as_u64(), j["state"].as_str()) {
                    states.insert(id.to_string(), state.to_string());
                }
            }
            match next {
                Some(n) if Some(&n) != after.as_ref() => after = Some(n),
                _ => return Ok(states),
            }
        }
    }

    /// The day's pipeline: fair-share (`multifactor`) priority, EASY `backfill` placement,
    /// `priority-preempt`, all built-in wasm components.
    pub fn use_day_pipeline(&self) -> Res<()> {
        let pipeline = json!({
            "priority": [{"plugin": "multifactor"}],
            "placement": {"plugin": "backfill"},
            "preemption": {"plugin": "priority-preempt"},
        });
        let (status, answer) = self.put("/v1/policy", &pipeline)?;
        if status != 200 {
            return Err(format!("PUT /v1/policy answered {status}: {answer}").into());
        }
        Ok(())
    }

    /// A service of three replicas answering HTTP on their port, CPU only (a gateway, so
    /// that the wide gang can still take every GPU); its id.
    pub fn start_service(&self) -> Res<u64> {
        let server = "import http.server,os\nclass H(http.server.BaseHTTPRequestHandler):\n  def do_GET(s):\n    s.send_response(200); s.send_header('Content-Length','2'); s.end_headers(); s.wfile.write(b'ok')\n  def log_message(s,*a): pass\nhttp.server.HTTPServer(('127.0.0.1',int(os.environ['PORT'])),H).serve_forever()\n";
        let spec = json!({"name": "day-web", "kind": "service", "argv": ["python3", "-c", server],
            "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 100, "memory_mib": 64}],
            "queue": SERVE,
            "service": {"replicas": 3,
                "health": {"http_path": "/", "interval_s": 5, "failures": 3, "initial_delay_s": 2}}});
        let (status, answer) = self.post("/v1/services", &spec)?;
        if status != 201 {
            return Err(format!("POST /v1/services answered {status}: {answer}").into());
        }
        Ok(answer["id"].as_u64().ok_or("no service id")?)
    }

    /// The service's replicas that are running and healthy.
    pub fn healthy_replicas(&self, id: u64) -> Res<usize> {
        let view = self.get(&format!("/v1/services/{id}"))?;
        Ok(view["replica_jobs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["state"] == "running" && r["health"] == "healthy")
            .count())
    }

    pub fn stop_service(&self, id: u64) -> Res<()> {
        let (status, text) = body(
            self.http
                .delete(format!("{}/v1/services/{id}", self.base))
                .call()?,
        )?;
        if status >= 300 {
            return Err(format!("DELETE service answered {status}: {text}").into());
        }
        Ok(())
    }
}

/// A Gantry cluster of agent processes: what the day needs beyond the API is the agents
/// themselves. Every such cluster is a [`Cluster`] through the API (below), so the benchmark
/// and the suite's small version write only this.
pub trait GantryAgents: Sync {
    /// The cluster's API.
    fn api(&self) -> &GantryApi;
    /// Agent `i`'s node name.
    fn node_name(&self, i: usize) -> String;
    /// SIGKILLs agent `i` (its tasks live on).
    fn kill_agent(&self, i: usize) -> Res<()>;
    /// Starts agent `i` again on its data directory and waits until its node is up.
    fn restart_agent(&self, i: usize) -> Res<()>;
    /// How long a killed agent stays down.
    fn down_for(&self) -> Duration;
}

impl<T: GantryAgents> Cluster for T {
    fn submit(&self, _client: usize, kind: Kind, marker: &Path) -> Res<Vec<String>> {
        self.api().submit(kind, marker)
    }
    fn cancel(&self, id: &str) -> Res<()> {
        self.api().cancel(id)
    }
    fn requeue(&self, id: &str) -> Res<bool> {
        self.api().requeue(id)
    }
    fn active(&self) -> Res<usize> {
        self.api().active()
    }
    fn jobs_on_node(&self, i: usize) -> Res<Vec<String>> {
        self.api().jobs_on_node(&self.node_name(i))
    }
    fn node_down(&self, i: usize) -> Res<bool> {
        self.api().node_down(&self.node_name(i))
    }
    fn kill_node(&self, i: usize) -> Res<()> {
        self.kill_agent(i)
    }
    fn restart_node(&self, i: usize) -> Res<()> {
        self.restart_agent(i)
    }
    fn down_for(&self) -> Duration {
        GantryAgents::down_for(self)
    }
    fn submit_wide(&self, nodes: usize, marker: &Path) -> Res<String> {
        self.api().submit_wide(nodes, marker)
    }
    fn placed_at(&self, id: &str) -> Res<Option<f64>> {
        self.api().placed_at(id)
    }
}

/// p-quantile of a cumulative histogram between two samples, as the upper bound of the bucket
/// that holds it (the histogram's resolution).
pub fn bucket_quantile(before: &[(f64, f64)], after: &[(f64, f64)], q: f64) -> Option<f64> {
    let delta: Vec<(f64, f64)> = after
        .iter()
        .map(|(b, n)| {
            let was = before
                .iter()
                .find(|(bb, _)| bb == b)
                .map_or(0.0, |(_, n)| *n);
            (*b, n - was)
        })
        .collect();
    let total = delta.iter().map(|(_, n)| *n).fold(0.0, f64::max);
    if total <= 0.0 {
        return None;
    }
    let mut sorted = delta;
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    sorted
        .iter()
        .find(|(_, n)| *n >= q * total)
        .map(|(b, _)| *b)
}
