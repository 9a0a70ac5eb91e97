//! Issue 16, items 4 and 7 (HTTP): each attack against a real daemon on 127.0.0.1, and it
//! failing.
//!
//! - A browser's cross-site form (`text/plain`, `multipart/form-data`,
//!   `application/x-www-form-urlencoded`) or a body without a type: 415 naming
//!   `content-type`, nothing stored.
//! - DNS rebinding (`Host: evil.example`): 421 naming `host`; a cross-site `Origin`: 403
//!   naming `origin`. The daemon's own address, `localhost` and `[http] allowed_hosts` work.
//! - `GET /v1/jobs?limit=100000000`: clamped (`X-Page-Limit: 10000`).
//! - A 5 MiB heartbeat without the cluster token: 401 before a byte of the body is read; a
//!   declared 9 MiB one with the token: 413.
//! - Idle connections: served up to `max_connections_per_ip`, the next one answered 503,
//!   served again once one closes; headers sent slowly, or silence on a kept-alive
//!   connection: closed after `header_read_timeout_s`.
//! - Streams past `max_streams_per_caller`: 429, per caller (token).
//! - Logs: `offset`/`limit` return the asked bytes, the default is the tail up to 8 MiB,
//!   and the headers say which bytes came.
//!
//! Requests go over raw TCP (`gantry_e2e::raw_http`) where the test needs headers the
//! harness does not send or return (Host, Origin, no Content-Type, response headers).

use gantry_e2e::raw_http::{
    Answer, addr, connect, exchange, get, get_as_host, read_answer, request,
};
use gantry_e2e::{Daemon, WAIT, token_into};
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A refusal must come within this.
const FAST: Duration = Duration::from_secs(10);

fn job_spec(d: &Daemon) -> Vec<u8> {
    d.shell_job("trust", 1, 0, "true").to_string().into_bytes()
}

#[test]
fn browser_forms_foreign_hosts_and_origins_are_refused() {
    let d = Daemon::start_with_config(1, "[http]\nallowed_hosts = [\"gantry.example.org\"]\n");
    let a = addr(&d);
    let spec = job_spec(&d);
    let port = a.rsplit(':').next().expect("port").to_string();

    // Cross-site forms: the three types a page may send without a preflight, and no type.
    for ct in [
        "text/plain",
        "text/plain;charset=UTF-8",
        "multipart/form-data; boundary=x",
        "application/x-www-form-urlencoded",
    ] {
        let (status, body) = d.post_typed("/v1/jobs", &spec, ct);
        assert_eq!(status, 415, "{ct}: {body}");
        assert_eq!(body["error"]["field"], "content-type", "{body}");
    }
    let (status, body) = d.post_typed("/v1/policy/rollback", b"{}", "text/plain");
    assert_eq!(
        (status, &body["error"]["field"]),
        (415, &json!("content-type"))
    );
    let (status, body) = d.post_typed("/v1/plugins", b"\0asm", "text/plain");
    assert_eq!(
        (status, &body["error"]["field"]),
        (415, &json!("content-type"))
    );
    let untyped = request(
        "POST",
        "/v1/jobs",
        &[("Host", &a), ("Connection", "close")],
        &spec,
    );
    exchange(&a, &untyped).refused(415, "content-type");
    assert_eq!(d.get("/v1/jobs").1, json!([]), "a refused job was stored");
    // JSON (with a charset) is what the routes take.
    let (status, body) = d.post_typed("/v1/jobs", &spec, "application/json; charset=utf-8");
    assert_eq!(status, 201, "{body}");

    // DNS rebinding: the browser names the attacker's host.
    let evil = format!("evil.example:{port}");
    get_as_host(&a, &evil, "/v1/jobs", &[]).refused(421, "host");
    let rebound_post = request(
        "POST",
        "/v1/jobs",
        &[
            ("Host", &evil),
            ("Content-Type", "application/json"),
            ("Connection", "close"),
        ],
        &spec,
    );
    exchange(&a, &rebound_post).refused(421, "host");
    get_as_host(&a, &evil, "/ui/", &[]).refused(421, "host");
    for ok in [
        a.clone(),
        format!("localhost:{port}"),
        format!("gantry.example.org:{port}"),
    ] {
        let answer = get_as_host(&a, &ok, "/v1/jobs", &[]);
        assert_eq!(answer.status, 200, "Host {ok}: {}", answer.text());
    }
    let (_, jobs) = d.get("/v1/jobs");
    assert_eq!(jobs.as_array().map(Vec::len), Some(1), "{jobs}");

    // A cross-site page's request (no body, so no type to check): refused by its Origin.
    let id = jobs[0]["id"].as_u64().expect("id");
    let cancel = |origin: &str| {
        let req = request(
            "POST",
            &format!("/v1/jobs/{id}/cancel"),
            &[("Host", &a), ("Origin", origin), ("Connection", "close")],
            b"",
        );
        exchange(&a, &req)
    };
    cancel("http://evil.example").refused(403, "origin");
    cancel("null").refused(403, "origin");
    let own = cancel(&format!("http://{a}"));
    assert_ne!(own.status, 403, "the daemon's own page: {}", own.text());
}

