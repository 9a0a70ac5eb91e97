//! Issue 43, findings 11 to 14, end to end against real daemons on 127.0.0.1: a change to
//! a pending job goes back through submit-time admission (a queue's `max_time_limit_s`);
//! a hold an operator set is not lifted by the job's owner; a controller refuses an etcd
//! any local process may read and write unless told it is isolated, works with etcd's
//! users and a 0600 password file, and a standby checks `Host` as the leader does; the
//! history database's password in a configuration file others may read is refused, and a
//! 0600 password file works (`gantry store migrate` takes no password in its arguments).
//!
//! etcd and PostgreSQL are the distribution's (`apt-get install etcd-server postgresql`),
//! started by the test; a machine without them fails the test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::{Daemon, controllers, raw_http, token_into};
use gantry_store::test_etcd::TestEtcd;
use gantry_store::test_postgres::TestPostgres;
use serde_json::{Value, json};
use std::time::Duration;

/// A daemon with `gpus` GPUs and tokens for alice (user), olga (operator) and adam
/// (admin); returns the daemon and the three tokens.
fn with_roles(gpus: u32) -> (Daemon, String, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    let alice = token_into(&file, "alice", "ml", "user");
    let olga = token_into(&file, "olga", "infra", "operator");
    let adam = token_into(&file, "adam", "infra", "admin");
    let tokens = std::fs::read_to_string(&file).unwrap();
    let d = Daemon::start_with_config(gpus, &tokens);
    (d, alice, olga, adam)
}

/// `PATCH url/v1/jobs/ID` with `body` as `token` (the harness has no PATCH helper).
fn patch(d: &Daemon, token: &str, id: u64, body: &Value) -> (u16, Value) {
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .timeout_global(Some(Duration::from_secs(30)))
            .build(),
    );
    let mut answer = agent
        .patch(format!("{}/v1/jobs/{id}", d.url()))
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .send(body.to_string().as_bytes())
        .unwrap();
    let status = answer.status().as_u16();
    let text = answer.body_mut().read_to_string().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn time_limit(d: &Daemon, token: &str, id: u64) -> Value {
    let (status, job) = d.get_as(token, &format!("/v1/jobs/{id}"));
    assert_eq!(status, 200, "{job}");
    job["spec"]["time_limit_s"].clone()
}

