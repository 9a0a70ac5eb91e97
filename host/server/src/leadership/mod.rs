//! Several controllers on one etcd (`[store] backend = "etcd"`): one leads, the others
//! stand by. A standby answers `GET /v1/health` itself (saying who leads, and since when)
//! and passes the API's other requests to the leader (`forward.rs`); the agents' routes,
//! and everything while nobody leads, get 503 `not-leader` naming the leader's URL or why
//! nobody leads, so agents given every controller's address move on to the leader
//! (`host/agent/src/heartbeat.rs`). It polls the leader key and campaigns when there is none
//! (`gantry_store::election`).
//!
//! The leader opens the scheduler on etcd, with every write fenced by its term
//! (`gantry_store::Fence`) and every call to an agent carrying it (`gantry_api::cluster_term`). A
//! thread renews its lease every third of `store.lease_s`; when the lease has ended (the
//! process was paused or cut off from etcd for longer) the controller steps down at once:
//! it replaces itself with a fresh `gantry serve` of the same arguments, which comes back
//! as a standby. Until it notices, etcd refuses its writes, so it can record no start and
//! launch nothing; agents refuse its calls once they have heard of the newer term. A clean
//! stop (SIGTERM) resigns, so a standby leads at once.
//!
//! A standby's routes pass the API's own first layer (`api::guard`: Host against DNS
//! rebinding, Origin, Content-Type) before anything is forwarded, as the leader's do: the
//! forwarded request carries the leader's `Host`, so the leader cannot judge the original
//! one. etcd itself is judged before the controller listens (`etcd_trust.rs`).
//!
//! Owns: the standby's routes, the campaign loop, lease renewal and stepping down. Does not
//! own the election's keys (`gantry-store`) or the scheduler.

pub mod etcd_trust;
mod forward;

pub use forward::{FORWARDED_BY, Forwarder, LEADER};

use axum::Json;
use axum::response::{IntoResponse, Response};
use gantry_config::Config;
use gantry_store::election::{Election, LeaderInfo, Leadership};
use gantry_store::etcd::Etcd;
use http::StatusCode;
use serde::Serialize;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a standby looks at the leader key.
const POLL: Duration = Duration::from_millis(250);

/// What `/v1/health` says about leadership.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// `leader` or `standby`.
    pub role: &'static str,
    /// This controller's name.
    pub name: String,
    /// Who leads (`None`: nobody now, or etcd cannot be reached).
    pub leader: Option<LeaderInfo>,
    /// The leader's term.
    pub term: i64,
    /// Why etcd cannot say, when it cannot.
    pub store_error: Option<String>,
}

static STATUS: Mutex<Option<Status>> = Mutex::new(None);

/// Leadership as `/v1/health` reports it (`None`: one controller alone on sled).
pub fn status() -> Option<Status> {
    STATUS.lock().ok().and_then(|s| s.clone())
}

fn set_status(status: Status) {
    if let Ok(mut s) = STATUS.lock() {
        *s = Some(status);
    }
}

/// This controller's leadership.
#[derive(Debug, Clone)]
pub struct Leading {
    election: Election,
    leadership: Leadership,
}

impl Leading {
    /// The fence of every write of this term.
    pub fn fence(&self) -> gantry_store::Fence {
        self.election.fence(&self.leadership)
    }

    /// The term.
    pub fn term(&self) -> i64 {
        self.leadership.term
    }

    /// Gives leadership up (a clean stop): a standby leads at once.
    pub fn resign(&self) {
        match self.election.resign(&self.leadership) {
            Ok(()) => tracing::info!(term = self.term(), "resigned leadership"),
            Err(e) => tracing::warn!("could not resign leadership: {e}"),
        }
    }

    /// Renews the lease every third of its life on a thread of its own; when it has ended,
    /// steps down ([`step_down`]).
    pub fn keep(&self) {
        let (election, leadership) = (self.election.clone(), self.leadership.clone());
        let spawned = std::thread::Builder::new()
            .name("leader-lease".into())
            .spawn(move || {
                let ttl = Duration::from_secs(election.ttl_s());
                let mut renewed = Instant::now();
                loop {
                    std::thread::sleep(ttl / 3);
                    match election.renew(&leadership) {
                        Ok(true) => renewed = Instant::now(),
                        Ok(false) => break,
                        Err(e) if renewed.elapsed() < ttl => {
                            tracing::warn!("cannot renew the leader's lease yet: {e}");
                        }
                        Err(e) => {
                            tracing::error!("the leader's lease could not be renewed in time: {e}");
                            break;
                        }
                    }
                }
                step_down(leadership.term);
            });
        if let Err(e) = spawned {
            tracing::error!("no lease thread ({e}): stepping down");
            step_down(self.leadership.term);
        }
    }
}

/// Leaves leadership for good: replaces this process with `gantry serve` of the same
/// arguments (it comes back as a standby); exits if that cannot be done.
pub fn step_down(term: i64) -> ! {
    let text = format!(
        "this controller's term {term} is over (its lease ended): stepping down to standby"
    );
    tracing::error!("{text}");
    eprintln!("gantry: {text}");
    use std::os::unix::process::CommandExt;
    let error = match std::env::current_exe() {
        Ok(exe) => std::process::Command::new(exe)
            .args(std::env::args_os().skip(1))
            .exec()
            .to_string(),
        Err(e) => e.to_string(),
    };
    eprintln!("gantry: cannot start again as a standby ({error}); exiting");
    std::process::exit(75)
}

