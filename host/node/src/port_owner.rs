//! Whose is a TCP port on this node: the uid the kernel records for a socket
//! (`/proc/net/tcp` and `/proc/net/tcp6`), for listening sockets and for the socket that
//! accepted one connection. An HTTP health check of a service on the daemon's own node goes
//! only to a port its job's user listens on, so a service cannot point the daemon's probe at
//! the daemon itself, an agent or another user's server; a service's endpoint sends a
//! client's request to a replica only when the replica's user listens on its port, and only
//! over a connection whose accepting socket is that user's (`service_endpoint`).
//!
//! Owns: reading those tables. Does not own probing (`probe`) or forwarding.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// State code of a listening socket in `/proc/net/tcp*`.
const LISTEN: &str = "0A";

/// One socket of `/proc/net/tcp*`: local and remote address, state code, uid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Socket {
    /// The local address and port.
    pub local: SocketAddr,
    /// The remote address and port (`0.0.0.0:0` for a listener).
    pub remote: SocketAddr,
    /// Whether it listens.
    pub listening: bool,
    /// The uid the kernel records for it (an accepted socket: its listener's).
    pub uid: u32,
}

/// Every TCP socket of this network namespace (IPv4 and IPv6 tables).
pub fn sockets() -> Vec<Socket> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .flat_map(|table| parse_sockets(&table))
        .collect()
}

/// The uids owning a socket listening on `port` (any address), each once, in order.
pub fn listeners(port: u16) -> Vec<u32> {
    let mut uids: Vec<u32> = sockets()
        .into_iter()
        .filter(|s| s.listening && s.local.port() == port)
        .map(|s| s.uid)
        .collect();
    uids.sort_unstable();
    uids.dedup();
    uids
}

/// The uids of the sockets among `sockets` listening where a connection to `to` may land:
/// on its address or on a wildcard (`0.0.0.0`, `::`, which may take IPv4 too), or on the
/// IPv4-mapped form of its address; each once, in order.
pub fn listeners_reaching(sockets: &[Socket], to: SocketAddr) -> Vec<u32> {
    let mut uids: Vec<u32> = sockets
        .iter()
        .filter(|s| s.listening && s.local.port() == to.port() && reaches(s.local.ip(), to.ip()))
        .map(|s| s.uid)
        .collect();
    uids.sort_unstable();
    uids.dedup();
    uids
}

/// The uid of the socket that took the connection from `client` to `server` (its
/// listener's uid), when the tables show it.
pub fn accepted_by(sockets: &[Socket], server: SocketAddr, client: SocketAddr) -> Option<u32> {
    sockets
        .iter()
        .find(|s| {
            !s.listening
                && s.local.port() == server.port()
                && s.remote.port() == client.port()
                && same_ip(s.local.ip(), server.ip())
                && same_ip(s.remote.ip(), client.ip())
        })
        .map(|s| s.uid)
}

/// Whether a socket bound to `bound` takes connections to `to`.
fn reaches(bound: IpAddr, to: IpAddr) -> bool {
    bound.is_unspecified() || same_ip(bound, to)
}

/// Equal addresses, an IPv4-mapped IPv6 address equal to its IPv4 one.
fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

/// The sockets of one `/proc/net/tcp*` table.
fn parse_sockets(table: &str) -> Vec<Socket> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            Some(Socket {
                local: address(fields.get(1)?)?,
                remote: address(fields.get(2)?)?,
                listening: *fields.get(3)? == LISTEN,
                uid: fields.get(7)?.parse().ok()?,
            })
        })
        .collect()
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): each 32-bit word as the
/// kernel printed it, in this host's byte order.
fn address(text: &str) -> Option<SocketAddr> {
    let (hex_ip, hex_port) = text.rsplit_once(':')?;
    let port = u16::from_str_radix(hex_port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let chunk = hex_ip.get(i * 8..i * 8 + 8)?;
        Some(u32::from_str_radix(chunk, 16).ok()?.to_ne_bytes())
    };
    let ip = match hex_ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:20E4 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 65534        0 2 1 0 100 0 0 10 0
   2: 0100007F:1F90 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000  1000        0 3 1 0 20 4 30 10 -1
";

    #[test]
    fn listening_sockets_on_the_port_with_their_uids() {
        let sockets = parse_sockets(TABLE);
        let to = |port| SocketAddr::from(([127, 0, 0, 1], port));
        assert_eq!(listeners_reaching(&sockets, to(8420)), vec![0]);
        assert_eq!(
            listeners_reaching(&sockets, to(8080)),
            vec![65534],
            "established sockets do not count; a wildcard takes 127.0.0.1"
        );
        assert!(listeners_reaching(&sockets, to(9)).is_empty());
        let other = SocketAddr::from(([10, 0, 0, 1], 8420));
        assert!(
            listeners_reaching(&sockets, other).is_empty(),
            "127.0.0.1 is not 10.0.0.1"
        );
        assert_eq!(
            accepted_by(&sockets, to(8080), to(0xD2F0)),
            Some(1000),
            "the established socket of that connection"
        );
        assert_eq!(accepted_by(&sockets, to(8080), to(1)), None);
    }

    #[test]
    fn ipv6_and_mapped_addresses_parse() {
        let mapped = address("0000000000000000FFFF00000100007F:1F90");
        if cfg!(target_endian = "little") {
            assert_eq!(
                mapped.map(|a| a.ip().to_canonical()),
                Some(IpAddr::from([127, 0, 0, 1]))
            );
        }
        let any = address("00000000000000000000000000000000:0050");
        assert_eq!(any, Some(SocketAddr::from((Ipv6Addr::UNSPECIFIED, 80))));
        assert_eq!(address("zz:1"), None);
        assert_eq!(address("0100007F"), None);
    }

    #[test]
    fn a_port_this_test_listens_on_and_a_connection_it_accepts_are_its_own() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap();
        // SAFETY: no preconditions.
        let me = unsafe { libc::geteuid() };
        assert_eq!(listeners(server.port()), vec![me]);
        let client = std::net::TcpStream::connect(server).unwrap();
        let _accepted = listener.accept().unwrap();
        let sockets = sockets();
        assert_eq!(listeners_reaching(&sockets, server), vec![me]);
        assert_eq!(
            accepted_by(&sockets, server, client.local_addr().unwrap()),
            Some(me)
        );
    }
}
