//! Issue 26, what a caller without identity may do and what other users see (attacks U4,
//! U5 and U10 of `docs/security.md`), against a real daemon in its default configuration
//! (no tokens, TCP on loopback, `auth.anonymous_role` at its default `user`):
//!
//! - U4: an anonymous TCP caller read another user's `env` and logs, drained the node, ran
//!   the collector, swapped the pipeline with unbounded plugin limits, cancelled another
//!   user's job, and `whoami` said `admin`;
//! - U5: anonymous submissions naming a real user were charged to that user (limits,
//!   accounting, job lists);
//! - U10: a user read another user's service health command and health error text.
//!
//! The other user's job is submitted over the Unix socket by root (who may submit for any
//! user, as SLURM's root may). Needs root for that; CI runs it as root.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::root::require_root;
use gantry_e2e::{Daemon, WAIT};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The daemon's defaults for callers without identity, tasks as the daemon's user.
const DEFAULTS: &str = "[auth]\nanonymous_role = \"user\"\n";

fn socket_of(d: &Daemon) -> PathBuf {
    d.out_dir().parent().unwrap().join("data/gantry.sock")
}

/// One request over the Unix socket (as this process's account, root): status and JSON.
fn socket_request(socket: &Path, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let mut stream = std::os::unix::net::UnixStream::connect(socket).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status: u16 = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"));
    let json = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    // A chunked body: take the JSON between the first `{` and the last `}`.
    let json = match (json.find('{'), json.rfind('}')) {
        (Some(a), Some(b)) if a < b => serde_json::from_str(&json[a..=b]).unwrap_or(Value::Null),
        _ => Value::Null,
    };
    (status, json)
}

fn refused(answer: (u16, Value), what: &str) {
    assert_eq!(answer.0, 403, "{what}: {}", answer.1);
}