#[test]
fn a_huge_job_list_limit_is_clamped() {
    let d = Daemon::start(1);
    let a = addr(&d);
    let answer = get(&a, "/v1/jobs?limit=100000000", &[]);
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.header("x-page-limit"), Some("10000"));
    assert_eq!(answer.json(), json!([]));
    let answer = get(&a, "/v1/jobs?limit=5", &[]);
    assert_eq!(answer.header("x-page-limit"), Some("5"));
    let answer = get(&a, "/v1/jobs", &[]);
    assert_eq!(answer.header("x-page-limit"), Some("1000"), "the default");
}

const CLUSTER_TOKEN: &str = "e2e-trust-cluster-token-0123456789";

#[test]
fn a_heartbeat_is_refused_before_its_body_is_read() {
    let d = Daemon::start_with_config(1, &format!("[cluster]\ntoken = \"{CLUSTER_TOKEN}\"\n"));
    let a = addr(&d);
    let heartbeat = |auth: Option<String>, length: u64| {
        let length = length.to_string();
        let mut headers = vec![
            ("Host", a.as_str()),
            ("Content-Type", "application/json"),
            ("Content-Length", length.as_str()),
        ];
        if let Some(auth) = &auth {
            headers.push(("Authorization", auth.as_str()));
        }
        // The head only: the daemon must answer without waiting for the body.
        let started = Instant::now();
        let mut s = connect(&a);
        s.write_all(&request("POST", "/cluster/v1/heartbeat", &headers, b""))
            .expect("send");
        let answer = read_answer(&mut s, false).expect("an answer before the body");
        let took = started.elapsed();
        assert!(took < FAST, "took {took:?}");
        answer
    };
    // The cluster protocol's errors: `{"error": "...", "field": "..."}`.
    let refused = |answer: Answer, status: u16, field: &str| {
        let body = answer.json();
        assert_eq!(answer.status, status, "{body}");
        assert_eq!(body["field"], field, "{body}");
        assert!(
            body["error"].as_str().is_some_and(|m| !m.is_empty()),
            "{body}"
        );
    };
    let five_mib = 5 << 20;
    refused(heartbeat(None, five_mib), 401, "authorization");
    let wrong = Some("Bearer wrong-token-0123456789abcdef".to_string());
    refused(heartbeat(wrong, five_mib), 401, "authorization");
    let right = Some(format!("Bearer {CLUSTER_TOKEN}"));
    refused(heartbeat(right, 9 << 20), 413, "body");
    let (status, _) = d.get("/v1/health");
    assert_eq!(status, 200, "the daemon stopped serving");
}

