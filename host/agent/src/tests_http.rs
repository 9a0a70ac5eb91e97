//! Tests of the agent's HTTP side on real sockets: the token check (401 with a JSON body),
//! a launch from another protocol (409 naming `protocol`), signals to unknown tasks, free
//! ports, log reads; and the heartbeat loop against a stand-in controller (ends reported and
//! forgotten once acknowledged, unwanted tasks stopped, a refused token ends the loop).
//!
//! Owns only tests; the task table's are in `tests.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::heartbeat::{Beats, Controller, parse_loadavg, parse_mem_available_mib};
use super::tasks::{ACKED, TaskTable};
use super::tests::{GroupGuard, key, launch, request, table, wait_until};
use axum::Json;
use axum::extract::State;
use gantry_api::cluster::{
    FREE_PORT_PATH, FreePort, HEARTBEAT_PATH, Heartbeat, HeartbeatReply, LAUNCH_PATH, LaunchReply,
    ProtoError, SIGNAL_PATH,
};
use gantry_node::executor::TaskExit;
use std::sync::{Arc, Mutex};

const TOKEN: &str = "0123456789abcdef-agent-test";

/// Serves the agent's routes over `table` on a free loopback port; its base URL.
async fn serve(table: Arc<TaskTable>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = super::server::router(table, TOKEN, Arc::default());
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

fn http() -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build();
    ureq::Agent::new_with_config(config)
}

/// POSTs `body` (with `token` when given) from a blocking thread: status and body.
async fn post(url: String, token: Option<&str>, body: serde_json::Value) -> (u16, Vec<u8>) {
    let auth = token.map(|t| format!("Bearer {t}"));
    tokio::task::spawn_blocking(move || {
        let mut req = http().post(url);
        if let Some(a) = auth {
            req = req.header("Authorization", &a);
        }
        let mut resp = req.send_json(body).unwrap();
        (
            resp.status().as_u16(),
            resp.body_mut().read_to_vec().unwrap(),
        )
    })
    .await
    .unwrap()
}

async fn get(url: String) -> (u16, Vec<u8>) {
    tokio::task::spawn_blocking(move || {
        let mut resp = http()
            .get(url)
            .header("Authorization", &format!("Bearer {TOKEN}"))
            .call()
            .unwrap();
        (
            resp.status().as_u16(),
            resp.body_mut().read_to_vec().unwrap(),
        )
    })
    .await
    .unwrap()
}

