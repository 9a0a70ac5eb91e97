//! Benchmark: time from the REST call (`PUT /v1/policy`) to the new pipeline being
//! live, for cached plugins, with a queue of pending jobs for the dry run to chew on.
//!
//! `cargo bench -p gantry --bench hot_swap` starts the real `gantry` binary on
//! 127.0.0.1 with 4 fake GPUs, fills them with a blocker job, queues 200 jobs, uploads
//! `shortest-first`, then alternates the priority stage between `fifo` and
//! `shortest-first` and prints the client-side round trip and the server's `swap_ms`.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn call(agent: &ureq::Agent, method: &str, url: &str, body: Option<&Value>) -> Value {
    let resp = match (method, body) {
        ("PUT", Some(b)) => agent.put(url).send_json(b),
        ("POST", Some(b)) => agent.post(url).send_json(b),
        _ => agent.get(url).call(),
    };
    let mut resp = resp.expect("request");
    let text = resp.body_mut().read_to_string().expect("body");
    let v: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    assert!(resp.status().is_success(), "{method} {url}: {v}");
    v
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("gantry.toml");
    std::fs::write(
        &cfg,
        "cycle_interval_ms = 1000\n[auth]\nanonymous_role = \"admin\"\n",
    )
    .expect("config");
    let mut child = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--gpus",
            "4",
            "--no-nvml",
            "--config",
        ])
        .arg(&cfg)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start gantry");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let base = loop {
        let line = lines.next().expect("daemon exited").expect("read");
        if let Some(addr) = line.strip_prefix("gantry listening on ") {
            break addr.to_string();
        }
    };
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build(),
    );
    let job = |gpus: u32, limit: u64| json!({"argv": ["sleep", "600"], "tasks": [{"gpus": gpus, "cpu_milli": 10, "memory_mib": 16}], "time_limit_s": limit});
    let blocker = call(&agent, "POST", &format!("{base}/v1/jobs"), Some(&job(4, 0)));
    for i in 0..200u64 {
        call(
            &agent,
            "POST",
            &format!("{base}/v1/jobs"),
            Some(&job(1 + (i % 4) as u32, 60 + i)),
        );
    }
    let bytes = gantry_components::SHORTEST_FIRST;
    let up = agent
        .post(format!("{base}/v1/plugins"))
        .send(bytes)
        .expect("upload");
    assert!(up.status().is_success());
    let spec = |priority: &str| json!({"priority": [{"plugin": priority}], "placement": {"plugin": "first-fit"}, "preemption": {"plugin": "priority-preempt"}});
    let mut round_trips = Vec::new();
    let mut server = Vec::new();
    for i in 0..40 {
        let which = if i % 2 == 0 { "shortest-first" } else { "fifo" };
        let t = Instant::now();
        let r = call(
            &agent,
            "PUT",
            &format!("{base}/v1/policy"),
            Some(&spec(which)),
        );
        round_trips.push(t.elapsed());
        server.push(r["swap_ms"].as_f64().unwrap_or(f64::NAN));
    }
    round_trips.sort();
    server.sort_by(f64::total_cmp);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "hot swap with 200 pending jobs, cached plugins, 40 swaps alternating fifo / shortest-first"
    );
    println!(
        "client round trip (REST call -> live): median {:.2} ms, p90 {:.2} ms, max {:.2} ms",
        ms(round_trips[20]),
        ms(round_trips[36]),
        ms(round_trips[39])
    );
    println!(
        "server swap_ms (build + dry run + swap): median {:.2} ms, p90 {:.2} ms",
        server[20], server[36]
    );
    let _ = agent
        .post(format!("{base}/v1/jobs/{}/cancel", blocker["id"]))
        .send_json(json!({}));
    let _ = child.kill();
    let _ = child.wait();
}
