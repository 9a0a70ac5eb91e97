//! Identity and roles end to end (issue 9, item 1): one live daemon with four tokens made
//! by `gantry token create` (alice and bob are users, olga an operator, ada an admin),
//! a table-driven matrix of every route against {no token, bad token, alice (the job's
//! owner), bob (another user), olga, ada}; users kept out of each other's jobs and
//! accounts; a printed token working for the CLI; and the loopback-only rule.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::{Daemon, Serve, WAIT, create_token, gantry_bin, id_of, token_into};
use serde_json::{Value, json};
use std::process::Command;

/// Tokens of the test cluster, in matrix column order after "none" and "bad".
struct Cluster {
    d: Daemon,
    alice: String,
    bob: String,
    olga: String,
    ada: String,
}

fn cluster() -> Cluster {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    let make = |user: &str, accounts: &str, role: &str| token_into(&file, user, accounts, role);
    let (alice, bob) = (
        make("alice", "ml,vision", "user"),
        make("bob", "cv", "user"),
    );
    let (olga, ada) = (
        make("olga", "infra", "operator"),
        make("ada", "infra", "admin"),
    );
    let extra = std::fs::read_to_string(&file).unwrap();
    assert_eq!(extra.matches("[[auth.tokens]]").count(), 4, "{extra}");
    assert!(!extra.contains(&alice), "the config must hold hashes only");
    let d = Daemon::start_with_config(2, &extra);
    Cluster {
        d,
        alice,
        bob,
        olga,
        ada,
    }
}

fn sleeper(d: &Daemon, name: &str) -> Value {
    d.shell_job(name, 1, 0, "sleep 300")
}

const OPEN: [u16; 6] = [200; 6];
const READ: [u16; 6] = [401, 401, 200, 200, 200, 200];
const OWNER: [u16; 6] = [401, 401, 200, 403, 200, 200];
const MISSING: [u16; 6] = [401, 401, 404, 404, 404, 404];
const fn admin(ok: u16) -> [u16; 6] {
    [401, 401, 403, 403, 403, ok]
}

const OPERATOR: [u16; 6] = [401, 401, 403, 403, 200, 200];
const OPERATOR_MISSING: [u16; 6] = [401, 401, 403, 403, 404, 404];
/// An operator route refused for the state of its object (the local node cannot be removed).
const OPERATOR_CONFLICT: [u16; 6] = [401, 401, 403, 403, 409, 409];

const SUBMIT: [u16; 6] = [401, 401, 201, 201, 201, 201];

/// A request body in the matrix.
enum Body {
    Empty,
    Json(Value),
    Wasm,
}
use Body::{Empty, Json, Wasm};

