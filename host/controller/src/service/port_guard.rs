//! Whose process answers on a replica's port (issue 43, finding 8). A replica's port is
//! chosen by Gantry and published before the replica binds it, so another local account
//! may bind it first; traffic for the service (clients' `Authorization` headers included)
//! must never reach that account. A replica on this node is a backend of its service's
//! endpoint, gateway and autoscaler only while every socket listening where the endpoint
//! connects (`127.0.0.1:<port>`, or a wildcard address) is its user's, and each new
//! connection is checked again once made: the socket that accepted it must be that user's
//! (`verify_accepted`, used by the endpoint's connector). A replica whose port another uid
//! holds gets no traffic, is shown with a reason naming that uid, and its service gets one
//! event saying so. A replica restarted in place whose automatic port someone else now holds
//! gets a new port (`fresh_port_if_taken`), so a squatter cannot keep it failing.
//!
//! On an agent's node the agent reads its own sockets (`remote_port`: asked in the
//! background, its answer reused for a second); a replica there is a backend only once its
//! agent said that its user alone listens on its port.
//!
//! Owns: the ownership verdicts, the table of expected owners of local replica addresses,
//! the squat reports. Does not own which replicas are ready by health (`service`), the
//! balancing (`service_endpoint`), nor reading the kernel's tables (`gantry_node::port_owner`).

use super::port_holder::PortHolder;
use super::port_owner::{self, Socket};
use crate::job_edit::{Annotation, JobEdit};
use crate::{Scheduler, lock};
use gantry_api::agent_client::AgentClient;
use gantry_api::cluster::PortOwnerRequest;
use gantry_api::model::JobRecord;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

/// What each replica address of each service was last found to be: what the endpoint's
/// connector checks a new connection against. Keyed by service too, so that a port one
/// service's replica gave up and another's (another user's) took is never taken for the
/// first's from a backend list a moment old.
static EXPECTED: LazyLock<Mutex<HashMap<(u64, SocketAddr), Expect>>> =
    LazyLock::new(Mutex::default);

/// Who should accept a connection to a replica address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A replica on this node, verified for this uid.
    Local(u32),
    /// A replica on an agent's node (its agent checks it).
    Remote,
}

/// A squat reported once: (replica job, port, the uids holding it).
type Squat = (u64, u16, Vec<u32>);

/// The squats already reported as an event.
static REPORTED: LazyLock<Mutex<HashSet<Squat>>> = LazyLock::new(Mutex::default);

/// How often the accepting socket is looked for before a connection is refused.
const ACCEPT_LOOKUPS: u32 = 50;
/// Between two of those looks.
const ACCEPT_PAUSE: Duration = Duration::from_millis(2);

/// A replica the endpoint might send traffic to.
pub(crate) struct Candidate {
    /// The replica's job.
    pub job: u64,
    /// Where the endpoint connects.
    pub addr: SocketAddr,
    /// The uid its tasks run as here (`None`: cannot run here, so no socket is its).
    pub uid: Option<u32>,
    /// On an agent's node: that agent and what to ask it (`remote_port`).
    pub remote: Option<(AgentClient, PortOwnerRequest)>,
}

/// Who holds `to` among `sockets`, for a replica running as `uid`.
pub(crate) fn holder(sockets: &[Socket], to: SocketAddr, uid: Option<u32>) -> PortHolder {
    let holders = port_owner::listeners_reaching(sockets, to);
    match (holders.as_slice(), uid) {
        ([], _) => PortHolder::Nobody,
        (found, Some(uid)) if found.iter().all(|h| *h == uid) => PortHolder::Replica,
        _ => PortHolder::Others(holders),
    }
}

/// Why a replica gets no traffic, for its view and its service's events.
pub(crate) fn squat_reason(port: u16, holders: &[u32], uid: Option<u32>) -> String {
    let whose = uid.map_or_else(|| "?".to_string(), |u| u.to_string());
    format!(
        "port {port} is held by uid {holders:?}, not only the replica's user (uid {whose}): \
         it gets no traffic"
    )
}

impl Scheduler {
    /// The uid the tasks of `job` run as on this node: its user's when tasks run as their
    /// users, else the daemon's; `None` when it may not run here.
    pub(crate) fn task_uid(&self, job: &JobRecord) -> Option<u32> {
        match self
            .inner
            .executor
            .identity(&job.spec.user, job.spec.anonymous)
        {
            Ok(Some(who)) => Some(who.uid),
            Ok(None) => Some(gantry_node::sys::effective_uid()),
            Err(_) => None,
        }
    }

    /// The candidates of service `service` that may get traffic: those on agents' nodes (their
    /// agent checks them), and those here whose port only their user listens on. Records the
    /// owner the endpoint's connector expects at each address kept; reports each replica
    /// whose port someone else holds, once, as an event of the service.
    pub(crate) fn owned_backends(
        &self,
        service: u64,
        candidates: Vec<Candidate>,
    ) -> Vec<(u64, SocketAddr)> {
        let sockets = match candidates.iter().any(|c| c.remote.is_none()) {
            true => port_owner::sockets(),
            false => Vec::new(),
        };
        let jobs: Vec<u64> = candidates.iter().map(|c| c.job).collect();
        let mut kept = Vec::new();
        for c in candidates {
            let (verdict, uid, expect) = match c.remote {
                None => (
                    holder(&sockets, c.addr, c.uid),
                    c.uid,
                    c.uid.map(Expect::Local),
                ),
                // Known once its agent answered (asked again every `remote_port::TTL`).
                Some((agent, ask)) => match self.remote_holder(service, c.job, agent, ask) {
                    Some((verdict, uid)) => (verdict, uid, Some(Expect::Remote)),
                    None => (PortHolder::Nobody, None, None),
                },
            };
            match (verdict, expect) {
                (PortHolder::Replica, Some(expect)) => {
                    lock(&EXPECTED).insert((service, c.addr), expect);
                    kept.push((c.job, c.addr));
                }
                (PortHolder::Others(holders), _) => {
                    lock(&EXPECTED).remove(&(service, c.addr));
                    let key = (c.job, c.addr.port(), holders.clone());
                    if lock(&REPORTED).insert(key) {
                        let reason = squat_reason(c.addr.port(), &holders, uid);
                        tracing::warn!(service, job = c.job, "{reason}");
                        self.event_service(service, format!("replica {}: {reason}", c.job));
                    }
                }
                _ => {}
            }
        }
        super::remote_port::forget_others(service, &jobs);
        kept
    }

