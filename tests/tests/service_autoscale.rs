//! Autoscaling of replicated services (issue 30): load through the endpoint drives the
//! fake inference server's queue (`vllm:num_requests_waiting`) up, and the service from 1
//! to 3 replicas, then back to 1 when the load stops, each decision an event with the
//! values that caused it; an idle service scales to zero and a request wakes it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::services::{ClientLoop, fake_service, service_events, service_view};
use gantry_e2e::{Daemon, WAIT, gantry_bin};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn healthy(v: &Value) -> usize {
    v["replica_jobs"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter(|r| r["health"] == "healthy" && r["draining"] == false)
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn load_scales_a_service_up_and_back_down() {
    let d = Daemon::start(4);
    let spec = fake_service(
        "llm",
        json!({"SLOTS": "1", "DELAY_S": "0.2"}),
        json!({"autoscale": {"min_replicas": 1, "max_replicas": 3,
                             "metric": "vllm:num_requests_waiting", "target": 2,
                             "period_s": 1, "scale_down_window_s": 3}}),
    );
    let (status, created) = d.post("/v1/services", &spec);
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_u64().unwrap();
    assert_eq!(created["replicas"], 1, "{created}");
    let v = d.wait_for("one healthy replica", WAIT, || {
        let v = service_view(&d, id);
        (healthy(&v) == 1).then_some(v)
    });
    let port = v["endpoint_port"].as_u64().unwrap();

    // 8 clients against one slot: the queue grows, the service goes to its maximum.
    let url = format!("http://127.0.0.1:{port}/v1/completions");
    let t0 = Instant::now();
    let load = ClientLoop::start(&url, 8, Duration::from_secs(120));
    d.wait_for("three healthy replicas under load", WAIT * 3, || {
        let v = service_view(&d, id);
        (healthy(&v) == 3 && v["replicas"] == 3).then_some(())
    });
    eprintln!("load step → 3 serving: {} ms", t0.elapsed().as_millis());
    let tally = load.stop();
    assert!(tally.failed.is_empty(), "{:?}", tally.failed);
    let log = service_events(&d, id);
    let up = log
        .iter()
        .find(|e| e.contains("autoscaled 1 → "))
        .unwrap_or_else(|| panic!("no scale-up event: {log:?}"));
    assert!(up.contains("vllm:num_requests_waiting = "), "{up}");
    assert!(up.contains("target 2"), "{up}");

    // Load gone: back to the minimum after the 3 s window.
    let v = d.wait_for("back to one replica", WAIT * 2, || {
        let v = service_view(&d, id);
        let live = v["replica_jobs"].as_array().map_or(0, Vec::len);
        (v["replicas"] == 1 && live == 1).then_some(v)
    });
    let log = service_events(&d, id);
    assert!(log.iter().any(|e| e.contains(" → 1: ")), "{log:?}");
    let samples = v["scale_samples"].as_array().unwrap();
    assert!(samples.len() >= 3, "{v}");
    assert!(
        samples.iter().any(|s| s["value"].as_f64().unwrap() > 2.0),
        "{v}"
    );

    // The CLI prints the same decisions, and the history of a service.
    for (args, want) in [
        (vec!["events"], "autoscaled 1 → "),
        (vec!["history"], "created"),
        (vec!["show"], "vllm:num_requests_waiting"),
    ] {
        let id = id.to_string();
        let mut argv = vec!["--server", d.url(), "service"];
        argv.extend(args);
        argv.push(&id);
        let out = std::process::Command::new(gantry_bin())
            .args(&argv)
            .env_remove("GANTRY_TOKEN")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains(want),
            "{argv:?}: {text}"
        );
    }

    // A manual scale of an autoscaled service is refused, naming why.
    let (status, body) = d.post(&format!("/v1/services/{id}/scale"), &json!({"replicas": 2}));
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "autoscaled", "{body}");
}

#[test]
fn an_idle_service_scales_to_zero_and_a_request_wakes_it() {
    let d = Daemon::start(2);
    let spec = fake_service(
        "sleepy",
        json!({"VERSION": "z1"}),
        json!({"autoscale": {"min_replicas": 0, "max_replicas": 2,
                             "metric": "vllm:num_requests_waiting", "target": 4,
                             "period_s": 1, "scale_down_window_s": 0,
                             "scale_to_zero_after_s": 2}}),
    );
    let (status, created) = d.post("/v1/services", &spec);
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_u64().unwrap();
    let port = created["endpoint_port"].as_u64().unwrap();
    d.wait_for("one healthy replica", WAIT, || {
        (healthy(&service_view(&d, id)) == 1).then_some(())
    });
    d.wait_for("no replica left", WAIT, || {
        let v = service_view(&d, id);
        (v["replicas"] == 0 && v["replica_jobs"].as_array().is_some_and(Vec::is_empty))
            .then_some(())
    });
    // A request waits for the replica it starts.
    let t0 = Instant::now();
    let body = ureq::get(&format!("http://127.0.0.1:{port}/v1/completions"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    assert!(body.contains("\"z1\""), "{body}");
    eprintln!(
        "cold start through the endpoint: {} ms",
        t0.elapsed().as_millis()
    );
    assert_eq!(service_view(&d, id)["replicas"], 1);
    let log = service_events(&d, id);
    assert!(
        log.iter()
            .any(|e| e.contains("→ 0: ") && e.contains("no request for")),
        "{log:?}"
    );
    assert!(
        log.iter().any(|e| e.contains("0 → 1: a request arrived")),
        "{log:?}"
    );
}