#[test]
fn authorization_matrix_covers_every_route_and_role() {
    let c = cluster();
    let d = &c.d;
    let owned = d.submit_as(
        &c.alice,
        &d.shell_job("owned", 1, 0, "echo hello-from-alice"),
    );
    d.wait_for("alice's job to succeed", WAIT, || {
        let (_, j) = d.get_as(&c.ada, &format!("/v1/jobs/{owned}"));
        (j["state"] == "succeeded").then_some(())
    });
    let pipeline = json!({
        "priority": [{"plugin": "shortest-first", "config": {}}],
        "placement": {"plugin": "first-fit"},
    });
    let pipe = || Json(pipeline.clone());
    let replay = Json(json!({"pipeline": pipeline, "since_s": 60}));
    let node = d.get_as(&c.ada, "/v1/nodes").1[0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let drain = || Json(json!({"reason": "authorization matrix"}));
    let mut service_spec = sleeper(d, "svc");
    service_spec["kind"] = json!("service");
    service_spec["service"] = json!({"replicas": 1});
    let (status, created) = d.request_as(
        Some(&c.alice),
        "POST",
        "/v1/services",
        Some((service_spec.to_string().as_bytes(), "application/json")),
    );
    assert_eq!(status, 201, "{created}");
    let service: Value = serde_json::from_str(&created).unwrap();
    let service = service["id"].as_u64().unwrap().to_string();
    #[rustfmt::skip]
    let rows: Vec<(&str, &str, Body, [u16; 6])> = vec![
        ("GET",    "/v1/health",                 Empty, OPEN),
        ("GET",    "/metrics",                   Empty, OPEN),
        ("GET",    "/v1/openapi.json",           Empty, READ),
        ("POST",   "/v1/jobs",                   Json(sleeper(d, "m")), SUBMIT),
        ("GET",    "/v1/jobs",                   Empty, READ),
        ("POST",   "/v1/jobs/forecast",          Json(json!({"spec": sleeper(d, "w")})), READ),
        ("GET",    "/v1/jobs?user=alice",        Empty, READ),
        ("GET",    "/v1/jobs/{job}",             Empty, READ),
        ("GET",    "/v1/jobs/999999",            Empty, MISSING),
        ("GET",    "/v1/jobs/{job}/logs",        Empty, OWNER),
        ("GET",    "/v1/jobs/{job}/events",      Empty, OWNER),
        ("GET",    "/v1/jobs/{job}/decisions",   Empty, OWNER),
        ("GET",    "/v1/jobs/{job}/trace",       Empty, OWNER),
        ("GET",    "/v1/jobs/999999/logs",       Empty, MISSING),
        ("POST",   "/v1/jobs/{fresh}/cancel",    Empty, OWNER),
        ("DELETE", "/v1/jobs/{fresh}",           Empty, OWNER),
        ("DELETE", "/v1/jobs/999999",            Empty, MISSING),
        ("GET",    "/v1/nodes",                  Empty, READ),
        ("GET",    "/v1/accounting",             Empty, READ),
        ("GET",    "/v1/accounting?user=alice",  Empty, OWNER),
        ("GET",    "/v1/faults",                 Empty, READ),
        ("GET",    "/v1/whoami",                 Empty, READ),
        ("GET",    "/v1/fairshare",              Empty, READ),
        ("GET",    "/v1/images",                 Empty, READ),
        ("POST",   "/v1/services",               Json(service_spec.clone()), SUBMIT),
        ("GET",    "/v1/services",               Empty, READ),
        ("GET",    "/v1/services/{service}",     Empty, READ),
        ("GET",    "/v1/services/999999",        Empty, MISSING),
        ("GET",    "/v1/services/{service}/events", Empty, OWNER),
        ("POST",   "/v1/services/{service}/scale", Json(json!({"replicas": 1})), OWNER),
        ("POST",   "/v1/services/{service}/update", Json(json!({"rollout": {"max_surge": 2}})), OWNER),
        ("POST",   "/v1/services/{service}/rollback", Json(json!({"revision": 1})), [401, 401, 400, 403, 400, 400]),
        ("DELETE", "/v1/services/{service}",     Empty, OWNER),
        ("POST",   "/v1/plugins",                Wasm,  admin(201)),
        ("GET",    "/v1/plugins",                Empty, READ),
        ("GET",    "/v1/policy",                 Empty, READ),
        ("PUT",    "/v1/policy",                 pipe(), admin(200)),
        ("POST",   "/v1/policy/rollback",        Empty, admin(200)),
        ("GET",    "/v1/policy/history",         Empty, READ),
        ("PUT",    "/v1/policy/shadow",          pipe(), admin(200)),
        ("GET",    "/v1/policy/shadow",          Empty, READ),
        ("GET",    "/v1/policy/shadow/diff",     Empty, READ),
        ("POST",   "/v1/replay",                 replay, admin(200)),
        ("DELETE", "/v1/policy/shadow",          Empty, admin(200)),
        ("POST",   "/v1/admin/gc",               Empty, admin(200)),
        // No cluster CA here (gantry init): an admin is told so (409).
        ("POST",   "/v1/join-tokens",            Json(json!({"ttl_s": 600})), admin(409)),
        ("GET",    "/v1/join-tokens",            Empty, admin(200)),
        ("DELETE", "/v1/join-tokens/gjt_ffffffff", Empty, admin(404)),
        ("POST",   "/v1/nodes/{node}/drain",     drain(), OPERATOR),
        ("POST",   "/v1/nodes/{node}/resume",    Empty, OPERATOR),
        ("POST",   "/v1/nodes/no-such-node/drain", drain(), OPERATOR_MISSING),
        ("DELETE", "/v1/nodes/{node}",           Empty, OPERATOR_CONFLICT),
        ("GET",    "/v1/no-such-route",          Empty, MISSING),
    ];
    let callers: [(&str, Option<&str>); 6] = [
        ("no token", None),
        ("bad token", Some("gantry_not-a-real-token")),
        ("alice (owner)", Some(&c.alice)),
        ("bob (other user)", Some(&c.bob)),
        ("olga (operator)", Some(&c.olga)),
        ("ada (admin)", Some(&c.ada)),
    ];
    let mut failures = Vec::new();
    for (method, template, body, expected) in &rows {
        for ((who, token), want) in callers.iter().zip(expected) {
            let mut path = template
                .replace("{job}", &owned.to_string())
                .replace("{node}", &node)
                .replace("{service}", &service);
            if path.contains("{fresh}") {
                let fresh = d.submit_as(&c.alice, &sleeper(d, "fresh"));
                path = path.replace("{fresh}", &fresh.to_string());
            }
            let bytes = match body {
                Empty => None,
                Json(v) => Some((v.to_string().into_bytes(), "application/json")),
                // A refused upload is answered before its body is read; a client that
                // is still writing a large body then sees a broken pipe instead of the
                // status, so only the accepted upload carries the real component.
                Wasm if *want == 201 => Some((
                    gantry_components::SHORTEST_FIRST.to_vec(),
                    "application/wasm",
                )),
                Wasm => Some((b"\0asm".to_vec(), "application/wasm")),
            };
            let (status, text) = d.request_as(
                *token,
                method,
                &path,
                bytes.as_ref().map(|(b, t)| (&b[..], *t)),
            );
            if status != *want {
                failures.push(format!(
                    "{method} {path} as {who}: {status}, expected {want}: {text}"
                ));
                continue;
            }
            if matches!(status, 401 | 403) {
                let v: Value = serde_json::from_str(&text).unwrap();
                let (code, field) = (&v["error"]["code"], &v["error"]["field"]);
                let ok = match status {
                    401 => code == "unauthenticated" && field == "authorization",
                    _ => code == "forbidden" && v["error"]["message"].as_str().is_some(),
                };
                assert!(ok, "{method} {path} as {who}: body {text}");
            }
        }
    }
    assert!(
        failures.is_empty(),
        "authorization matrix:\n{}",
        failures.join("\n")
    );
}

#[test]
fn users_stay_out_of_each_others_jobs_and_accounts() {
    let c = cluster();
    let d = &c.d;
    let mine = d.submit_as(&c.alice, &d.blocking_job("alice-job", 1, 0));
    let rec = d.get_as(&c.alice, &format!("/v1/jobs/{mine}")).1;
    assert_eq!(
        (&rec["spec"]["user"], &rec["spec"]["account"]),
        (&json!("alice"), &json!("ml"))
    );
    d.task_env(mine, 0);

    for path in ["logs", "events", "decisions"] {
        let (status, v) = d.request_as(
            Some(&c.bob),
            "GET",
            &format!("/v1/jobs/{mine}/{path}"),
            None,
        );
        assert_eq!(status, 403, "bob read alice's {path}: {v}");
        assert!(v.contains("belongs to user alice"), "{v}");
    }
    let (status, v) = d.post_as(&c.bob, &format!("/v1/jobs/{mine}/cancel"), &json!({}));
    assert_eq!(status, 403, "{v}");
    let (status, v) = d.delete_as(&c.bob, &format!("/v1/jobs/{mine}"));
    assert_eq!(status, 403, "{v}");
    assert_eq!(
        d.get_as(&c.alice, &format!("/v1/jobs/{mine}")).1["state"],
        "running"
    );
    let (_, listed) = d.get_as(&c.bob, "/v1/jobs?user=alice");
    assert_eq!(
        id_of(&listed[0]),
        mine,
        "users see the whole queue: {listed}"
    );

    // The token, not the body, names the user and the account.
    let mut spec = sleeper(d, "sneaky");
    spec["account"] = json!("ml");
    let (status, v) = d.post_as(&c.bob, "/v1/jobs", &spec);
    assert_eq!(
        (status, &v["error"]["field"]),
        (403, &json!("account")),
        "{v}"
    );
    spec["account"] = json!("");
    spec["user"] = json!("alice");
    let (status, v) = d.post_as(&c.bob, "/v1/jobs", &spec);
    assert_eq!((status, &v["error"]["field"]), (403, &json!("user")), "{v}");
    spec["user"] = json!("bob");
    let theirs = d.submit_as(&c.bob, &spec);
    let rec = d.get_as(&c.bob, &format!("/v1/jobs/{theirs}")).1;
    assert_eq!(
        (&rec["spec"]["user"], &rec["spec"]["account"]),
        (&json!("bob"), &json!("cv"))
    );
    let mut second = sleeper(d, "second-account");
    second["account"] = json!("vision");
    let (status, v) = d.post_as(&c.alice, "/v1/jobs", &second);
    assert_eq!(
        (status, &v["spec"]["account"]),
        (201, &json!("vision")),
        "{v}"
    );

    // Her own logs are hers to read; an operator may cancel anyone's job.
    let (status, _) = d.get_text_as(&c.alice, &format!("/v1/jobs/{mine}/logs"));
    assert_eq!(status, 200);
    let (status, v) = d.post_as(&c.olga, &format!("/v1/jobs/{mine}/cancel"), &json!({}));
    assert_eq!(status, 200, "{v}");
    d.wait_for("the operator's cancel", WAIT, || {
        let (_, j) = d.get_as(&c.alice, &format!("/v1/jobs/{mine}"));
        (j["state"] == "cancelled").then_some(())
    });
    let (status, v) = d.delete_as(&c.bob, &format!("/v1/jobs/{theirs}"));
    assert_eq!(status, 200, "bob cancels his own job: {v}");
}

#[test]
fn a_created_token_works_for_the_api_and_the_cli() {
    let created = create_token(&["--user", "carol", "--accounts", "lab", "--role", "user"]);
    let snippet = created.snippet();
    assert!(snippet.contains("user = \"carol\""), "{snippet}");
    assert!(!snippet.contains(&created.token), "{snippet}");
    let d = Daemon::start_with_config(1, &snippet);
    assert!(
        d.log_tail().contains("1 API token(s) configured"),
        "{}",
        d.log_tail()
    );
    let (status, v) = d.get_as(&created.token, "/v1/jobs");
    assert_eq!(status, 200, "{v}");
    assert_eq!(d.request_as(None, "GET", "/v1/jobs", None).0, 401);

    let dir = tempfile::tempdir().unwrap();
    let cli = |env_token: Option<&str>, args: &[&str]| {
        let mut cmd = Command::new(gantry_bin());
        cmd.env_remove("GANTRY_TOKEN")
            .env("HOME", dir.path())
            .env_remove("XDG_CONFIG_HOME")
            .args(["--server", d.url()])
            .args(args);
        if let Some(t) = env_token {
            cmd.env("GANTRY_TOKEN", t);
        }
        cmd.output().unwrap()
    };
    let out = cli(None, &["jobs"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("401"),
        "{out:?}"
    );

    let out = cli(
        Some(&created.token),
        &["submit", "--name", "via-cli", "--", "true"],
    );
    assert!(out.status.success(), "{out:?}");
    let (_, jobs) = d.get_as(&created.token, "/v1/jobs");
    let job = &jobs.as_array().unwrap()[0];
    assert_eq!(
        (&job["spec"]["user"], &job["spec"]["account"]),
        (&json!("carol"), &json!("lab"))
    );

    let file = dir.path().join("tok");
    std::fs::write(&file, format!("{}\n", created.token)).unwrap();
    let out = cli(
        None,
        &[
            "--token-file",
            file.to_str().unwrap(),
            "job",
            &id_of(job).to_string(),
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let default = dir.path().join(".config/gantry");
    std::fs::create_dir_all(&default).unwrap();
    std::fs::rename(&file, default.join("token")).unwrap();
    let out = cli(None, &["nodes"]);
    assert!(
        out.status.success(),
        "the default token file is read: {out:?}"
    );
}

#[test]
fn without_tokens_it_serves_only_on_loopback_unless_allowed() {
    let d = Daemon::start(1);
    assert!(
        d.log_tail().contains("gantry auth: off"),
        "{}",
        d.log_tail()
    );
    assert_eq!(d.get("/v1/jobs").0, 200, "no tokens: open on loopback");

    let mut refused = Serve::start("0.0.0.0:0", "");
    let status = refused.wait_listening_or_exit().expect("it should refuse");
    let stderr = refused.stderr();
    assert!(!status.success(), "{stderr}");
    assert!(stderr.contains("refusing to listen on 0.0.0.0"), "{stderr}");
    assert!(stderr.contains("allow_unauthenticated"), "{stderr}");

    let mut allowed = Serve::start("0.0.0.0:0", "[auth]\nallow_unauthenticated = true\n");
    let exit = allowed.wait_listening_or_exit();
    assert!(exit.is_none(), "{exit:?}: {}", allowed.stderr());
    let stderr = allowed.stderr();
    assert!(
        stderr.contains("WARNING: AUTHENTICATION IS OFF"),
        "{stderr}"
    );
}
