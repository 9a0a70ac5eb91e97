//! A site's first day as `docs/admin/install.md` tells it, with real processes on 127.0.0.1:
//! `gantry init` on the controller, two `gantry agent join` (one started from the written
//! configuration alone, one started by `join` itself) make a three-node cluster that runs
//! a gang across all three over TLS with each node's own credential; the refusals a join
//! can meet (a wrong CA hash, a spent, revoked or unknown token, a node name already taken)
//! each name their cause and write nothing; an agent's credential speaks for its node alone;
//! another protocol is refused naming the controller's version. And an upgrade: an agent
//! SIGTERMed and restarted from another binary while a 60-second job runs on it adopts the
//! job, which ends `succeeded` with its whole log and one accounting record.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::root::{CgroupParent, open_dir, require_root};
use gantry_e2e::site::{Site, free_port, gantry, text};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// `gantry ARGS` as `nobody` from `dir`, with nothing of the test's environment.
fn as_nobody(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(gantry_e2e::gantry_bin())
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .uid(65534)
        .gid(65534)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// `gantry submit ARGS` as `nobody` from `dir`, over the site's socket: the job's id.
fn submit_as_nobody(site: &Site, dir: &Path, args: &[&str]) -> u64 {
    let server = format!("unix:{}", site.socket().display());
    let out = as_nobody(dir, &[&["--server", &server, "submit"][..], args].concat());
    let said = text(&out);
    assert!(out.status.success(), "submit failed: {said}");
    said.split_whitespace()
        .skip_while(|w| *w != "job")
        .nth(1)
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("no job id in {said:?}"))
}

fn script(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// POSTs `body` to the controller's heartbeat route with `credential` and `node` header.
fn heartbeat(site: &Site, credential: &str, node: &str, body: &str) -> (u16, String) {
    let mut answer = https(site)
        .post(format!(
            "https://127.0.0.1:{}/cluster/v1/heartbeat",
            site.port
        ))
        .header("Authorization", &format!("Bearer {credential}"))
        .header("gantry-node", node)
        .header("Content-Type", "application/json")
        .send(body)
        .unwrap();
    let status = answer.status().as_u16();
    (
        status,
        answer.body_mut().read_to_string().unwrap_or_default(),
    )
}

/// GETs `path` from the controller over TLS with `token`.
fn api_get(site: &Site, token: &str, path: &str) -> (u16, String) {
    let mut answer = https(site)
        .get(format!("https://127.0.0.1:{}{path}", site.port))
        .header("Authorization", &format!("Bearer {token}"))
        .call()
        .unwrap();
    let status = answer.status().as_u16();
    (
        status,
        answer.body_mut().read_to_string().unwrap_or_default(),
    )
}

/// A client trusting the site's CA alone.
fn https(site: &Site) -> ureq::Agent {
    let ca = std::fs::read(site.ca()).unwrap();
    let certs: Vec<_> = ureq::tls::parse_pem(&ca)
        .filter_map(|i| match i {
            Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
            _ => None,
        })
        .collect();
    let tls = ureq::tls::TlsConfig::builder()
        .provider(ureq::tls::TlsProvider::Rustls)
        .root_certs(ureq::tls::RootCerts::new_with_certs(&certs))
        .build();
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .tls_config(tls)
            .build(),
    )
}

