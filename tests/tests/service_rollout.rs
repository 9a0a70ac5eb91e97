//! Rolling updates of replicated services (issue 30): a client loop through the endpoint
//! sees no failed request while v1 is replaced by v2, a broken v3 is rolled back by
//! itself after its progress deadline (and never answers), a rollback by hand returns to
//! v1, and a replica killed with SIGKILL is restarted without a failed request. The
//! shared gateway reaches a service by its name, and the gateway and the endpoint close a
//! client that never finishes its headers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::services::{ClientLoop, fake_service, service_events, service_view};
use gantry_e2e::{Daemon, WAIT};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::time::Duration;

/// Waits until every live replica is of `revision`, running and healthy, `n` of them.
fn settled(d: &Daemon, id: u64, revision: u64, n: usize) -> Value {
    d.wait_for(
        &format!("{n} healthy replicas of revision {revision}"),
        WAIT * 3,
        || {
            let v = service_view(d, id);
            let replicas = v["replica_jobs"].as_array().cloned().unwrap_or_default();
            let ok = replicas.len() == n
                && replicas.iter().all(|r| {
                    r["revision"] == revision && r["health"] == "healthy" && r["draining"] == false
                });
            ok.then_some(v)
        },
    )
}

#[test]
fn rolling_updates_lose_no_request_and_a_broken_revision_rolls_back() {
    let d = Daemon::start(4);
    let spec = fake_service(
        "infer",
        json!({"VERSION": "v1", "DELAY_S": "0.02"}),
        json!({"replicas": 2, "rollout": {"max_surge": 1, "max_unavailable": 0, "progress_deadline_s": 120}}),
    );
    let (status, created) = d.post("/v1/services", &spec);
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_u64().unwrap();
    let v = settled(&d, id, 1, 2);
    let port = v["endpoint_port"].as_u64().unwrap();
    let url = format!("http://127.0.0.1:{port}/v1/completions");
    let clients = ClientLoop::start(&url, 2, Duration::from_secs(180));

    // v1 → v2: one new replica at a time, an old one drained once a new one is healthy.
    let (status, body) = d.post(
        &format!("/v1/services/{id}/update"),
        &json!({"env": {"VERSION": "v2"}}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["revision"], 2, "{body}");
    assert_eq!(body["rollout"]["state"], "progressing", "{body}");
    settled(&d, id, 2, 2);
    let v = d.wait_for("the rollout complete", WAIT, || {
        let v = service_view(&d, id);
        (v["rollout"]["state"] == "complete").then_some(v)
    });
    assert_eq!(v["history"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["history"][1]["change"], "env VERSION", "{v}");

    // v3 never becomes healthy: rolled back to 2 by itself after 8 s (this update's own
    // deadline); v2 keeps serving.
    let (status, body) = d.post(
        &format!("/v1/services/{id}/update"),
        &json!({"env": {"VERSION": "v3", "BROKEN": "1"},
                "rollout": {"max_surge": 1, "max_unavailable": 0, "progress_deadline_s": 8}}),
    );
    assert_eq!(status, 200, "{body}");
    let v = d.wait_for("the broken revision rolled back", WAIT, || {
        let v = service_view(&d, id);
        (v["rollout"]["state"] == "rolled-back").then_some(v)
    });
    assert_eq!(v["revision"], 2, "{v}");
    let reason = v["history"][2]["rolled_back"].as_str().unwrap_or_default();
    assert!(reason.contains("of revision 3 ready after 8 s"), "{v}");
    settled(&d, id, 2, 2);
    let log = service_events(&d, id);
    assert!(
        log.iter()
            .any(|e| e.contains("rolled back from revision 3 to 2")),
        "{log:?}"
    );

    // Back to v1 by hand, with time enough on a busy machine.
    let (status, body) = d.post(
        &format!("/v1/services/{id}/update"),
        &json!({"rollout": {"max_surge": 1, "max_unavailable": 0, "progress_deadline_s": 120}}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["revision"], 2,
        "no new revision for a strategy: {body}"
    );
    let (status, body) = d.post(
        &format!("/v1/services/{id}/rollback"),
        &json!({"revision": 1}),
    );
    assert_eq!(status, 200, "{body}");
    settled(&d, id, 1, 2);
    let before_kill = clients.tally();
    assert!(
        before_kill.ok.get("v1").is_some_and(|n| *n > 0),
        "{before_kill:?}"
    );

    // A replica killed outright: restarted in place; the endpoint retries on the other.
    let replica_port = v["replica_jobs"][0]["port"].as_u64();
    let replica = service_view(&d, id)["replica_jobs"][0].clone();
    let rport = replica["port"].as_u64().or(replica_port).unwrap();
    let pid: i32 = ureq::get(&format!("http://127.0.0.1:{rport}/pid"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap()
        .parse()
        .unwrap();
    // SAFETY: a plain kill(2) of the replica's own process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let job = replica["job"].as_u64().unwrap();
    d.wait_for("the killed replica restarted and healthy", WAIT * 2, || {
        let v = service_view(&d, id);
        let r = v["replica_jobs"]
            .as_array()?
            .iter()
            .find(|r| r["job"] == job)?
            .clone();
        (r["restarts"].as_u64()? >= 1 && r["health"] == "healthy").then_some(())
    });

    let tally = clients.stop();
    assert!(
        tally.failed.is_empty(),
        "failed requests: {:?}",
        tally.failed
    );
    assert!(tally.ok.get("v2").is_some_and(|n| *n > 0), "{tally:?}");
    assert!(
        !tally.ok.contains_key("v3"),
        "a revision never healthy answered: {tally:?}"
    );
    eprintln!("answers by version: {:?}", tally.ok);
}

#[test]
fn the_gateway_reaches_a_service_by_its_name() {
    let gateway = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let gport = gateway.local_addr().unwrap().port();
    drop(gateway);
    let d = Daemon::start_with_config(
        2,
        &format!(
            "[http]\nheader_read_timeout_s = 1\n[services]\ngateway = \"127.0.0.1:{gport}\"\n"
        ),
    );
    let spec = fake_service("chat", json!({"VERSION": "g1"}), json!({"replicas": 1}));
    let (status, created) = d.post("/v1/services", &spec);
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_u64().unwrap();
    settled(&d, id, 1, 1);
    let body = ureq::get(&format!("http://127.0.0.1:{gport}/chat/v1/completions?x=1"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    assert!(body.contains("\"g1\""), "{body}");
    let missing = ureq::get(&format!("http://127.0.0.1:{gport}/nope/v1/completions"))
        .config()
        .http_status_as_error(false)
        .build()
        .call()
        .unwrap();
    assert_eq!(missing.status(), 404);

    // A client that never finishes its headers is closed after `[http]
    // header_read_timeout_s`, on the gateway and on the service's own endpoint alike.
    let endpoint = created["endpoint_port"].as_u64().unwrap();
    for port in [u64::from(gport), endpoint] {
        let mut slow = std::net::TcpStream::connect(("127.0.0.1", port as u16)).unwrap();
        slow.write_all(b"GET /v1/completions HTTP/1.1\r\nHost: x\r\n")
            .unwrap();
        slow.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let t0 = std::time::Instant::now();
        let mut rest = Vec::new();
        // Closed (EOF, perhaps after a 408), not left open until the read times out.
        let closed = slow.read_to_end(&mut rest).is_ok();
        assert!(
            closed,
            "port {port} kept a slow client for {:?}",
            t0.elapsed()
        );
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    }
    // Bad updates are refused naming the field.
    let (status, body) = d.post(
        &format!("/v1/services/{id}/update"),
        &json!({"rollout": {"max_surge": 0, "max_unavailable": 0}}),
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "rollout.max_surge", "{body}");
    let (status, body) = d.post(&format!("/v1/services/{id}/rollback"), &json!({}));
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "revision", "{body}");
    let (status, body) = d.post(&format!("/v1/services/{id}/update"), &json!({"colour": 1}));
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "colour", "{body}");
}
