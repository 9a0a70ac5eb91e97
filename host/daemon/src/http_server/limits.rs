//! Counting open connections, overall and per peer IP address, so that one client (or a
//! flood of them) cannot take every file descriptor and task of the daemon: a connection
//! gets a [`ConnPermit`] when it is accepted, or is refused when a limit is reached, and
//! gives it back when it closes.
//!
//! Addresses are counted as they are (an IPv4-mapped IPv6 address as its IPv4 one); a whole
//! IPv6 prefix is not grouped.
//!
//! Owns: the counts and the permits. Does not own what a refused connection is told
//! (`http_server`).

use std::collections::HashMap;
use std::net::IpAddr;
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
    /// A limiter allowing `max_total` connections, `max_per_ip` from one address.
    pub fn new(max_total: usize, max_per_ip: usize) -> Arc<Self> {
        Arc::new(Self {
            max_total,
            max_per_ip,
            counts: Mutex::new(Counts::default()),
            closed: Notify::new(),
        })
    }

    fn counts(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a new connection from `ip`, unless a limit is reached.
    pub fn try_acquire(self: &Arc<Self>, ip: IpAddr) -> Result<ConnPermit, ConnRefused> {
        let ip = ip.to_canonical();
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

    #[test]
    fn limits_apply_per_address_then_overall_and_permits_give_back() {
        let l = ConnLimiter::new(3, 2);
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
        let l = ConnLimiter::new(4, 4);
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
