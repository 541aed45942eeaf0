//! Which process made a connection to the proxy: the client's socket is found in
//! the command's network namespace's table (`/proc/PID/net/tcp`, by its address),
//! then among the descriptors of the processes of that namespace. Read only for
//! what is logged (a refusal, a question), never on the way of an allowed
//! connection.

use std::net::SocketAddr;

/// The process (host pid, name) holding the socket whose local address is
/// `peer`, in the network namespace of process `inside`.
pub fn connected_from(inside: i32, peer: SocketAddr) -> Option<(u32, String)> {
    let table = match peer {
        SocketAddr::V4(_) => "tcp",
        SocketAddr::V6(_) => "tcp6",
    };
    let text = std::fs::read_to_string(format!("/proc/{inside}/net/{table}")).ok()?;
    let inode = socket_inode(&text, peer)?;
    let netns = ns_of(inside as u32)?;
    let wanted = format!("socket:[{inode}]");
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if ns_of(pid) != Some(netns) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == wanted.as_str())
        });
        if holds {
            return Some((pid, crate::session::audit::comm(pid)));
        }
    }
    None
}

fn ns_of(pid: u32) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}/ns/net"))
        .ok()
        .map(|m| m.ino())
}

/// The inode of the socket whose local address is `addr` in a `/proc/net/tcp`
/// (or `tcp6`) table.
pub fn socket_inode(table: &str, addr: SocketAddr) -> Option<u64> {
    let want = hex_address(addr);
    table.lines().skip(1).find_map(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        (cols.get(1)?.eq_ignore_ascii_case(&want))
            .then(|| cols.get(9)?.parse().ok())
            .flatten()
    })
}

/// An address as the kernel's tables write it: the address's 32-bit words each
/// in the machine's order, in hex, then `:` and the port in hex.
fn hex_address(addr: SocketAddr) -> String {
    let ip = match addr {
        SocketAddr::V4(a) => format!("{:08X}", u32::from_ne_bytes(a.ip().octets())),
        SocketAddr::V6(a) => a
            .ip()
            .octets()
            .chunks(4)
            .map(|w| format!("{:08X}", u32::from_ne_bytes([w[0], w[1], w[2], w[3]])))
            .collect(),
    };
    format!("{ip}:{:04X}", addr.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_is_found_by_its_local_address() {
        // As x86_64 writes it (127.0.0.1:45678 and 127.0.0.1:3128).
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
             0: 0100007F:0C38 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0\n   \
             1: 0100007F:B26E 0100007F:0C38 01 00000000:00000000 00:00000000 00000000     0        0 222 1 0 20 4 30 10 -1\n";
        if cfg!(target_endian = "little") {
            assert_eq!(
                socket_inode(table, "127.0.0.1:45678".parse().unwrap()),
                Some(222)
            );
            assert_eq!(
                socket_inode(table, "127.0.0.1:3128".parse().unwrap()),
                Some(111)
            );
            assert_eq!(socket_inode(table, "127.0.0.1:1".parse().unwrap()), None);
        }
    }

    #[test]
    fn this_process_is_found_holding_its_own_connection() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let me = std::process::id();
        let found = connected_from(me as i32, c.local_addr().unwrap());
        assert_eq!(found.map(|f| f.0), Some(me));
    }
}