/// Sends `GET /v1/health` (kept alive) on a new connection: the connection if answered 200,
/// else the answer (or `None` when it was closed first).
fn health_kept_alive(a: &str) -> Result<TcpStream, Option<Answer>> {
    let mut s = connect(a);
    let req = request("GET", "/v1/health", &[("Host", a)], b"");
    if s.write_all(&req).is_err() {
        return Err(None);
    }
    match read_answer(&mut s, false) {
        Ok(answer) if answer.status == 200 => Ok(s),
        Ok(answer) => Err(Some(answer)),
        Err(_) => Err(None),
    }
}

#[test]
fn connections_past_the_per_address_limit_are_refused_until_one_closes() {
    let d = Daemon::start_with_config(
        1,
        "[http]\nmax_connections = 64\nmax_connections_per_ip = 8\nheader_read_timeout_s = 300\n",
    );
    let a = addr(&d);
    let mut held = Vec::new();
    let mut refusal = None;
    for _ in 0..20 {
        match health_kept_alive(&a) {
            Ok(s) => held.push(s),
            Err(answer) => {
                refusal = Some(answer);
                break;
            }
        }
    }
    assert_eq!(held.len(), 8, "served connections before the first refusal");
    if let Some(Some(answer)) = refusal {
        answer.refused(503, "connection");
    }
    // A client that sends nothing is told why before it is closed.
    let mut silent = connect(&a);
    let answer = read_answer(&mut silent, false).expect("a 503 to a silent client");
    let error = answer.refused(503, "connection");
    assert_eq!(error["code"], "too-many-connections", "{error}");
    // One closes: a new connection is served again.
    held.pop();
    let again = d.wait_for("a connection to be served again", WAIT, || {
        health_kept_alive(&a).ok()
    });
    drop(again);
    drop(held);
}

#[test]
fn slow_headers_and_idle_kept_alive_connections_are_closed() {
    let d = Daemon::start_with_config(1, "[http]\nheader_read_timeout_s = 1\n");
    let a = addr(&d);
    // Headers one byte every 100 ms: 10 s to finish, closed after about 1 s.
    let mut s = connect(&a);
    let mut w = s.try_clone().expect("clone");
    let started = Instant::now();
    let writer = std::thread::spawn(move || {
        if w.write_all(b"GET /v1/health HTTP/1.1\r\nX-Slow: ").is_err() {
            return false;
        }
        for _ in 0..100 {
            if w.write_all(b"a").is_err() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        w.write_all(b"\r\n\r\n").is_ok()
    });
    let mut buf = [0u8; 1024];
    let read = s.read(&mut buf);
    let took = started.elapsed();
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "the slow client got an answer: {:?}",
        read.map(|n| String::from_utf8_lossy(&buf[..n]).into_owned())
    );
    assert!(took < Duration::from_secs(8), "closed only after {took:?}");
    let _ = s.shutdown(std::net::Shutdown::Both);
    assert!(
        !writer.join().expect("writer"),
        "the slow headers were all read"
    );
    // A kept-alive connection that goes quiet after an answer is closed too.
    let mut quiet = health_kept_alive(&a).unwrap_or_else(|e| panic!("health: {e:?}"));
    let started = Instant::now();
    let read = quiet.read(&mut buf);
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(started.elapsed() < Duration::from_secs(8));
    // Meanwhile prompt clients are served.
    let (status, _) = d.get("/v1/health");
    assert_eq!(status, 200);
}

/// Opens `path` as a stream with `token`: the connection when answered 200, else the
/// answer.
fn open_stream(a: &str, path: &str, token: &str) -> Result<TcpStream, Answer> {
    let mut s = connect(a);
    let auth = format!("Bearer {token}");
    s.write_all(&request(
        "GET",
        path,
        &[("Host", a), ("Authorization", &auth)],
        b"",
    ))
    .expect("send");
    let answer = read_answer(&mut s, true).expect("an answer");
    if answer.status == 200 {
        Ok(s)
    } else {
        Err(answer)
    }
}

