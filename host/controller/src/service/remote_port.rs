//! Who holds the port of a replica on an agent's node (issue 43, finding 8): the agent of
//! that node reads its own sockets (`POST /agent/v1/port-owner`), since the controller
//! cannot. The question is asked in the background (never on the endpoint's request path)
//! when the last answer is older than [`TTL`]; until the first answer comes the replica is
//! no backend (fail closed), and an agent that cannot answer (unreachable, or too old to
//! know the route) leaves its replicas without traffic, said in the log.
//!
//! Owns: the cache of agents' answers. Does not own the verdicts' use (`port_guard`) nor the
//! agent's route (`gantry_agent`'s `server`).

use super::port_holder::PortHolder;
use crate::{Scheduler, lock};
use gantry_api::agent_client::AgentClient;
use gantry_api::cluster::{PortOwnerReply, PortOwnerRequest};
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

/// How long an agent's answer is used before it is asked again.
pub(super) const TTL: Duration = Duration::from_secs(1);

/// What is known of one replica's port on an agent's node.
#[derive(Default)]
struct Known {
    /// Its service.
    service: u64,
    /// When the agent last answered (or failed to).
    at: Option<Instant>,
    /// Its last answer: who holds the port, and the uid the replica runs as there.
    verdict: Option<(PortHolder, Option<u32>)>,
    /// A question is on its way.
    asking: bool,
}

/// By (replica job, port).
static KNOWN: LazyLock<Mutex<HashMap<(u64, u16), Known>>> = LazyLock::new(Mutex::default);

/// The verdict of an agent's answer.
pub(super) fn verdict(reply: &PortOwnerReply) -> PortHolder {
    match (reply.holders.as_slice(), reply.uid) {
        ([], _) => PortHolder::Nobody,
        (found, Some(uid)) if found.iter().all(|h| *h == uid) => PortHolder::Replica,
        _ => PortHolder::Others(reply.holders.clone()),
    }
}

/// The last known verdict on replica `job`'s `port`, with the uid it runs as there.
pub(super) fn last_verdict(job: u64, port: u16) -> Option<(PortHolder, Option<u32>)> {
    lock(&KNOWN)
        .get(&(job, port))
        .and_then(|k| k.verdict.clone())
}

/// Forgets what is known of replicas of `service` not among `jobs` (gone).
pub(super) fn forget_others(service: u64, jobs: &[u64]) {
    lock(&KNOWN).retain(|(job, _), k| k.service != service || jobs.contains(job));
}

impl Scheduler {
    /// The last verdict on replica `job` of `service` on `agent`'s node, asking the agent
    /// again in the background when it is older than [`TTL`]; `None` before any answer.
    pub(super) fn remote_holder(
        &self,
        service: u64,
        job: u64,
        agent: AgentClient,
        ask: PortOwnerRequest,
    ) -> Option<(PortHolder, Option<u32>)> {
        let key = (job, ask.port);
        let mut known = lock(&KNOWN);
        let entry = known.entry(key).or_default();
        entry.service = service;
        let stale = entry.at.is_none_or(|at| at.elapsed() >= TTL);
        if stale
            && !entry.asking
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            entry.asking = true;
            runtime.spawn(async move {
                let answer = tokio::task::spawn_blocking(move || agent.port_owner(&ask)).await;
                let found = match answer {
                    Ok(Ok(reply)) => Some((verdict(&reply), reply.uid)),
                    Ok(Err(e)) => {
                        tracing::warn!(service, job, "cannot ask who holds a replica's port: {e}");
                        None
                    }
                    Err(e) => {
                        tracing::warn!(service, job, "asking who holds a replica's port: {e}");
                        None
                    }
                };
                let mut known = lock(&KNOWN);
                if let Some(entry) = known.get_mut(&key) {
                    entry.at = Some(Instant::now());
                    entry.verdict = found;
                    entry.asking = false;
                }
            });
        }
        entry.verdict.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agents_answer_is_the_replicas_only_when_its_uid_alone_listens() {
        let reply = |holders: Vec<u32>, uid| PortOwnerReply { holders, uid };
        assert_eq!(verdict(&reply(vec![], Some(7))), PortHolder::Nobody);
        assert_eq!(verdict(&reply(vec![7], Some(7))), PortHolder::Replica);
        assert_eq!(
            verdict(&reply(vec![7, 65534], Some(7))),
            PortHolder::Others(vec![7, 65534])
        );
        assert_eq!(verdict(&reply(vec![7], None)), PortHolder::Others(vec![7]));
    }

    #[test]
    fn replicas_gone_are_forgotten() {
        lock(&KNOWN).insert(
            (900_001, 1),
            Known {
                service: 77,
                ..Known::default()
            },
        );
        lock(&KNOWN).insert(
            (900_002, 1),
            Known {
                service: 77,
                ..Known::default()
            },
        );
        forget_others(77, &[900_002]);
        let known = lock(&KNOWN);
        assert!(!known.contains_key(&(900_001, 1)));
        assert!(known.contains_key(&(900_002, 1)));
    }
}
