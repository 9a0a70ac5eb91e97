//! Bad requests get a 4xx with a JSON error naming what is wrong (`{"error": {"code",
//! "message", "field"?}}`), and nothing refused is stored.

use gantry_e2e::{Daemon, tasks};
use serde_json::{Value, json};

/// Asserts an error answer: status, code and, when given, the field.
fn expect_error(answer: (u16, Value), status: u16, code: &str, field: Option<&str>) -> Value {
    let (got, body) = answer;
    assert_eq!(got, status, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(!message.is_empty(), "error without a message: {body}");
    if let Some(f) = field {
        assert_eq!(body["error"]["field"], f, "{body}");
    }
    body
}

/// A valid job with one task group patched by `patch`.
fn job_with_task(patch: Value) -> Value {
    let mut spec = json!({"name": "bad", "argv": ["true"], "tasks": tasks(1, 1)});
    for (k, v) in patch.as_object().expect("object") {
        spec["tasks"][0][k] = v.clone();
    }
    spec
}

#[test]
fn malformed_and_invalid_jobs_are_refused_with_the_field() {
    let d = Daemon::start(4);
    expect_error(
        d.post_bytes("/v1/jobs", br#"{"argv": ["true"], "#),
        400,
        "invalid-json",
        None,
    );
    let body = expect_error(
        d.post("/v1/jobs", &json!({"argv": ["true"], "colour": "blue"})),
        400,
        "invalid-json",
        Some("colour"),
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("colour"))
    );
    for (patch, field) in [
        (json!({"count": 0}), "tasks[0].count"),
        (json!({"gpus": 1000}), "tasks[0].gpus"),
        (json!({"gpus": 0, "gpu_milli": 1500}), "tasks[0].gpu_milli"),
        (json!({"cpu_milli": 0}), "tasks[0].cpu_milli"),
        (json!({"memory_mib": 0}), "tasks[0].memory_mib"),
    ] {
        expect_error(
            d.post("/v1/jobs", &job_with_task(patch)),
            400,
            "invalid-field",
            Some(field),
        );
    }
    expect_error(
        d.post("/v1/jobs", &json!({"argv": [], "tasks": tasks(1, 0)})),
        400,
        "invalid-field",
        Some("argv"),
    );
    let (_, list) = d.get("/v1/jobs");
    assert_eq!(list, json!([]), "a refused job was stored");
}

#[test]
fn jobs_that_could_never_run_are_refused_and_not_stored() {
    let d = Daemon::start(4);
    let too_big = job_with_task(json!({"gpus": 16}));
    let body = expect_error(d.post("/v1/jobs", &too_big), 422, "unsatisfiable", None);
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("GPU")),
        "{body}"
    );
    let h100 = job_with_task(json!({"gpu_models": ["H100"]}));
    let body = expect_error(d.post("/v1/jobs", &h100), 422, "unsatisfiable", None);
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("H100")),
        "{body}"
    );
    let (status, list) = d.get("/v1/jobs");
    assert_eq!(
        (status, list),
        (200, json!([])),
        "an unsatisfiable job was stored"
    );
}

#[test]
fn bad_plugins_and_pipelines_are_refused() {
    let d = Daemon::start(4);
    expect_error(
        d.post_bytes("/v1/plugins", b"\0asm but not really a component"),
        422,
        "invalid-plugin",
        None,
    );
    let (_, before) = d.get("/v1/policy");
    let pipeline = json!({
        "priority": [{"plugin": "fifo"}],
        "placement": {"plugin": "no-such-plugin"},
    });
    expect_error(
        d.put("/v1/policy", &pipeline),
        422,
        "invalid-pipeline",
        Some("placement.plugin"),
    );
    let (_, after) = d.get("/v1/policy");
    assert_eq!(
        before["active"], after["active"],
        "a refused pipeline went live"
    );
}

#[test]
fn bad_ids_and_unknown_routes() {
    let d = Daemon::start(4);
    expect_error(d.get("/v1/jobs/abc"), 400, "invalid-id", Some("id"));
    expect_error(d.get("/v1/jobs/999999"), 404, "not-found", None);
    expect_error(d.get("/v1/no-such-thing"), 404, "not-found", None);
    expect_error(d.get("/nowhere"), 404, "not-found", None);
}
