//! Which controller leads, decided by etcd (`[store] backend = "etcd"`): the leader key
//! `{prefix}leader` exists while its creator's lease lives. A controller campaigns by
//! creating the key in a transaction that requires it absent, attached to its own lease,
//! and keeps the lease alive; when it stops doing so (killed, paused, cut off), etcd
//! deletes the key after the lease's time to live and another controller's campaign
//! succeeds. The revision that created the key is the leader's **term**: it only grows, so
//! agents and etcd itself (`state_etcd.rs: Fence`) can refuse a controller whose term
//! ended.
//!
//! Owns: the leader key, leases, terms. Does not own what a leader does or how a standby
//! waits (`host/server/src/leadership.rs`).

use crate::StoreError;
use crate::etcd::{self, Etcd};
use crate::state_etcd::Fence;
use serde::{Deserialize, Serialize};

/// Who leads, as the leader key says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderInfo {
    /// The controller's name (`[store] name`, default the host name).
    pub name: String,
    /// The URL its API answers on.
    pub url: String,
    /// When it became leader, ms since the Unix epoch.
    pub since_ms: u64,
}

/// The leader key's holder and term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// What the leader wrote.
    pub info: LeaderInfo,
    /// The revision that created the key.
    pub term: i64,
}

/// This controller's leadership, while its lease lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leadership {
    /// The lease the key is attached to.
    pub lease: i64,
    /// The term.
    pub term: i64,
    /// What it wrote.
    pub info: LeaderInfo,
}

/// Campaigns and the leader key of one cluster.
#[derive(Debug, Clone)]
pub struct Election {
    client: Etcd,
    key: Vec<u8>,
    ttl_s: u64,
}

impl Election {
    /// The election of the cluster under `prefix`, with leases of `ttl_s` seconds.
    pub fn new(client: Etcd, prefix: &str, ttl_s: u64) -> Self {
        Self {
            client,
            key: format!("{prefix}leader").into_bytes(),
            ttl_s: ttl_s.max(2),
        }
    }

    /// The leader key's name (for the fence).
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The lease's time to live.
    pub fn ttl_s(&self) -> u64 {
        self.ttl_s
    }

    /// Who leads now, if anyone.
    pub fn leader(&self) -> Result<Option<Leader>, StoreError> {
        let kvs = self.client.range(&self.key, &[], 1, false, false)?;
        Ok(kvs.into_iter().next().and_then(|kv| {
            let info = serde_json::from_slice(&kv.value).ok()?;
            Some(Leader {
                info,
                term: kv.create_revision,
            })
        }))
    }

    /// Tries once to become leader as `info`: `Some` when this controller now leads,
    /// `None` when another does (the lease granted for the try is given back).
    pub fn campaign(&self, info: LeaderInfo) -> Result<Option<Leadership>, StoreError> {
        let lease = self.client.grant(self.ttl_s)?;
        let value = serde_json::to_vec(&info).unwrap_or_default();
        let (won, answer) = self.client.txn(
            vec![etcd::absent(&self.key)],
            vec![
                etcd::put_op(&self.key, &value, lease),
                etcd::get_op(&self.key),
            ],
            vec![],
        )?;
        if !won {
            let _ = self.client.revoke(lease);
            return Ok(None);
        }
        let created = answer["responses"]
            .as_array()
            .and_then(|r| r.get(1))
            .map(|r| etcd::kvs(&r["response_range"]))
            .and_then(|kvs| kvs.into_iter().next())
            .map(|kv| kv.create_revision)
            .unwrap_or(0);
        if created == 0 {
            return Err(StoreError::Etcd {
                endpoints: self.client.endpoints(),
                message: format!("the leader key's revision is missing from {answer}"),
            });
        }
        Ok(Some(Leadership {
            lease,
            term: created,
            info,
        }))
    }

    /// Renews `leadership`'s lease; `false` when it has expired (the term is over).
    pub fn renew(&self, leadership: &Leadership) -> Result<bool, StoreError> {
        if self.client.keep_alive(leadership.lease)? <= 0 {
            return Ok(false);
        }
        // The lease lives; the key must still be this term's (never deleted by hand).
        Ok(self.leader()?.is_some_and(|l| l.term == leadership.term))
    }

    /// Gives leadership up now (a clean stop): the key goes, a standby leads at once.
    pub fn resign(&self, leadership: &Leadership) -> Result<(), StoreError> {
        self.client.revoke(leadership.lease)
    }

    /// The fence every write of `leadership`'s term carries.
    pub fn fence(&self, leadership: &Leadership) -> Fence {
        Fence {
            key: self.key.clone(),
            term: leadership.term,
        }
    }
}
