//! Issue 45 (a new user's first hour): a job in an image from a registry that answers over
//! plain HTTP, while `[containers] insecure_registries` does not list it, is refused at
//! submit naming `containers.insecure_registries` (it used to start, then fail with
//! skopeo's "server gave HTTP response to HTTPS client"); listed, it is accepted.
//!
//! Needs docker-registry (`.ci/run` installs it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::Daemon;
use gantry_e2e::images::Registry;
use serde_json::json;

fn image_job(image: &str) -> serde_json::Value {
    json!({"image": image, "argv": ["true"], "user": "nobody",
           "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 100, "memory_mib": 64}]})
}

#[test]
fn a_plain_http_registry_not_listed_as_insecure_is_refused_at_submit() {
    let registry = Registry::start();
    let image = format!("{}/team/trainer:v1", registry.addr);
    let d = Daemon::start_with_config(1, "[containers]\n");
    let (status, body) = d.post("/v1/jobs", &image_job(&image));
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "image", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("plain HTTP") && message.contains("containers.insecure_registries"),
        "{message}"
    );
    assert!(message.contains(&registry.addr), "{message}");

    // Listed as insecure: accepted (the pull is the node's business from here on).
    let listed = Daemon::start_with_config(
        1,
        &format!(
            "[containers]\ninsecure_registries = [\"{}\"]\n",
            registry.addr
        ),
    );
    let (status, body) = listed.post("/v1/jobs", &image_job(&image));
    assert!(status == 200 || status == 201, "{status} {body}");
}

#[test]
fn a_registry_that_is_not_there_is_left_to_the_pull() {
    // Nothing listens: the submit is not refused for TLS (the pull reports the registry).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let d = Daemon::start_with_config(1, "[containers]\n");
    let (status, body) = d.post("/v1/jobs", &image_job(&format!("127.0.0.1:{port}/img:v1")));
    assert!(
        !body.to_string().contains("insecure_registries"),
        "{status} {body}"
    );
}