/// The election of `config`'s cluster.
pub fn election(config: &Config) -> anyhow::Result<Election> {
    let client = Etcd::new(&config.store.etcd().map_err(anyhow::Error::msg)?)?;
    Ok(Election::new(
        client,
        &config.store.prefix,
        config.store.lease_s,
    ))
}

/// Where and how a standby serves its routes while it waits.
pub struct StandbyServer {
    /// The API's TCP listener.
    pub listener: tokio::net::TcpListener,
    /// The API's connection limits and timeouts.
    pub options: gantry_http::ServeOptions,
    /// The API's request checks (Host, Origin, Content-Type), put in front of every route.
    pub guard: fn(axum::Router) -> axum::Router,
}

/// Stands by, serving the standby's routes on `server.listener`, until this controller leads
/// (`Some`) or the daemon is told to stop (`None`). `unjudged` is the `[store]` whose etcd
/// could not be reached to be judged at start (`etcd_trust`): it is judged before the
/// leader key is first read, and an etcd anyone may use ends the daemon with the reason.
pub async fn lead(
    election: Election,
    name: String,
    url: String,
    cluster_ca: Option<std::path::PathBuf>,
    server: StandbyServer,
    mut unjudged: Option<gantry_config::store::StoreConfig>,
) -> anyhow::Result<Option<Leading>> {
    let StandbyServer {
        listener,
        options,
        guard,
    } = server;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let app = axum::Router::new()
        .route("/v1/health", axum::routing::get(standby_health))
        .fallback(forward::to_leader)
        .with_state(Forwarder::new(name.clone(), cluster_ca.clone()));
    // The leader's Host, Origin and Content-Type checks (`guard`, the API's: the caller
    // passes it, so this module does not depend on the API), before anything is passed on.
    let app = guard(app);
    tokio::spawn(async move {
        let until = async {
            tokio::select! {
                _ = stopped => {}
                () = gantry_http::shutdown() => {}
            }
        };
        if let Err(e) = gantry_http::serve(listener, app, options, until).await {
            tracing::error!("the standby's server stopped: {e}");
        }
    });
    let mut warned = false;
    loop {
        if let Some(store) = unjudged.clone() {
            let verdict = tokio::task::spawn_blocking(move || etcd_trust::verify(&store)).await?;
            match verdict? {
                etcd_trust::Verdict::Unknown(e) => {
                    set_status(Status {
                        role: "standby",
                        name: name.clone(),
                        leader: None,
                        term: 0,
                        store_error: Some(e),
                    });
                    tokio::select! {
                        () = tokio::time::sleep(POLL) => continue,
                        () = gantry_http::shutdown() => return Ok(None),
                    }
                }
                etcd_trust::Verdict::Trusted | etcd_trust::Verdict::Isolated => unjudged = None,
            }
        }
        let (poll_election, me) = (election.clone(), name.clone());
        let candidate = LeaderInfo {
            name: name.clone(),
            url: url.clone(),
            since_ms: gantry_controller::now_ms(),
        };
        let tried = tokio::task::spawn_blocking(move || {
            let leader = poll_election.leader()?;
            if leader.is_some() {
                return Ok((leader, None));
            }
            Ok::<_, gantry_store::StoreError>((None, poll_election.campaign(candidate)?))
        })
        .await?;
        match tried {
            Ok((_, Some(leadership))) => {
                let _ = stop.send(());
                tracing::info!(term = leadership.term, "this controller leads");
                set_status(Status {
                    role: "leader",
                    name: me,
                    leader: Some(leadership.info.clone()),
                    term: leadership.term,
                    store_error: None,
                });
                return Ok(Some(Leading {
                    election,
                    leadership,
                }));
            }
            Ok((leader, None)) => {
                warned = false;
                set_status(Status {
                    role: "standby",
                    name: me,
                    term: 0,
                    leader: leader.map(|l| l.info),
                    store_error: None,
                });
            }
            Err(e) => {
                if !warned {
                    tracing::warn!("standby: cannot reach etcd: {e}");
                }
                warned = true;
                set_status(Status {
                    role: "standby",
                    name: me,
                    leader: None,
                    term: 0,
                    store_error: Some(e.to_string()),
                });
            }
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            () = gantry_http::shutdown() => return Ok(None),
        }
    }
}

async fn standby_health() -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "status": "standby",
        "leadership": status(),
    }))
}

/// The 503 of a request a standby does not pass on: who leads, or why nobody does;
/// `why` says why this one was not forwarded.
async fn not_leader(why: Option<String>) -> Response {
    let now = status();
    let leader = now.as_ref().and_then(|s| s.leader.clone());
    let store_error = now.and_then(|s| s.store_error);
    let message = match (&leader, store_error) {
        (Some(l), _) => format!(
            "this controller stands by; {} at {} leads: send requests there{}",
            l.name,
            l.url,
            why.map(|w| format!(" ({w})")).unwrap_or_default()
        ),
        (None, Some(e)) => format!(
            "no controller leads: the cluster's state store cannot be reached ({e}); \
             nothing is scheduled until it can, and scheduling resumes by itself then"
        ),
        (None, None) => {
            "this controller stands by and no controller leads now; try again shortly".into()
        }
    };
    let body = serde_json::json!({"error": {
        "code": "not-leader",
        "message": message,
        "leader": leader.map(|l| l.url),
    }});
    let mut response = (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    response.headers_mut().insert(
        http::header::RETRY_AFTER,
        http::HeaderValue::from_static("1"),
    );
    response
}