#[test]
fn the_configuration_gantry_init_writes_by_default_is_one_the_daemon_starts_on() {
    // Its default listens on every address: the daemon refuses that without API tokens,
    // so init gives the administrator one. Checked without binding a public address.
    let dir = tempfile::tempdir().unwrap();
    let etc = dir.path().join("etc");
    let out = gantry(&[
        "init",
        "--config-dir",
        &etc.display().to_string(),
        "--data-dir",
        &dir.path().join("ctl").display().to_string(),
        "--advertise",
        "gpu-head.example.org",
        "--quiet",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let config = gantry_config::Config::load(Some(&etc.join("gantry.toml"))).unwrap();
    assert_eq!(config.listen, "0.0.0.0:8420");
    let tokens = gantry_server::auth::Tokens::new(&config.auth).unwrap();
    let mode =
        gantry_server::auth::startup_mode(&tokens, &config.auth, config.listen.parse().unwrap());
    assert!(mode.is_ok(), "the daemon would refuse it: {mode:?}");
    let admin = std::fs::read_to_string(etc.join("admin-token")).unwrap();
    assert!(
        tokens.lookup(admin.trim()).is_some(),
        "the admin token is not the one configured"
    );
    // A second init refuses to overwrite the site.
    let again = gantry(&[
        "init",
        "--config-dir",
        &etc.display().to_string(),
        "--quiet",
    ]);
    assert!(!again.status.success() && text(&again).contains("initialised already"));
}

#[test]
fn init_and_two_joins_make_a_three_node_cluster_and_bad_joins_write_nothing() {
    require_root("starts daemons that run tasks as nobody");
    let mut site = Site::init(2, 2);
    // node-a: joined with --no-start, then started from the written configuration alone.
    let config_a = site.join_then_start("node-a", None);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(mode(&config_a).mode() & 0o777, 0o600);
    let key = config_a.parent().unwrap().join("pki").join("agent.key");
    assert_eq!(mode(&key).mode() & 0o777, 0o600);
    let written = std::fs::read_to_string(&config_a).unwrap();
    let cluster_token = std::fs::read_to_string(site.dir.path().join("etc/gantry.toml")).unwrap();
    let secret = cluster_token
        .lines()
        .find_map(|l| l.strip_prefix("token = "))
        .unwrap()
        .trim_matches('"')
        .to_string();
    assert!(
        !written.contains(&secret),
        "a node must never hold the cluster token"
    );
    // What a local user must not read: the controller's config (the cluster token), the
    // CA's and the controller's keys.
    for private in [
        "etc/gantry.toml",
        "etc/pki/ca.key",
        "etc/pki/controller.key",
    ] {
        let m = mode(&site.dir.path().join(private)).mode() & 0o777;
        assert_eq!(m, 0o600, "{private} is {m:o}");
    }
    // node-b: `gantry agent join` starts the agent itself (in the foreground: no systemd).
    let parent = CgroupParent::new("gantry-e2e-join-b");
    let mut args = site.join_args("node-b", "node-b", free_port(), None, None);
    args.extend(["--cgroup-parent".to_string(), parent.0.clone()]);
    let child = Command::new(gantry_e2e::gantry_bin())
        .args(&args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(site.dir.path().join("node-b-join.out")).unwrap())
        .stderr(std::fs::File::create(site.dir.path().join("node-b-join.err")).unwrap())
        .spawn()
        .unwrap();
    site.adopt("node-b", child);
    let local = site.nodes()[0]["name"].as_str().unwrap().to_string();
    site.wait_up(&[&local, "node-a", "node-b"]);

    // A gang over the three nodes, as nobody.
    let jobs = open_dir();
    let job = script(
        jobs.path(),
        "where.sh",
        "echo rank=$RANK node=$SLURMD_NODENAME",
    );
    let id = submit_as_nobody(
        &site,
        jobs.path(),
        &["-N", "3", "-n", "3", "--gpus", "2", &job],
    );
    let ended = site.wait_ended(id, Duration::from_secs(60));
    assert_eq!(ended["state"], "succeeded", "{ended}\n{}", site.logs());
    let mut seen = Vec::new();
    for task in 0..3 {
        let log = text(&site.cli(&["logs", &id.to_string(), "--task", &task.to_string()]));
        seen.push(log.trim().to_string());
    }
    for (rank, node) in [(0, local.as_str()), (1, "node-a"), (2, "node-b")] {
        let line = format!("rank={rank} node={node}");
        assert!(
            seen.iter().any(|l| l.contains(&line)),
            "{line} not in {seen:?}"
        );
    }

    // Refusals, each naming its cause, each writing nothing.
    let refused = |site: &Site, name: &str, token: Option<&str>, hash: Option<&str>, why: &str| {
        let mut args = site.join_args("refused", name, free_port(), token, hash);
        if name == "gpu-head" {
            args.extend(["--advertise".to_string(), "gpu-head.test".to_string()]);
        }
        let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
        args.push("--no-start");
        let out = gantry(&args);
        let said = text(&out);
        assert!(!out.status.success(), "{name} joined: {said}");
        assert!(said.contains(why), "{name}: expected {why:?} in {said:?}");
        assert!(said.contains("nothing was written"), "{said}");
        assert!(
            !site.dir.path().join("refused").exists(),
            "{name} left files"
        );
    };
    // init's token joined its two nodes: a third is refused by name.
    refused(
        &site,
        "node-c",
        None,
        None,
        "was already used (by node-a, node-b)",
    );
    let made = site.cli(&["token", "join", "--quiet"]);
    let fresh = String::from_utf8_lossy(&made.stdout).trim().to_string();
    assert!(fresh.starts_with("gjt_"), "{}", text(&made));
    let zeros = format!("sha256:{}", "0".repeat(64));
    refused(
        &site,
        "node-c",
        Some(&fresh),
        Some(&zeros),
        "presents a CA whose hash is",
    );
    refused(
        &site,
        "node-a",
        Some(&fresh),
        None,
        "node name node-a is taken",
    );
    // A join that could not write its configuration spends no token (checked first).
    let args = site.join_args("refused", "node-c", free_port(), Some(&fresh), None);
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.push("--no-start");
    let out = as_nobody(jobs.path(), &args);
    let said = text(&out);
    assert!(
        !out.status.success() && said.contains("cannot write the configuration"),
        "{said}"
    );
    let listed = text(&site.cli(&["token", "list"]));
    let fresh_id = fresh.split('.').next().unwrap();
    let row = listed
        .lines()
        .find(|l| l.starts_with(fresh_id))
        .unwrap_or_default();
    assert!(row.contains("valid"), "the token was spent: {listed}");
    // A node's certificate may not be valid for the controller's name.
    refused(
        &site,
        "gpu-head",
        Some(&fresh),
        None,
        "gpu-head.test is the controller's name",
    );
    let unknown = format!("{}.{}", &fresh[..12], "f".repeat(32));
    refused(&site, "node-c", Some(&unknown), None, "unknown join token");
    let id_part = fresh.split('.').next().unwrap();
    let revoked = site.cli(&["token", "revoke", id_part]);
    assert!(revoked.status.success(), "{}", text(&revoked));
    refused(&site, "node-c", Some(&fresh), None, "was revoked");
    let listed = text(&site.cli(&["token", "list"]));
    assert!(
        listed.contains("used") && listed.contains("revoked"),
        "{listed}"
    );
    assert!(
        !listed.contains(fresh.split('.').nth(1).unwrap()),
        "a secret was listed"
    );

    // A local user may not make or list join tokens (admin only).
    let server = format!("unix:{}", site.socket().display());
    for action in ["join", "list"] {
        let args = ["--server", &server, "token", action];
        let out = as_nobody(jobs.path(), &args);
        let said = text(&out);
        assert!(
            !out.status.success() && said.contains("403"),
            "nobody ran {args:?}: {said}"
        );
    }

    // A node's credential speaks for that node alone; another protocol is refused by name.
    let credential = written
        .lines()
        .find_map(|l| l.strip_prefix("node_credential = "))
        .unwrap()
        .trim_matches('"')
        .to_string();
    let (status, body) = heartbeat(&site, &credential, "node-b", r#"{"protocol": 2}"#);
    assert_eq!(status, 401, "node-a's credential spoke for node-b: {body}");
    let (status, body) = heartbeat(&site, &credential, "node-a", r#"{"protocol": 99}"#);
    assert_eq!(status, 409, "{body}");
    assert!(
        body.contains("protocol version 99") && body.contains("\"version\""),
        "{body}"
    );
    // Nor is it an API token.
    let (status, body) = api_get(&site, &credential, "/v1/jobs");
    assert_eq!(status, 401, "a node credential listed jobs: {body}");
    drop(parent);
}

#[test]
fn an_agent_restarted_from_another_binary_adopts_a_running_job_which_ends_whole() {
    require_root("starts daemons that run tasks as nobody");
    // The controller's own node has no GPU: the job can only run on the agent.
    let mut site = Site::init(1, 0);
    site.join_then_start("node-a", None);
    site.wait_up(&["node-a"]);
    let jobs = open_dir();
    let job = script(
        jobs.path(),
        "count.sh",
        "for i in $(seq 1 60); do echo line $i; sleep 1; done",
    );
    let id = submit_as_nobody(&site, jobs.path(), &["--gpus", "1", &job]);
    let log = |site: &Site| text(&site.cli(&["logs", &id.to_string()]));
    gantry_e2e::poll_until(
        "three lines of the job",
        Duration::from_secs(60),
        || site.logs(),
        || log(&site).contains("line 3\n").then_some(()),
    );
    // The upgrade: SIGTERM, then the agent from another binary on the same configuration.
    site.stop_agent("node-a");
    let newer = site.dir.path().join("gantry-newer");
    std::fs::copy(gantry_e2e::gantry_bin(), &newer).unwrap();
    site.start_agent("node-a", Some(&newer));
    let ended = site.wait_ended(id, Duration::from_secs(120));
    assert_eq!(ended["state"], "succeeded", "{ended}\n{}", site.logs());
    assert_eq!(ended["requeues"], 0, "{ended}");
    assert_eq!(ended["restarts"], 0, "{ended}");
    let whole = log(&site);
    for i in 1..=60 {
        let line = format!("line {i}\n");
        assert_eq!(whole.matches(&line).count(), 1, "{line:?} in {whole:?}");
    }
    let acct = site.cli(&["accounting", "--job", &id.to_string(), "--json"]);
    let acct: serde_json::Value = serde_json::from_slice(&acct.stdout).unwrap();
    let records = acct["records"].as_array().unwrap();
    assert_eq!(records.len(), 1, "{acct}");
    assert_eq!(ended["tasks"][0]["node"], "node-a", "{ended}");
}
