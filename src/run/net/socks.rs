//! The SOCKS5 side of the proxy (RFC 1928): no authentication, `CONNECT` only.
//! A name (`socks5h://`, address type 3) is decided by name and resolved by the
//! proxy; an address (types 1 and 4) is an address written as the host, which only
//! an address SPEC allows. `BIND` and `UDP ASSOCIATE` are refused (no UDP leaves
//! the session).

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::policy::net::{Dest, Host, NetSpecError, parse_host};

/// The first byte of a SOCKS5 greeting.
pub const VERSION: u8 = 5;

/// The replies the proxy gives (RFC 1928, section 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    Succeeded = 0,
    GeneralFailure = 1,
    NotAllowed = 2,
    HostUnreachable = 4,
    CommandNotSupported = 7,
    AddressNotSupported = 8,
}

/// Why a SOCKS5 exchange ended before a destination was named.
#[derive(Debug, thiserror::Error)]
pub enum SocksError {
    #[error("reading the request: {0}")]
    Io(#[from] io::Error),
    #[error("not SOCKS5, or no method the proxy offers (no authentication)")]
    Greeting,
    #[error("the command {0} is not CONNECT")]
    Command(u8),
    #[error("address type {0}")]
    AddressType(u8),
    #[error("{0}")]
    BadDest(#[from] NetSpecError),
}

impl SocksError {
    /// What the client is answered, when the exchange got as far as a request.
    pub fn reply(&self) -> Option<Reply> {
        match self {
            SocksError::Io(_) | SocksError::Greeting => None,
            SocksError::Command(_) => Some(Reply::CommandNotSupported),
            SocksError::AddressType(_) => Some(Reply::AddressNotSupported),
            SocksError::BadDest(_) => Some(Reply::NotAllowed),
        }
    }
}

/// Reads the greeting (answering it) and the request: where the client asks to
/// connect. On an error the caller answers with [`SocksError::reply`].
pub fn handshake(s: &mut (impl Read + Write)) -> Result<Dest, SocksError> {
    let mut two = [0u8; 2];
    s.read_exact(&mut two)?;
    if two[0] != VERSION || two[1] == 0 {
        return Err(SocksError::Greeting);
    }
    let mut methods = vec![0u8; usize::from(two[1])];
    s.read_exact(&mut methods)?;
    if !methods.contains(&0) {
        s.write_all(&[VERSION, 0xff])?;
        return Err(SocksError::Greeting);
    }
    s.write_all(&[VERSION, 0])?;
    let mut req = [0u8; 4];
    s.read_exact(&mut req)?;
    if req[0] != VERSION {
        return Err(SocksError::Greeting);
    }
    let host = match req[3] {
        1 => {
            let mut a = [0u8; 4];
            s.read_exact(&mut a)?;
            Host::Ip(IpAddr::V4(Ipv4Addr::from(a)))
        }
        4 => {
            let mut a = [0u8; 16];
            s.read_exact(&mut a)?;
            Host::Ip(IpAddr::V6(Ipv6Addr::from(a)).to_canonical())
        }
        3 => {
            let mut len = [0u8; 1];
            s.read_exact(&mut len)?;
            let mut name = vec![0u8; usize::from(len[0])];
            s.read_exact(&mut name)?;
            let name = String::from_utf8(name)
                .map_err(|e| NetSpecError::BadHost(String::from_utf8_lossy(e.as_bytes()).into()))?;
            parse_host(&name)?
        }
        t => return Err(SocksError::AddressType(t)),
    };
    let mut port = [0u8; 2];
    s.read_exact(&mut port)?;
    if req[1] != 1 {
        return Err(SocksError::Command(req[1]));
    }
    let port = u16::from_be_bytes(port);
    if port == 0 {
        return Err(NetSpecError::BadPort("0".into()).into());
    }
    Ok(Dest { host, port })
}

/// Answers the request with `reply` (the bound address said as 0.0.0.0:0).
pub fn answer(s: &mut impl Write, reply: Reply) -> io::Result<()> {
    s.write_all(&[VERSION, reply as u8, 0, 1, 0, 0, 0, 0, 0, 0])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client's bytes in, the proxy's answers out.
    struct Pipe {
        input: io::Cursor<Vec<u8>>,
        output: Vec<u8>,
    }
    impl Read for Pipe {
        fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
            self.input.read(b)
        }
    }
    impl Write for Pipe {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.output.write(b)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn exchange(bytes: &[u8]) -> (Result<Dest, SocksError>, Vec<u8>) {
        let mut p = Pipe {
            input: io::Cursor::new(bytes.to_vec()),
            output: Vec::new(),
        };
        (handshake(&mut p), p.output)
    }

    #[test]
    fn names_and_addresses_are_read_as_the_client_wrote_them() {
        let mut name = vec![5, 1, 0, 5, 1, 0, 3, 6];
        name.extend_from_slice(b"A.Test");
        name.extend_from_slice(&443u16.to_be_bytes());
        let (d, out) = exchange(&name);
        assert_eq!(d.unwrap().to_string(), "a.test:443");
        assert_eq!(out, [5, 0]);
        let (d, _) = exchange(&[5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1, 0, 80]);
        assert_eq!(d.unwrap().to_string(), "127.0.0.1:80");
        let mut v6 = vec![5, 1, 0, 5, 1, 0, 4];
        v6.extend_from_slice(&"::ffff:192.0.2.1".parse::<Ipv6Addr>().unwrap().octets());
        v6.extend_from_slice(&[0, 80]);
        assert_eq!(exchange(&v6).0.unwrap().to_string(), "192.0.2.1:80");
    }

    #[test]
    fn what_the_proxy_does_not_do_is_refused() {
        // Authentication only.
        let (d, out) = exchange(&[5, 1, 2]);
        assert!(matches!(d, Err(SocksError::Greeting)));
        assert_eq!(out, [5, 0xff]);
        // SOCKS4.
        assert!(matches!(
            exchange(&[4, 1, 0, 80]).0,
            Err(SocksError::Greeting)
        ));
        // BIND and UDP ASSOCIATE.
        for cmd in [2, 3] {
            let e = exchange(&[5, 1, 0, 5, cmd, 0, 1, 127, 0, 0, 1, 0, 80])
                .0
                .unwrap_err();
            assert_eq!(e.reply(), Some(Reply::CommandNotSupported));
        }
        // A name the resolver would read as an address.
        let mut n = vec![5, 1, 0, 5, 1, 0, 3, 5];
        n.extend_from_slice(b"127.1");
        n.extend_from_slice(&[0, 80]);
        assert_eq!(exchange(&n).0.unwrap_err().reply(), Some(Reply::NotAllowed));
        // Cut short.
        assert!(matches!(
            exchange(&[5, 1, 0, 5, 1]).0,
            Err(SocksError::Io(_))
        ));
    }
}
