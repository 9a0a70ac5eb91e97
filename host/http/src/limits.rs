//! Counting open connections, overall and per peer IP address, so that one client (or a
//! flood of them) cannot take every file descriptor and task of the daemon: a connection
//! gets a [`ConnPermit`] when it is accepted, or is refused when a limit is reached, and
//! gives it back when it closes.
//!
//! Addresses are counted by caller, not as they are ([`caller_address`]): the whole loopback
//! range (127.0.0.0/8 and ::1, which any local user may bind) is one caller, an IPv4-mapped
//! IPv6 address counts as its IPv4 one, and remote addresses are grouped by a prefix
//! (`[http] caller_prefix_v4`, default /32, and `caller_prefix_v6`, default /64: one host's
//! usual IPv6 allocation).
//!
//! Owns: the counts and the permits. Does not own what a refused connection is told
//! (`http_server`).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;

/// Why a connection was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnRefused {
    /// `max_connections` are open.
    #[error("the server has {0} connections open, its limit ([http] max_connections)")]
    Total(usize),
    /// `max_connections_per_ip` are open from this address.
    #[error("{0} has {1} connections open, the limit per address ([http] max_connections_per_ip)")]
    PerIp(IpAddr, usize),
}

/// The prefix lengths remote addresses are grouped by (`[http] caller_prefix_v4`/`_v6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallerPrefixes {
    /// Bits of an IPv4 address that name a caller (8..=32).
    pub v4: u8,
    /// Bits of an IPv6 address that name a caller (16..=128).
    pub v6: u8,
}

impl CallerPrefixes {
    /// How `[http]` groups remote addresses into callers for the per-caller limits.
    pub fn of(settings: &gantry_config::http::HttpSettings) -> Self {
        Self {
            v4: settings.caller_prefix_v4,
            v6: settings.caller_prefix_v6,
        }
    }
}

/// The address a connection from `ip` is counted under: loopback as one caller, others
/// masked to their prefix.
pub fn caller_address(ip: IpAddr, prefixes: CallerPrefixes) -> IpAddr {
    let ip = ip.to_canonical();
    if ip.is_loopback() {
        return IpAddr::V4(Ipv4Addr::LOCALHOST);
    }
    match ip {
        IpAddr::V4(a) => {
            let bits = u32::from(prefixes.v4.min(32));
            let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask))
        }
        IpAddr::V6(a) => {
            let bits = u32::from(prefixes.v6.min(128));
            let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask))
        }
    }
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// The open connections of one listener.
#[derive(Debug)]
pub struct ConnLimiter {
    max_total: usize,
    max_per_ip: usize,
    prefixes: CallerPrefixes,
    counts: Mutex<Counts>,
    closed: Notify,
}

/// One open connection, counted until dropped.
#[derive(Debug)]
pub struct ConnPermit {
    limiter: Arc<ConnLimiter>,
    ip: IpAddr,
}

impl ConnLimiter {
    /// A limiter allowing `max_total` connections, `max_per_ip` from one caller (addresses
    /// grouped by [`caller_address`] with `prefixes`).
    pub fn new(max_total: usize, max_per_ip: usize, prefixes: CallerPrefixes) -> Arc<Self> {
        Arc::new(Self {
            max_total,
            max_per_ip,
            prefixes,
            counts: Mutex::new(Counts::default()),
            closed: Notify::new(),
        })
    }

    fn counts(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a new connection from `ip`, unless a limit is reached.
    pub fn try_acquire(self: &Arc<Self>, ip: IpAddr) -> Result<ConnPermit, ConnRefused> {
        let ip = caller_address(ip, self.prefixes);
        let mut c = self.counts();
        if c.total >= self.max_total {
            return Err(ConnRefused::Total(c.total));
        }
        let from_ip = c.per_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= self.max_per_ip {
            return Err(ConnRefused::PerIp(ip, from_ip));
        }
        c.total += 1;
        c.per_ip.insert(ip, from_ip + 1);
        Ok(ConnPermit {
            limiter: self.clone(),
            ip,
        })
    }

    /// Open connections now.
    pub fn open(&self) -> usize {
        self.counts().total
    }

    /// Waits until every connection has closed, or `limit` has passed; whether they did.
    pub async fn wait_closed(&self, limit: Duration) -> bool {
        let all_closed = async {
            loop {
                let notified = self.closed.notified();
                if self.open() == 0 {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(limit, all_closed).await.is_ok()
    }
}

impl Drop for ConnPermit {
    fn drop(&mut self) {
        let mut c = self.limiter.counts();
        c.total = c.total.saturating_sub(1);
        if let Some(n) = c.per_ip.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                c.per_ip.remove(&self.ip);
            }
        }
        drop(c);
        self.limiter.closed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    const EXACT: CallerPrefixes = CallerPrefixes { v4: 32, v6: 128 };

    #[test]
    fn the_loopback_range_is_one_caller_and_remote_addresses_group_by_prefix() {
        let p = CallerPrefixes { v4: 24, v6: 64 };
        for local in ["127.0.0.2", "127.0.0.41", "::1", "::ffff:127.9.9.9"] {
            assert_eq!(caller_address(ip(local), p), ip("127.0.0.1"), "{local}");
        }
        assert_eq!(caller_address(ip("10.1.2.3"), p), ip("10.1.2.0"));
        assert_eq!(caller_address(ip("2001:db8::1:2"), p), ip("2001:db8::"));
        assert_eq!(caller_address(ip("10.1.2.3"), EXACT), ip("10.1.2.3"));
        let l = ConnLimiter::new(100, 2, EXACT);
        let _a = l.try_acquire(ip("127.0.0.2")).expect("first");
        let _b = l.try_acquire(ip("127.0.0.3")).expect("second");
        assert!(
            l.try_acquire(ip("127.0.0.4")).is_err(),
            "a third loopback address"
        );
    }

    #[test]
    fn limits_apply_per_address_then_overall_and_permits_give_back() {
        let l = ConnLimiter::new(3, 2, EXACT);
        let a1 = l.try_acquire(ip("10.0.0.1")).expect("first");
        let _a2 = l.try_acquire(ip("::ffff:10.0.0.1")).expect("second");
        assert_eq!(
            l.try_acquire(ip("10.0.0.1")).map(|_| ()),
            Err(ConnRefused::PerIp(ip("10.0.0.1"), 2))
        );
        let _b1 = l.try_acquire(ip("10.0.0.2")).expect("other address");
        assert_eq!(
            l.try_acquire(ip("10.0.0.3")).map(|_| ()),
            Err(ConnRefused::Total(3))
        );
        drop(a1);
        assert_eq!(l.open(), 2);
        assert!(l.try_acquire(ip("10.0.0.1")).is_ok());
    }

    #[tokio::test]
    async fn waiting_for_connections_to_close_is_bounded() {
        let l = ConnLimiter::new(4, 4, EXACT);
        let p = l.try_acquire(ip("127.0.0.1")).expect("permit");
        assert!(!l.wait_closed(Duration::from_millis(20)).await);
        let waiter = {
            let l = l.clone();
            tokio::spawn(async move { l.wait_closed(Duration::from_secs(10)).await })
        };
        drop(p);
        assert!(waiter.await.expect("join"));
    }
}