fn proto_error(body: &[u8]) -> ProtoError {
    serde_json::from_slice(body).expect("a JSON ProtoError")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_wants_the_token_and_refusals_are_json() {
    let dir = tempfile::tempdir().unwrap();
    let base = serve(table(dir.path())).await;
    let launch_url = format!("{base}{LAUNCH_PATH}");
    let body = serde_json::to_value(request(key(1), &["true"])).unwrap();
    for token in [None, Some("0123456789abcdef-agent-tesT"), Some("short")] {
        let (status, bytes) = post(launch_url.clone(), token, body.clone()).await;
        assert_eq!(status, 401, "token {token:?}");
        assert!(proto_error(&bytes).error.contains("cluster token"));
    }
    let mut newer = body.clone();
    newer["protocol"] = (gantry_api::cluster::PROTOCOL_VERSION + 1).into();
    newer["something_new"] = "x".into();
    let (status, bytes) = post(launch_url.clone(), Some(TOKEN), newer).await;
    assert_eq!(status, 409);
    assert_eq!(proto_error(&bytes).field.as_deref(), Some("protocol"));

    let signal = serde_json::json!({"key": key(9), "signal": 15});
    let (status, bytes) = post(format!("{base}{SIGNAL_PATH}"), Some(TOKEN), signal).await;
    assert_eq!(status, 404, "an unknown task");
    assert_eq!(proto_error(&bytes).field.as_deref(), Some("key"));

    let (status, bytes) = get(format!("{base}{FREE_PORT_PATH}")).await;
    assert_eq!(status, 200);
    let port: FreePort = serde_json::from_slice(&bytes).unwrap();
    assert!(port.port > 0);

    let (status, bytes) = get(format!("{base}/agent/v1/tasks/9/0/9/log?offset=0")).await;
    assert_eq!(status, 404);
    assert!(proto_error(&bytes).error.contains("unknown"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launched_task_logs_and_can_be_signalled_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let table = table(dir.path());
    let base = serve(table.clone()).await;
    let req = request(key(3), &["sh", "-c", "echo hello-agent; sleep 30"]);
    let body = serde_json::to_value(&req).unwrap();
    let (status, bytes) = post(format!("{base}{LAUNCH_PATH}"), Some(TOKEN), body.clone()).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    let reply: LaunchReply = serde_json::from_slice(&bytes).unwrap();
    let _g = GroupGuard(reply.pid);
    let log_url = format!("{base}/agent/v1/tasks/7/0/3/log?offset=6&limit=5");
    let mut log = Vec::new();
    for _ in 0..500 {
        log = get(log_url.clone()).await.1;
        if !log.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(log, b"agent", "bytes 6..11 of the log");

    let stop = serde_json::json!({"key": key(3), "signal": 15, "grace_ms": 200});
    let (status, _) = post(format!("{base}{SIGNAL_PATH}"), Some(TOKEN), stop).await;
    assert_eq!(status, 200);
    let ended = || table.report().1.iter().any(|e| e.key == key(3));
    assert!(wait_until(ended).await, "the stop ended the task");
}

#[test]
fn load_figures_parse_from_proc() {
    assert_eq!(parse_loadavg("0.52 0.41 0.30 1/234 5678\n"), Some(0.52));
    let meminfo = "MemTotal:  16384000 kB\nMemAvailable:    2097152 kB\n";
    assert_eq!(parse_mem_available_mib(meminfo), Some(2048));
    assert_eq!(parse_mem_available_mib("MemTotal: 1 kB\n"), None);
}

/// A stand-in controller: records heartbeats, acknowledges every end and asks to stop
/// every running task; answers 401 to another token.
async fn controller(seen: Arc<Mutex<Vec<Heartbeat>>>) -> String {
    async fn beat(
        State(seen): State<Arc<Mutex<Vec<Heartbeat>>>>,
        headers: http::HeaderMap,
        Json(hb): Json<Heartbeat>,
    ) -> axum::response::Response {
        use axum::response::IntoResponse;
        let auth = headers.get("authorization").and_then(|h| h.to_str().ok());
        if !gantry_api::cluster_token::token_matches(auth, TOKEN) {
            let e = ProtoError {
                error: "bad token".into(),
                field: None,
                controller: None,
            };
            return (http::StatusCode::UNAUTHORIZED, Json(e)).into_response();
        }
        let reply = HeartbeatReply {
            acknowledged: hb.ended.iter().map(|e| e.key).collect(),
            stop: hb.running.iter().map(|r| r.key).collect(),
            heartbeat_interval_ms: 50,
            term: 0,
        };
        seen.lock().unwrap().push(hb);
        Json(reply).into_response()
    }
    let app = axum::Router::new()
        .route(HEARTBEAT_PATH, axum::routing::post(beat))
        .with_state(seen);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

fn beats(url: &str, token: &str, table: Arc<TaskTable>) -> Beats {
    Beats {
        controller: Controller::new(url, token, "agent-test", None).unwrap(),
        node: gantry_node::inventory::discover(&gantry_node::inventory::NodeConfig {
            name: "agent-test".into(),
            use_nvml: false,
            gpus: 2,
            ..Default::default()
        }),
        agent_url: "http://127.0.0.1:1".into(),
        addr: "127.0.0.1".into(),
        gpu_health: Arc::default(),
        table,
        ended: Arc::default(),
        terms: Arc::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_report_ends_until_acknowledged_and_stop_unwanted_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let table = table(dir.path());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let url = controller(seen.clone()).await;
    let started = launch(&table, &request(key(8), &["sleep", "30"])).await;
    let _g = GroupGuard(started.pid);
    let loop_ = tokio::spawn(beats(&url, TOKEN, table.clone()).run());
    let acked = table.dir(key(8)).join(ACKED);
    assert!(
        wait_until(|| acked.exists()).await,
        "stopped, reported, acknowledged"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0].node.name, "agent-test");
    assert_eq!(seen[0].running[0].key, key(8));
    let end = seen
        .iter()
        .find_map(|hb| hb.ended.first().copied())
        .unwrap();
    assert_eq!(end.exit, TaskExit::Signaled(libc::SIGTERM));
    assert!(table.report().1.is_empty());
    loop_.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_ends_the_heartbeat_loop_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let url = controller(Arc::default()).await;
    let run = beats(&url, "another-token-of-16-bytes", table(dir.path())).run();
    let e = tokio::time::timeout(super::tests::WAIT, run)
        .await
        .expect("the loop ends")
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("the controller refused this agent's credential (401): bad token"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_from_a_controller_whose_term_is_over_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let base = serve(table(dir.path())).await;
    let url = format!("{base}{}", gantry_api::cluster::FREE_PORT_PATH);
    let with_term = |term: i64| {
        let url = url.clone();
        tokio::task::spawn_blocking(move || {
            http()
                .get(url)
                .header("Authorization", &format!("Bearer {TOKEN}"))
                .header(gantry_api::cluster_term::TERM_HEADER, &term.to_string())
                .call()
                .unwrap()
                .status()
                .as_u16()
        })
    };
    assert_eq!(
        with_term(0).await.unwrap(),
        200,
        "a controller alone on sled"
    );
    assert_eq!(with_term(41).await.unwrap(), 200, "the first leader");
    assert_eq!(with_term(57).await.unwrap(), 200, "the next leader");
    assert_eq!(with_term(41).await.unwrap(), 409, "the deposed one");
    assert_eq!(with_term(0).await.unwrap(), 409);
}