    /// Why running replica `job` gets no traffic because of who holds its port, if that is
    /// so (for its view): read here, or on an agent's node its agent's last answer.
    pub(crate) fn replica_port_problem(
        &self,
        job: &JobRecord,
        sockets: &[Socket],
    ) -> Option<String> {
        let port = job.service_port?;
        let (found, uid) = match self.remote_task(job, 0) {
            Some(_) => super::remote_port::last_verdict(job.id, port)?,
            None => {
                let uid = self.task_uid(job);
                let to = SocketAddr::from(([127, 0, 0, 1], port));
                (holder(sockets, to, uid), uid)
            }
        };
        match found {
            PortHolder::Others(holders) => Some(squat_reason(port, &holders, uid)),
            PortHolder::Replica | PortHolder::Nobody => None,
        }
    }

    /// At a restart in place on this node: a service with an automatic port (`port: 0`)
    /// whose port someone now listens on (its own run is over, so not its tasks) gets a new
    /// one, said in an event of the job. A port the service asked for is kept.
    pub(crate) fn fresh_port_if_taken(&self, job: &mut JobEdit<'_>) {
        let automatic = job.spec.service.as_ref().is_none_or(|s| s.port == 0);
        let Some(port) = job.service_port else {
            return;
        };
        if !automatic || self.remote_task(job, 0).is_some() {
            return;
        }
        let holders = port_owner::listeners(port);
        if holders.is_empty() {
            return;
        }
        if let Some(fresh) = crate::task_env::free_port() {
            job.annotate(Annotation::ServicePort(fresh));
            self.event(
                job.id,
                "port",
                format!("port {port} is held by uid {holders:?}: this run listens on {fresh}"),
            );
        }
    }
}

/// Checks a new connection to a replica of `service` on this node (`server` from `client`): the socket
/// that accepted it must be the uid the replica was verified for. Connections to other
/// nodes pass (their agent checks them); one to a loopback address not verified (or no
/// longer) is refused.
pub(crate) async fn verify_accepted(
    service: u64,
    server: SocketAddr,
    client: SocketAddr,
) -> Result<(), String> {
    let expected = lock(&EXPECTED).get(&(service, server)).copied();
    let uid = match expected {
        Some(Expect::Local(uid)) => uid,
        Some(Expect::Remote) => return Ok(()),
        None if server.ip().is_loopback() => {
            return Err(format!("{server} is no verified replica's address"));
        }
        None => return Ok(()),
    };
    for _ in 0..ACCEPT_LOOKUPS {
        let sockets = port_owner::sockets();
        match port_owner::accepted_by(&sockets, server, client) {
            Some(found) if found == uid => return Ok(()),
            Some(found) => {
                lock(&EXPECTED).remove(&(service, server));
                return Err(format!(
                    "port {} was answered by uid {found}, not the replica's user (uid {uid}): \
                     nothing sent",
                    server.port()
                ));
            }
            None => tokio::time::sleep(ACCEPT_PAUSE).await,
        }
    }
    Err(format!(
        "cannot tell whose socket accepted the connection to {server}: nothing sent"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listening(port: u16, uid: u32) -> Socket {
        Socket {
            local: SocketAddr::from(([0, 0, 0, 0], port)),
            remote: SocketAddr::from(([0, 0, 0, 0], 0)),
            listening: true,
            uid,
        }
    }

    #[test]
    fn a_port_is_the_replicas_only_when_only_its_user_listens() {
        let to = SocketAddr::from(([127, 0, 0, 1], 9000));
        assert_eq!(holder(&[], to, Some(0)), PortHolder::Nobody);
        assert_eq!(
            holder(&[listening(9000, 7)], to, Some(7)),
            PortHolder::Replica
        );
        assert_eq!(
            holder(&[listening(9000, 65534)], to, Some(0)),
            PortHolder::Others(vec![65534])
        );
        assert_eq!(
            holder(&[listening(9000, 7), listening(9000, 8)], to, Some(7)),
            PortHolder::Others(vec![7, 8])
        );
        assert_eq!(
            holder(&[listening(9000, 7)], to, None),
            PortHolder::Others(vec![7]),
            "a replica that cannot run here holds nothing"
        );
        assert!(squat_reason(9000, &[65534], Some(0)).contains("uid [65534]"));
    }

    #[tokio::test]
    async fn a_connection_to_an_unverified_local_address_is_refused() {
        let server = SocketAddr::from(([127, 0, 0, 1], 1));
        let client = SocketAddr::from(([127, 0, 0, 1], 2));
        assert!(verify_accepted(1, server, client).await.is_err());
        let remote = SocketAddr::from(([10, 1, 2, 3], 1));
        assert!(verify_accepted(1, remote, client).await.is_ok());
    }
}