#[test]
fn raising_a_pending_jobs_time_past_its_queues_limit_is_refused_as_at_submit() {
    let (d, alice, _olga, adam) = with_roles(1);
    let (status, body) = d.put_as(
        &adam,
        "/v1/policy",
        &json!({
            "admission": [{"plugin": "queue-limits",
                           "config": {"queues": {"short": {"max_time_limit_s": 600}}}}],
            "priority": [{"plugin": "fifo"}],
            "placement": {"plugin": "first-fit"},
        }),
    );
    assert_eq!(status, 200, "{body}");
    let mut spec = d.shell_job("short-one", 1, 0, "true");
    spec["queue"] = json!("short");
    spec["time_limit_s"] = json!(300);
    spec["hold"] = json!(true);
    // At submit the queue's limit holds: 1 day is refused, 5 minutes accepted.
    let mut long = spec.clone();
    long["time_limit_s"] = json!(86_400);
    let (status, body) = d.post_as(&alice, "/v1/jobs", &long);
    assert_eq!(status, 422, "{body}");
    let id = d.submit_as(&alice, &spec);
    // The attack: the same day through `gantry update` on the pending job.
    let (status, body) = patch(&d, &alice, id, &json!({"time_limit_s": 86_400}));
    assert!((400..500).contains(&status), "{status} {body}");
    assert_eq!(body["error"]["field"], "time_limit_s", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("queue-limits"), "{body}");
    assert_eq!(time_limit(&d, &alice, id), json!(300), "the job changed");
    // No limit at all is refused too (the queue needs one), and within it is accepted.
    let (status, body) = patch(&d, &alice, id, &json!({"time_limit_s": 0}));
    assert!((400..500).contains(&status), "{status} {body}");
    assert_eq!(time_limit(&d, &alice, id), json!(300));
    let (status, body) = patch(&d, &alice, id, &json!({"time_limit_s": 600}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(time_limit(&d, &alice, id), json!(600));
}

#[test]
fn a_jobs_owner_cannot_release_an_operators_hold_and_an_operator_can() {
    let (d, alice, olga, _adam) = with_roles(1);
    let spec = d.shell_job("held", 1, 0, "true");
    let mut held = spec.clone();
    held["hold"] = json!(true);
    // Held by its owner at submit: the owner may release it (as before).
    let own = d.submit_as(&alice, &held);
    let (status, body) = d.post_as(&alice, &format!("/v1/jobs/{own}/release"), &json!({}));
    assert_eq!(status, 200, "{body}");
    // An operator holds alice's job (over her own hold: the hold becomes the operator's).
    let id = d.submit_as(&alice, &held);
    let (status, body) = d.post_as(&olga, &format!("/v1/jobs/{id}/hold"), &json!({}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["held_by"], "olga", "{body}");
    assert_eq!(body["held_role"], "operator", "{body}");
    // The attack: alice lifts it.
    let (status, body) = d.post_as(&alice, &format!("/v1/jobs/{id}/release"), &json!({}));
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["field"], "held_by", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("olga") && message.contains("operator"),
        "{body}"
    );
    // A user's hold on top changes nothing: the hold is still the operator's.
    let (status, body) = d.post_as(&alice, &format!("/v1/jobs/{id}/hold"), &json!({}));
    assert_eq!(status, 200, "{body}");
    let (_, job) = d.get_as(&olga, &format!("/v1/jobs/{id}"));
    assert_eq!(
        (&job["state"], &job["held_by"], &job["held_role"]),
        (&json!("pending"), &json!("olga"), &json!("operator")),
        "{job}"
    );
    // A pending job never started while held; the operator releases it and it runs.
    let (status, body) = d.post_as(&olga, &format!("/v1/jobs/{id}/release"), &json!({}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["held_by"], Value::Null, "{body}");
    gantry_e2e::poll_until(
        &format!("job {id} to succeed"),
        gantry_e2e::WAIT,
        || d.log_tail(),
        || {
            let (_, job) = d.get_as(&olga, &format!("/v1/jobs/{id}"));
            (job["state"] == "succeeded").then_some(())
        },
    );
}

/// A `gantry serve` started from a configuration file of mode `mode`, with `env` added to
/// its environment; killed when dropped.
struct Started {
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl Started {
    fn new(config: &str, mode: u32, listen: &str, env: &[(&str, &str)]) -> Self {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gantry.toml");
        std::fs::write(&path, gantry_e2e::with_execution_defaults(config)).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        let file = |name: &str| std::fs::File::create(dir.path().join(name)).unwrap();
        let child = std::process::Command::new(gantry_e2e::gantry_bin())
            .arg("serve")
            .arg("--config")
            .arg(&path)
            .args(["--listen", listen, "--no-nvml", "--gpus", "1", "--data-dir"])
            .arg(dir.path().join("data"))
            .env_remove("GANTRY_HISTORY_PASSWORD")
            .env_remove("GANTRY_ETCD_PASSWORD")
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null())
            .stdout(file("out"))
            .stderr(file("err"))
            .spawn()
            .unwrap();
        Self { child, dir }
    }

    fn config_path(&self) -> String {
        self.dir.path().join("gantry.toml").display().to_string()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("err")).unwrap_or_default()
    }

    /// Polls until it listens (`Ok`) or exits (`Err(stderr)`), within twice [`gantry_e2e::WAIT`]
    /// (a debug build compiles the built-in plugins at its first start).
    fn listening(&mut self) -> Result<(), String> {
        let deadline = std::time::Instant::now() + 2 * gantry_e2e::WAIT;
        loop {
            if self.child.try_wait().unwrap().is_some() {
                return Err(self.stderr());
            }
            let out = std::fs::read_to_string(self.dir.path().join("out")).unwrap_or_default();
            if out.contains("gantry listening on") {
                return Ok(());
            }
            assert!(
                std::time::Instant::now() < deadline,
                "gantry neither listened nor exited: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Asserts it refuses to start; its stderr.
    fn refused(&mut self) -> String {
        match self.listening() {
            Ok(()) => panic!("gantry started; it should have refused: {}", self.stderr()),
            Err(stderr) => stderr,
        }
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A private (0600) file holding `text`, in `dir`.
fn secret_file(dir: &std::path::Path, name: &str, text: &str, mode: u32) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path.display().to_string()
}

#[test]
fn a_history_password_others_may_read_is_refused_and_a_private_password_file_works() {
    let server = TestPostgres::start().expect("a PostgreSQL server for the test");
    let url = server.database("gantry").expect("a database");
    // The attack's set-up: the password in the URL of a world-readable configuration
    // (the server trusts any password now, so only the daemon's own check can refuse).
    let with_password = url.replacen("gantry@", "gantry:s3cret-history@", 1);
    let exposed = format!("[history]\nbackend = \"postgres\"\nurl = {with_password:?}\n");
    let mut d = Started::new(&exposed, 0o644, "127.0.0.1:0", &[]);
    let err = d.refused();
    assert!(err.contains(&d.config_path()), "{err}");
    assert!(
        err.contains("password_file") && err.contains("GANTRY_HISTORY_PASSWORD"),
        "the message says how to fix it: {err}"
    );
    assert!(
        !err.contains("s3cret-history"),
        "the password is not echoed: {err}"
    );
    // The same in a 0600 file is the operator's choice, as for the cluster token.
    Started::new(&exposed, 0o600, "127.0.0.1:0", &[])
        .listening()
        .expect("a private config may hold the password");

    // Now the server wants the password: without one the daemon cannot start, with it from
    // a 0600 file (or the environment) it does, and a file others may read is refused.
    server
        .require_password("gantry", "s3cret-history")
        .expect("password authentication");
    let secrets = tempfile::tempdir().unwrap();
    let plain = format!("[history]\nbackend = \"postgres\"\nurl = {url:?}\n");
    Started::new(&plain, 0o644, "127.0.0.1:0", &[]).refused();
    let file = secret_file(secrets.path(), "pw", "s3cret-history\n", 0o600);
    let with_file = format!("{plain}password_file = {file:?}\n");
    let mut d = Started::new(&with_file, 0o644, "127.0.0.1:0", &[]);
    d.listening().expect("the password from a 0600 file");
    drop(d);
    let mut d = Started::new(
        &plain,
        0o644,
        "127.0.0.1:0",
        &[("GANTRY_HISTORY_PASSWORD", "s3cret-history")],
    );
    d.listening().expect("the password from the environment");
    drop(d);
    let open = secret_file(secrets.path(), "pw-open", "s3cret-history\n", 0o644);
    let err = Started::new(
        &format!("{plain}password_file = {open:?}\n"),
        0o644,
        "127.0.0.1:0",
        &[],
    )
    .refused();
    assert!(
        err.contains("history.password_file") && err.contains(&open),
        "{err}"
    );
}

#[test]
fn gantry_store_migrate_takes_no_password_on_its_command_line() {
    let from = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(gantry_e2e::gantry_bin())
        .args(["store", "migrate", "--from"])
        .arg(from.path())
        .args([
            "--to",
            "etcd:http://127.0.0.1:9,postgres:postgres://gantry:s3cret@127.0.0.1:9/gantry",
        ])
        .env_remove("GANTRY_HISTORY_PASSWORD")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("password") && err.contains("GANTRY_HISTORY_PASSWORD"),
        "refused for the password, saying where it goes: {err}"
    );
}

/// `[store]` on `etcd` plus `extra` store keys, history in SQLite (one controller).
fn on_etcd(etcd: &TestEtcd, extra: &str) -> String {
    format!(
        "[cluster]\nlocal_node = false\n[store]\nbackend = \"etcd\"\nendpoints = {:?}\nname = \"ctl\"\n\
         lease_s = 2\n{extra}\n",
        etcd.endpoints()
    )
}

#[test]
fn a_controller_refuses_an_etcd_anyone_may_use_unless_told_it_is_isolated() {
    let etcd = TestEtcd::start(1).expect("etcd for the test");
    // The attack's premise: any local process reads and writes the cluster's keys.
    let anyone = gantry_store::etcd::Etcd::new(&etcd.config("/gantry/")).unwrap();
    anyone
        .txn(
            vec![],
            vec![gantry_store::etcd::put_op(b"/gantry/leader", b"mallory", 0)],
            vec![],
        )
        .expect("an etcd without auth takes anyone's writes");
    let err = Started::new(&on_etcd(&etcd, ""), 0o600, "127.0.0.1:0", &[]).refused();
    assert!(
        err.contains("etcd_isolated") && err.contains("without credentials"),
        "the refusal says why and what to do: {err}"
    );
    // Told that nobody else can reach this etcd (its own network, a firewall), it starts,
    // and says so.
    let mut d = Started::new(
        &on_etcd(&etcd, "etcd_isolated = true"),
        0o600,
        "127.0.0.1:0",
        &[],
    );
    d.listening().expect("an isolated etcd is accepted");
    let log = std::fs::read_to_string(d.dir.path().join("out")).unwrap_or_default() + &d.stderr();
    assert!(
        log.contains("etcd_isolated"),
        "a warning names the setting: {log}"
    );
}

#[test]
fn with_etcd_auth_a_controller_logs_in_with_a_private_password_file() {
    let etcd = TestEtcd::start(1).expect("etcd for the test");
    etcd.enable_auth("gantry", "s3cret-etcd")
        .expect("etcd auth");
    // Nobody without the password reads the prefix now.
    let anyone = gantry_store::etcd::Etcd::new(&etcd.config("/gantry/")).unwrap();
    assert!(
        anyone
            .range(b"/gantry/", b"/gantry0", 1, false, false)
            .is_err()
    );
    let secrets = tempfile::tempdir().unwrap();
    let file = secret_file(secrets.path(), "etcd-pw", "s3cret-etcd\n", 0o600);
    let config = on_etcd(
        &etcd,
        &format!("username = \"gantry\"\npassword_file = {file:?}"),
    );
    let mut d = Started::new(&config, 0o644, "127.0.0.1:0", &[]);
    d.listening()
        .expect("etcd with auth and the password from a 0600 file");
    drop(d);
    // A password file others may read is refused, naming it.
    let open = secret_file(secrets.path(), "etcd-pw-open", "s3cret-etcd\n", 0o644);
    let config = on_etcd(
        &etcd,
        &format!("username = \"gantry\"\npassword_file = {open:?}"),
    );
    let err = Started::new(&config, 0o600, "127.0.0.1:0", &[]).refused();
    assert!(
        err.contains("store.password_file") && err.contains(&open),
        "{err}"
    );
    // A wrong password is refused by etcd, and said.
    let config = on_etcd(&etcd, "username = \"gantry\"");
    let err = Started::new(
        &config,
        0o600,
        "127.0.0.1:0",
        &[("GANTRY_ETCD_PASSWORD", "nope")],
    )
    .refused();
    assert!(err.contains("authenticat"), "{err}");
}

#[test]
fn a_standby_checks_host_as_the_leader_does() {
    let etcd = TestEtcd::start(1).expect("etcd for the test");
    let pg = TestPostgres::start().expect("PostgreSQL for the test");
    let history = pg.database("gantry").expect("a database");
    let a = Daemon::start_listening(
        &controllers::free_address(),
        0,
        &controllers::config(&etcd, &history, "ctl-a"),
    );
    controllers::wait_role(a.url(), "leader");
    let b = Daemon::start_listening(
        &controllers::free_address(),
        0,
        &controllers::config(&etcd, &history, "ctl-b"),
    );
    controllers::wait_role(b.url(), "standby");
    let (leader, standby) = (raw_http::addr(&a), raw_http::addr(&b));
    // The leader refuses a foreign Host (DNS rebinding), and so must the standby, which
    // would otherwise pass the page's request on with the leader's own Host.
    raw_http::get_as_host(&leader, "evil.example", "/v1/jobs", &[]).refused(421, "host");
    raw_http::get_as_host(&standby, "evil.example", "/v1/jobs", &[]).refused(421, "host");
    raw_http::get_as_host(&standby, "evil.example", "/v1/health", &[]).refused(421, "host");
    // Its own address still works, forwarded.
    let answer = raw_http::get(&standby, "/v1/jobs", &[]);
    assert_eq!(answer.status, 200, "{}", answer.text());
}