#[test]
fn streams_past_the_per_caller_cap_are_429() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("tokens.toml");
    let alice = token_into(&file, "alice", "ml", "user");
    let bob = token_into(&file, "bob", "ml", "user");
    let config =
        std::fs::read_to_string(&file).expect("tokens") + "\n[http]\nmax_streams_per_caller = 2\n";
    let d = Daemon::start_with_config(1, &config);
    let a = addr(&d);
    let job = d.submit_as(&alice, &d.blocking_job("followed", 1, 0));
    d.task_env(job, 0);
    let attach = open_stream(&a, &format!("/v1/jobs/{job}/attach"), &alice)
        .unwrap_or_else(|e| panic!("attach: {} {}", e.status, e.text()));
    let stream = open_stream(&a, "/v1/stream", &alice)
        .unwrap_or_else(|e| panic!("stream: {} {}", e.status, e.text()));
    let third = open_stream(&a, "/v1/stream", &alice).expect_err("a third stream");
    let error = third.error(429);
    assert_eq!(error["code"], "too-many-streams", "{error}");
    let again = open_stream(&a, &format!("/v1/jobs/{job}/attach"), &alice).expect_err("attach");
    assert_eq!(again.status, 429, "{}", again.text());
    let bobs = open_stream(&a, "/v1/stream", &bob).expect("another caller has its own cap");
    // Alice closes her attach (its heartbeats reveal that): she may open one again.
    drop(attach);
    let reopened = d.wait_for("alice's stream slot to come back", WAIT, || {
        open_stream(&a, "/v1/stream", &alice).ok()
    });
    drop((stream, bobs, reopened));
    d.release(job);
}

#[test]
fn log_ranges_return_the_asked_bytes() {
    let d = Daemon::start(1);
    let a = addr(&d);
    let small = d.submit(&d.shell_job("small", 1, 0, "printf 0123456789abcdef"));
    let big = d.submit(&d.shell_job(
        "big",
        1,
        0,
        "head -c 9437184 /dev/zero | tr '\\0' a; printf END",
    ));
    d.wait_state(small, "succeeded");
    d.wait_state(big, "succeeded");
    let logs = |id: u64, q: &str| get(&a, &format!("/v1/jobs/{id}/logs{q}"), &[]);
    let range = |ans: &Answer| {
        (
            ans.header("x-log-offset").map(str::to_string),
            ans.header("x-log-next").map(str::to_string),
            ans.header("x-log-size").map(str::to_string),
        )
    };
    let s = |v: &str| Some(v.to_string());
    let whole = logs(small, "");
    assert_eq!(
        (whole.status, whole.text()),
        (200, "0123456789abcdef".into())
    );
    assert_eq!(range(&whole), (s("0"), s("16"), s("16")));
    let mid = logs(small, "?offset=4&limit=6");
    assert_eq!(mid.text(), "456789");
    assert_eq!(range(&mid), (s("4"), s("10"), s("16")));
    let tail = logs(small, "?limit=3");
    assert_eq!((tail.text(), range(&tail).0), ("def".into(), s("13")));
    let past = logs(small, "?offset=100&task=0");
    assert_eq!((past.status, past.text()), (200, String::new()));
    logs(small, "?limit=-1").refused(400, "query");
    // A 9 MiB log: its last 8 MiB by default, never more in one answer.
    let size = 9 * (1 << 20) + 3;
    let capped = logs(big, "");
    assert_eq!(capped.status, 200);
    assert_eq!(capped.body.len(), 8 << 20);
    assert!(capped.text().ends_with("aaaEND"));
    assert_eq!(
        range(&capped),
        (
            s(&(size - (8 << 20)).to_string()),
            s(&size.to_string()),
            s(&size.to_string())
        )
    );
    let head = logs(big, "?offset=0&limit=100000000");
    assert_eq!(head.body.len(), 8 << 20, "a huge limit is capped");
    // The harness (and `gantry logs`) still read a log as plain text.
    let (status, text) = d.get_text(&format!("/v1/jobs/{small}/logs?task=0"));
    assert_eq!((status, text.as_str()), (200, "0123456789abcdef"));
}
