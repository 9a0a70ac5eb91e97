//! What the replicated-service tests share (`tests/tests/service_rollout.rs`,
//! `service_autoscale.rs`): the fake inference server (`tests/services/fake_inference.py`,
//! run with `python3 -c` so that the job's user needs no access to the checkout), a
//! service spec built around it, reading a service and its events, and a client loop that counts every answer it gets
//! through an endpoint, failures included.

use crate::Daemon;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The fake inference server's source.
pub const FAKE_INFERENCE: &str = include_str!("../services/fake_inference.py");

/// A service named `name` of the fake server, one GPU per replica, health-checked on
/// `/health` every second; `env` for the server, `service` merged into `service`.
pub fn fake_service(name: &str, env: Value, service: Value) -> Value {
    let mut svc = json!({
        "health": {"http_path": "/health", "interval_s": 1, "failures": 2, "initial_delay_s": 0}
    });
    if let (Some(into), Some(from)) = (svc.as_object_mut(), service.as_object()) {
        for (k, v) in from {
            into.insert(k.clone(), v.clone());
        }
    }
    json!({"name": name, "kind": "service", "argv": ["python3", "-c", FAKE_INFERENCE],
           "env": env,
           "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 100, "memory_mib": 64}],
           "service": svc})
}

/// `GET /v1/services/{id}`, asserting 200.
pub fn service_view(d: &Daemon, id: u64) -> Value {
    let (status, view) = d.get(&format!("/v1/services/{id}"));
    assert_eq!(status, 200, "{view}");
    view
}

/// The messages of service `id`'s events, oldest first.
pub fn service_events(d: &Daemon, id: u64) -> Vec<String> {
    let (status, events) = d.get(&format!("/v1/services/{id}/events"));
    assert_eq!(status, 200, "{events}");
    events
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["message"].as_str().map(String::from))
        .collect()
}

/// What a client loop saw.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// Successful answers by the `version` they named.
    pub ok: BTreeMap<String, u64>,
    /// Failed requests: (elapsed ms, what happened).
    pub failed: Vec<(u128, String)>,
}

/// `clients` threads sending `GET url` one after another until stopped (or `limit` passes).
pub struct ClientLoop {
    stop: Arc<AtomicBool>,
    tally: Arc<Mutex<Tally>>,
    threads: Vec<JoinHandle<()>>,
}

impl ClientLoop {
    /// Starts the loop.
    pub fn start(url: &str, clients: usize, limit: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let tally = Arc::new(Mutex::new(Tally::default()));
        let t0 = Instant::now();
        let threads = (0..clients)
            .map(|_| {
                let (stop, tally, url) = (stop.clone(), tally.clone(), url.to_string());
                std::thread::spawn(move || {
                    let agent: ureq::Agent = ureq::Agent::config_builder()
                        .timeout_global(Some(Duration::from_secs(30)))
                        .http_status_as_error(false)
                        .build()
                        .into();
                    while !stop.load(Ordering::Relaxed) && t0.elapsed() < limit {
                        let answer = agent.get(&url).call();
                        let mut tally = tally.lock().unwrap_or_else(|p| p.into_inner());
                        match answer {
                            Ok(mut r) if r.status() == 200 => {
                                let body = r.body_mut().read_to_string().unwrap_or_default();
                                let v: Value = serde_json::from_str(&body).unwrap_or_default();
                                let version = v["version"].as_str().unwrap_or("?").to_string();
                                *tally.ok.entry(version).or_default() += 1;
                            }
                            Ok(mut r) => {
                                let body = r.body_mut().read_to_string().unwrap_or_default();
                                let what = format!("{}: {body}", r.status());
                                tally.failed.push((t0.elapsed().as_millis(), what));
                            }
                            Err(e) => tally.failed.push((t0.elapsed().as_millis(), e.to_string())),
                        }
                    }
                })
            })
            .collect();
        Self {
            stop,
            tally,
            threads,
        }
    }

    /// What it saw so far.
    pub fn tally(&self) -> Tally {
        self.tally.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Stops the clients; what they saw.
    pub fn stop(self) -> Tally {
        self.stop.store(true, Ordering::Relaxed);
        let tally = self.tally.clone();
        for t in self.threads {
            let _ = t.join();
        }
        tally.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
