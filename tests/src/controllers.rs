//! Two controllers on one etcd, history in PostgreSQL, and two real agents that know
//! both: the set-up of the failover and standby tests (`tests/failover.rs`,
//! `tests/standby.rs`), with the calls they share (who leads, submitting to whichever
//! leads, waiting for a job). etcd, PostgreSQL and the agents run on 127.0.0.1 from the
//! distribution's packages; a missing one fails the test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::Daemon;
use crate::agents::Agent;
use gantry_store::test_etcd::TestEtcd;
use gantry_store::test_postgres::TestPostgres;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The agents' cluster token.
pub const TOKEN: &str = "e2e-failover-token-0123456789abcdef";
/// The leader's lease, seconds.
pub const LEASE_S: u64 = 2;
/// How long any wait may take.
pub const BOUND: Duration = Duration::from_secs(60);

/// The configuration of controller `name`: state on `cluster`, history at `history`. The
/// test's etcd has no users (anyone on the machine may use it), so the configuration says
/// it is isolated (`[store] etcd_isolated`; `tests/trust_policy_store.rs` tests the rule).
pub fn config(cluster: &TestEtcd, history: &str, name: &str) -> String {
    format!(
        "[cluster]\ntoken = \"{TOKEN}\"\nlocal_node = false\nheartbeat_interval_ms = 200\n\
         node_down_after_ms = 5000\n\
         [store]\nbackend = \"etcd\"\nendpoints = {:?}\nname = \"{name}\"\nlease_s = {LEASE_S}\n\
         etcd_isolated = true\n\
         [history]\nbackend = \"postgres\"\nurl = {history:?}\n",
        cluster.endpoints()
    )
}

/// A client that reads every status as an answer, with a 10 s bound.
pub fn http() -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .timeout_global(Some(Duration::from_secs(10)))
            .build(),
    )
}

/// `GET url/v1/health`'s leadership, if it answers.
pub fn leadership(url: &str) -> Option<Value> {
    let mut answer = http().get(format!("{url}/v1/health")).call().ok()?;
    let body: Value = answer.body_mut().read_json().ok()?;
    Some(body["leadership"].clone())
}

/// Waits until `url` says it is `role` (`leader`, `standby`); its leadership.
pub fn wait_role(url: &str, role: &str) -> Value {
    let started = Instant::now();
    loop {
        if let Some(l) = leadership(url)
            && l["role"] == json!(role)
        {
            return l;
        }
        assert!(started.elapsed() < BOUND, "{url} never became {role}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Submits `spec` to whichever of `urls` leads, as a client given every controller does:
/// the next one on an error or a 503; `None` if none took it within [`BOUND`].
pub fn submit_to_leader(urls: &[String], spec: &Value) -> Option<u64> {
    let started = Instant::now();
    let agent = http();
    for i in 0.. {
        if started.elapsed() > BOUND {
            return None;
        }
        let url = &urls[i % urls.len()];
        if let Ok(mut answer) = agent.post(format!("{url}/v1/jobs")).send_json(spec)
            && answer.status().as_u16() == 201
        {
            let body: Value = answer.body_mut().read_json().ok()?;
            return body["id"].as_u64();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// `GET url/v1/jobs/ID` when it answers 200.
pub fn get_job(url: &str, id: u64) -> Option<Value> {
    let mut answer = http().get(format!("{url}/v1/jobs/{id}")).call().ok()?;
    (answer.status().as_u16() == 200).then(|| answer.body_mut().read_json().ok())?
}

/// Waits until job `id` at `url` satisfies `ok` (`what` names it in the failure).
pub fn wait_job(url: &str, id: u64, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let job = get_job(url, id);
        if let Some(job) = &job
            && ok(job)
        {
            return job.clone();
        }
        assert!(
            started.elapsed() < BOUND,
            "job {id} never {what}: {}",
            job.unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A job that appends its shell's pid to `starts-<id>` and ends at once (`hold = false`)
/// or when `release-<id>` appears.
pub fn job(out: &std::path::Path, name: &str, wait: bool) -> Value {
    let script = if wait {
        r#"echo $$ >> "$OUTDIR/starts-$GANTRY_JOB_ID"; while [ ! -e "$OUTDIR/release-$GANTRY_JOB_ID" ]; do sleep 0.05; done"#
    } else {
        r#"echo $$ >> "$OUTDIR/starts-$GANTRY_JOB_ID""#
    };
    json!({
        "name": name,
        "argv": ["/bin/sh", "-c", script],
        "env": {"OUTDIR": out},
        "tasks": [{"count": 1, "gpus": 1}],
    })
}

/// The pids job `id` wrote when it started (one line per start).
pub fn starts(out: &std::path::Path, id: u64) -> Vec<String> {
    std::fs::read_to_string(out.join(format!("starts-{id}")))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A free 127.0.0.1 port.
pub fn free_address() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// The set-up: `a` leads, `b` stands by.
pub struct Cluster {
    /// The etcd members.
    pub etcd: TestEtcd,
    /// The history's server.
    pub pg: TestPostgres,
    /// The first controller (it leads at the start).
    pub a: Daemon,
    /// The second (it stands by at the start).
    pub b: Daemon,
    /// Two agents, two GPUs each.
    pub agents: Vec<Agent>,
    /// Where the jobs write (`job`, `starts`).
    pub out: tempfile::TempDir,
}

/// Starts etcd (`etcd_members`), PostgreSQL, controllers `a` (leads) and `b`, and two agents.
pub fn cluster(etcd_members: usize) -> Cluster {
    let etcd = TestEtcd::start(etcd_members).expect("etcd for the test");
    let pg = TestPostgres::start().expect("PostgreSQL for the test");
    let history = pg.database("gantry").expect("a database");
    // Fixed ports: a controller that steps down comes back where agents and clients look.
    let a = Daemon::start_listening(&free_address(), 0, &config(&etcd, &history, "ctl-a"));
    wait_role(a.url(), "leader");
    let b = Daemon::start_listening(&free_address(), 0, &config(&etcd, &history, "ctl-b"));
    let standby = wait_role(b.url(), "standby");
    assert_eq!(standby["leader"]["name"], json!("ctl-a"), "{standby}");
    let both = format!("{},{}", a.url(), b.url());
    let agents = ["node-a", "node-b"]
        .iter()
        .map(|n| Agent::start(&a, &both, n, 2, TOKEN))
        .collect();
    let out = tempfile::tempdir().unwrap();
    crate::make_private(out.path());
    Cluster {
        etcd,
        pg,
        a,
        b,
        agents,
        out,
    }
}

impl Cluster {
    /// Every line of both controllers' and both agents' logs that names job `id` (its
    /// runs' keys, `ID.TASK.RUN`, included): what a failed assertion about the job prints.
    pub fn evidence(&self, id: u64) -> String {
        let needles = [format!("job={id}"), format!("job {id}"), format!("={id}.")];
        let mut text = String::new();
        for (name, d) in [("ctl-a", &self.a), ("ctl-b", &self.b)] {
            text.push_str(&format!("--- {name} ---\n"));
            for needle in &needles {
                for line in d.log_lines(needle) {
                    text.push_str(&line);
                    text.push('\n');
                }
            }
        }
        for agent in &self.agents {
            text.push_str(&format!("--- agent {} ---\n", agent.name()));
            for line in format!("{}{}", agent.stdout(), agent.stderr()).lines() {
                if needles.iter().any(|n| line.contains(n.as_str())) {
                    text.push_str(line);
                    text.push('\n');
                }
            }
        }
        text
    }
}