#[test]
fn an_anonymous_caller_gets_the_least_and_is_one_user_whatever_it_claims() {
    require_root("this test submits over the socket as root");
    let d = Daemon::start_with_config(1, DEFAULTS);
    let socket = socket_of(&d);
    d.wait_for("the socket to answer", WAIT, || {
        socket
            .exists()
            .then(|| socket_request(&socket, "GET", "/v1/health", None))
            .filter(|(s, _)| *s == 200)
    });
    // bob's service (here `nobody`), with secrets where a careless user puts them.
    let secret = "bobs-password-0123";
    let bobs = json!({
        "name": "bobs-service",
        "user": "nobody",
        "kind": "service",
        "argv": ["sh", "-c", format!("echo {secret}; sleep 60")],
        "env": {"API_KEY": secret},
        "labels": {"note": secret},
        "service": {"port": 18_999, "health": {"command": ["sh", "-c", format!("curl -H 'Authorization: Bearer {secret}' x")]}},
        "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 100, "memory_mib": 64}],
    });
    let (status, body) = socket_request(&socket, "POST", "/v1/jobs", Some(&bobs));
    assert_eq!(status, 201, "{body}");
    let bob_job = body["job"]["id"]
        .as_u64()
        .or_else(|| body["id"].as_u64())
        .unwrap_or_else(|| panic!("{body}"));

    // Who an anonymous caller is.
    let (_, who) = d.get("/v1/whoami");
    assert_eq!(
        (&who["role"], &who["user"], &who["authenticated"]),
        (&json!("user"), &json!("anonymous"), &json!(false)),
        "{who}"
    );
    // It sees bob's job in the queue, never its secrets.
    let (status, seen) = d.get(&format!("/v1/jobs/{bob_job}"));
    assert_eq!(status, 200, "{seen}");
    let text = seen.to_string();
    assert!(
        !text.contains(secret),
        "a secret of bob's job showed: {text}"
    );
    assert_eq!(seen["spec"]["user"], "nobody");
    let (_, list) = d.get("/v1/jobs");
    assert!(!list.to_string().contains(secret), "{list}");
    // It may not act on bob's job, the node, the collector or the policy.
    refused(d.get(&format!("/v1/jobs/{bob_job}/logs")), "logs");
    refused(
        d.post(&format!("/v1/jobs/{bob_job}/cancel"), &json!({})),
        "cancel",
    );
    let (_, nodes) = d.get("/v1/nodes");
    let node = nodes
        .as_array()
        .and_then(|n| n.first())
        .map(|n| n["name"].as_str().unwrap_or_default().to_string())
        .unwrap_or_else(|| panic!("{nodes}"));
    refused(
        d.post(&format!("/v1/nodes/{node}/drain"), &json!({"reason": "x"})),
        "drain",
    );
    refused(d.post("/v1/admin/gc", &json!({})), "gc");
    let pipeline = json!({
        "priority": [{"plugin": "fifo"}],
        "placement": {"plugin": "first-fit"},
        "preemption": {"plugin": "priority-preempt"},
    });
    refused(d.put("/v1/policy", &pipeline), "policy");

    // Five submissions naming bob are the anonymous user's, not bob's.
    for n in 0..5 {
        let mut spec = json!({
            "name": format!("claims-bob-{n}"),
            "user": "nobody",
            "account": "nobody",
            "argv": ["true"],
            "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 100, "memory_mib": 64}],
        });
        let id = d.submit(&spec);
        let job = d.job(id);
        assert_eq!(job["spec"]["user"], "anonymous", "{job}");
        assert_eq!(job["spec"]["account"], "anonymous", "{job}");
        assert_eq!(job["spec"]["anonymous"], true, "{job}");
        // And its own job it sees whole.
        assert_eq!(job["spec"]["argv"], json!(["true"]), "{job}");
        spec["name"] = json!("unused");
    }
    let (_, bobs_list) = socket_request(&socket, "GET", "/v1/jobs?user=nobody", None);
    let names = bobs_list.to_string();
    assert!(!names.contains("claims-bob"), "bob's list: {names}");
    // Accounting: only the anonymous user's, and not bob's on request.
    refused(d.get("/v1/accounting?user=nobody"), "bob's accounting");

    // The admin on the socket may drain, and a pipeline's plugin limits are bounded.
    let mut greedy = pipeline.clone();
    greedy["placement"]["deadline_ms"] = json!(600_000);
    let (status, body) = socket_request(&socket, "PUT", "/v1/policy", Some(&greedy));
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]["field"]
            .as_str()
            .is_some_and(|f| f.ends_with("deadline_ms")),
        "{body}"
    );
    let (status, _) = socket_request(&socket, "POST", &format!("/v1/jobs/{bob_job}/cancel"), None);
    assert_eq!(status, 200);
}

#[test]
fn two_api_users_without_an_account_never_share_a_uid() {
    require_root("this test submits over the socket as root");
    let tokens = tempfile::tempdir().unwrap();
    let file = tokens.path().join("tokens.toml");
    let carol = gantry_e2e::token_into(&file, "carol", "ml", "user");
    let dave = gantry_e2e::token_into(&file, "dave", "ml", "user");
    // carol is mapped to an account of her own (`daemon` here); dave has none.
    let extra = format!(
        "{}\n[execution]\nrun_as_user = true\ncgroups = \"off\"\nuser_map = {{ carol = \"daemon\" }}\n",
        std::fs::read_to_string(&file).unwrap()
    );
    let d = Daemon::start_with_config(1, &extra);
    let spec = json!({
        "name": "who",
        "argv": ["id", "-un"],
        "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 100, "memory_mib": 64}],
    });
    let id = d.submit_as(&carol, &spec);
    d.wait_for("carol's job to end", WAIT, || {
        let (_, job) = d.get_as(&carol, &format!("/v1/jobs/{id}"));
        (job["state"] == "succeeded").then_some(())
    });
    let (_, log) = d.get_text_as(&carol, &format!("/v1/jobs/{id}/logs"));
    assert_eq!(log.trim(), "daemon", "carol runs as her mapped account");
    // dave would share the fallback account with every other stranger: refused at submit.
    let (status, body) = d.post_as(&dave, "/v1/jobs", &spec);
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &json!("user")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("user_map")),
        "{body}"
    );
}
