//! Whether the etcd of `[store]` may be trusted with the cluster, checked before a
//! controller listens and again before it first acts on what etcd says (issue 43, finding
//! 13). etcd holds every job's environment, the pending jobs a leader will start as their
//! users, and the leader key a standby sends callers' tokens to: if any local process may
//! read and write it, any local user becomes every user.
//!
//! - An etcd that answers a read of the prefix from a client with no credentials at all
//!   (no user, no client certificate; `gantry_store::etcd::accepts_anonymous`) is refused,
//!   with a message saying how to give it users or certificates, unless `[store]
//!   etcd_isolated = true` says nothing but the controllers can reach it; that is announced.
//! - With `[store] username`, the login is tried: a user or password etcd refuses stops the
//!   start, naming the key.
//! - An etcd that cannot be reached cannot be judged: the controller stands by, and judges
//!   it once it answers, before it reads who leads or campaigns ([`Verdict::Unknown`]).
//!
//! Owns: these decisions and their messages. Does not own the client (`gantry-store`) or
//! the settings (`config_store.rs`).

use gantry_config::store::StoreConfig;
use gantry_store::etcd::{Etcd, LoginError, accepts_anonymous};

/// What was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Clients without credentials are refused; the controller's own login (if any) works.
    Trusted,
    /// Clients without credentials are answered, and the configuration says that is fine.
    Isolated,
    /// No member answered: judge again later (why).
    Unknown(String),
}

/// Why the controller must not use this etcd.
#[derive(Debug, thiserror::Error)]
pub enum Untrusted {
    /// Anyone may read and write it.
    #[error(
        "refusing to use etcd at {endpoints}: it answers clients without credentials, so any local process could read every job's environment, rewrite pending jobs to run its command as their users, or name itself leader and receive the tokens callers send to a standby. Turn on etcd's authentication and give the controllers a user (store.username, with the password in a file only the daemon's user may read named by store.password_file, or in GANTRY_ETCD_PASSWORD), or require client certificates (etcd --client-cert-auth; store.ca, store.cert, store.key); if nothing but the controllers can reach this etcd (its own network, a firewall), set store.etcd_isolated = true"
    )]
    Anonymous {
        /// The members.
        endpoints: String,
    },
    /// The configured user cannot log in, or its password cannot be read.
    #[error("{0}")]
    Login(String),
}

/// Judges the etcd `store` names (blocking: HTTP calls to its members).
pub fn verify(store: &StoreConfig) -> Result<Verdict, Untrusted> {
    let config = store.etcd().map_err(Untrusted::Login)?;
    let endpoints = config.endpoints.join(",");
    match accepts_anonymous(&config) {
        Ok(true) if store.etcd_isolated => {
            let text = format!(
                "etcd at {endpoints} answers clients without credentials; store.etcd_isolated = true says nothing but the controllers can reach it"
            );
            tracing::warn!("{text}");
            eprintln!("gantry: warning: {text}");
            return Ok(Verdict::Isolated);
        }
        Ok(true) => return Err(Untrusted::Anonymous { endpoints }),
        Ok(false) => {}
        Err(e) => return Ok(Verdict::Unknown(e.to_string())),
    }
    let client = Etcd::new(&config).map_err(|e| Untrusted::Login(e.to_string()))?;
    match client.login() {
        Ok(_) => Ok(Verdict::Trusted),
        Err(LoginError::Refused(e)) => Err(Untrusted::Login(e.to_string())),
        Err(LoginError::Unreachable(e)) => Ok(Verdict::Unknown(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_unreachable_etcd_is_not_judged_and_a_missing_password_is_refused() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", closed.local_addr().unwrap());
        drop(closed);
        let store: StoreConfig =
            toml::from_str(&format!("backend = \"etcd\"\nendpoints = [{url:?}]\n")).unwrap();
        assert!(matches!(verify(&store), Ok(Verdict::Unknown(_))));
        let with_user: StoreConfig = toml::from_str(&format!(
            "backend = \"etcd\"\nendpoints = [{url:?}]\nusername = \"gantry\"\npassword_file = \"/nonexistent/pw\"\n"
        ))
        .unwrap();
        let err = verify(&with_user).unwrap_err().to_string();
        assert!(err.contains("store.password_file"), "{err}");
    }
}
