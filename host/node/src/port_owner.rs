//! Whose is a listening TCP port on this node: the uid the kernel records for the listening
//! socket (`/proc/net/tcp` and `/proc/net/tcp6`). An HTTP health check of a service on the
//! daemon's own node goes only to a port its job's user listens on, so a service cannot point
//! the daemon's probe at the daemon itself, an agent or another user's server.
//!
//! Owns: reading those tables. Does not own probing (`probe`).

/// State code of a listening socket in `/proc/net/tcp*`.
const LISTEN: &str = "0A";

/// The uids owning a socket listening on `port` (any address), each once, in order.
pub fn listeners(port: u16) -> Vec<u32> {
    let mut uids: Vec<u32> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .flat_map(|table| parse(&table, port))
        .collect();
    uids.sort_unstable();
    uids.dedup();
    uids
}

/// The uids of listening sockets on `port` in one `/proc/net/tcp*` table.
fn parse(table: &str, port: u16) -> Vec<u32> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local = fields.get(1)?;
            let state = fields.get(3)?;
            let uid = fields.get(7)?.parse().ok()?;
            let (_, hex_port) = local.rsplit_once(':')?;
            let listening = *state == LISTEN && u16::from_str_radix(hex_port, 16).ok()? == port;
            listening.then_some(uid)
        })
        .collect()
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
        assert_eq!(parse(TABLE, 8420), vec![0]);
        assert_eq!(
            parse(TABLE, 8080),
            vec![65534],
            "established sockets do not count"
        );
        assert!(parse(TABLE, 9).is_empty());
    }

    #[test]
    fn a_port_this_test_listens_on_is_its_own() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        // SAFETY: no preconditions.
        let me = unsafe { libc::geteuid() };
        assert_eq!(listeners(port), vec![me]);
    }
}
