//! The HTTP side of the proxy: a request's head read from the client, its
//! destination, and the head sent on for plain HTTP.
//!
//! * `CONNECT host:port HTTP/1.1`: a tunnel; the client speaks TLS (or anything)
//!   through it once the proxy answers `200`.
//! * `GET http://host[:port]/path HTTP/1.1` (any method, an absolute URI): plain
//!   HTTP; the head goes on in origin form (`GET /path`), with `Host` set to the
//!   URI's authority (the server sees the host that was allowed, never another one
//!   a header names), the proxy's own headers removed, and `Connection: close`, so
//!   that every request on a connection reaches the destination it names.

use std::io::{self, Read};

use crate::policy::net::{Dest, Host, NetSpecError, parse_host};

/// The most bytes a request's head may take.
pub const MAX_HEAD: usize = 64 * 1024;

/// What a client asked for.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// A tunnel to `dest`.
    Connect(Dest),
    /// One plain HTTP request to `dest`, whose head, rewritten, is `head`.
    Forward { dest: Dest, head: Vec<u8> },
}

impl Request {
    pub fn dest(&self) -> &Dest {
        match self {
            Request::Connect(d) | Request::Forward { dest: d, .. } => d,
        }
    }
}

/// Why a request cannot be served (the client gets `400`).
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("reading the request: {0}")]
    Io(#[from] io::Error),
    #[error("the request's head is longer than {MAX_HEAD} bytes")]
    TooLong,
    #[error("the connection ended before the request's head did")]
    Ended,
    #[error("not an HTTP request line")]
    BadLine,
    #[error("only `CONNECT` and `http://` URIs go through the proxy")]
    NotProxied,
    #[error("{0}")]
    BadDest(#[from] NetSpecError),
}

/// Reads a request's head from `r`: the request, and the bytes the client sent
/// after its head (the start of a body, or of a tunnel's first message).
pub fn read_request(r: &mut impl Read) -> Result<(Request, Vec<u8>), HttpError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(at) = find(&buf, b"\r\n\r\n") {
            break at + 4;
        }
        if buf.len() > MAX_HEAD {
            return Err(HttpError::TooLong);
        }
        match r.read(&mut chunk)? {
            0 => return Err(HttpError::Ended),
            n => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let rest = buf.split_off(end);
    Ok((parse_head(&buf)?, rest))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Reads a whole head (ending in an empty line).
pub fn parse_head(head: &[u8]) -> Result<Request, HttpError> {
    let text = std::str::from_utf8(head).map_err(|_| HttpError::BadLine)?;
    let mut lines = text.split("\r\n");
    let line = lines.next().ok_or(HttpError::BadLine)?;
    let mut words = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(HttpError::BadLine);
    };
    if method.is_empty() || !version.starts_with("HTTP/1.") {
        return Err(HttpError::BadLine);
    }
    if method.eq_ignore_ascii_case("CONNECT") {
        return Ok(Request::Connect(Dest::parse(target)?));
    }
    let Some(after) = strip_prefix_ignore_case(target, "http://") else {
        return Err(HttpError::NotProxied);
    };
    let (authority, path) = match after.find(['/', '?']) {
        Some(at) => (&after[..at], &after[at..]),
        None => (after, "/"),
    };
    if authority.contains('@') {
        // Credentials in the URI: `http://allowed.test@other.test/` names
        // other.test, and the proxy does not guess.
        return Err(HttpError::NotProxied);
    }
    let dest = authority_dest(authority)?;
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_string()
    };
    // `Host` is the destination as decided (never the authority's own spelling,
    // which may carry what the server reads otherwise).
    let host = match dest.port {
        80 => dest.host.to_string(),
        _ => dest.to_string(),
    };
    let mut out = format!("{method} {path} {version}\r\nHost: {host}\r\n");
    for h in lines.filter(|l| !l.is_empty()) {
        let name = h.split(':').next().unwrap_or("").trim();
        let dropped = [
            "host",
            "connection",
            "keep-alive",
            "proxy-connection",
            "proxy-authorization",
        ];
        if !dropped.iter().any(|d| name.eq_ignore_ascii_case(d)) {
            out.push_str(h);
            out.push_str("\r\n");
        }
    }
    out.push_str("Connection: close\r\n\r\n");
    Ok(Request::Forward {
        dest,
        head: out.into_bytes(),
    })
}

/// `host[:port]` of an `http://` URI (port 80 when none is written).
fn authority_dest(authority: &str) -> Result<Dest, HttpError> {
    match Dest::parse(authority) {
        Ok(d) => Ok(d),
        Err(NetSpecError::NoPort) => Ok(Dest {
            host: host_of(authority)?,
            port: 80,
        }),
        Err(e) => Err(e.into()),
    }
}

fn host_of(text: &str) -> Result<Host, HttpError> {
    Ok(parse_host(text)?)
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// The answer to a request the proxy refuses or cannot serve.
pub fn refusal(status: &str, why: &str) -> Vec<u8> {
    let body = format!("veilfs: {why}\n");
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The answer to a `CONNECT` the proxy made.
pub const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";

#[cfg(test)]
mod tests {
    use super::*;

    fn head(s: &str) -> Result<Request, HttpError> {
        parse_head(s.as_bytes())
    }

    #[test]
    fn connect_names_its_destination() {
        let r = head("CONNECT api.example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!(
            r,
            Request::Connect(Dest::parse("api.example.com:443").unwrap())
        );
        let r = head("CONNECT [::1]:8080 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(r.dest().to_string(), "[::1]:8080");
        assert!(head("CONNECT api.example.com HTTP/1.1\r\n\r\n").is_err());
        assert!(head("CONNECT 127.1:80 HTTP/1.1\r\n\r\n").is_err());
    }

    #[test]
    fn plain_http_goes_on_in_origin_form_to_the_host_of_its_uri() {
        let r = head(
            "GET http://a.test:8080/x?y HTTP/1.1\r\nHost: other.test\r\n\
             Proxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n",
        )
        .unwrap();
        let Request::Forward { dest, head } = r else {
            panic!("not forwarded")
        };
        assert_eq!(dest.to_string(), "a.test:8080");
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "GET /x?y HTTP/1.1\r\nHost: a.test:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        let Request::Forward { dest, head } = head_of("POST HTTP://A.test?q HTTP/1.0\r\n\r\n")
        else {
            panic!("not forwarded")
        };
        assert_eq!(dest.to_string(), "a.test:80");
        assert!(
            String::from_utf8(head)
                .unwrap()
                .starts_with("POST /?q HTTP/1.0\r\n")
        );
    }

    #[test]
    fn the_host_header_is_the_destination_as_decided() {
        for (line, host) in [
            ("GET http://A.Test./x HTTP/1.1", "Host: a.test\r\n"),
            (
                "GET http://a.test:9000\t/x HTTP/1.1",
                "Host: a.test:9000\r\n",
            ),
            ("GET http://[::1]:8080/ HTTP/1.1", "Host: [::1]:8080\r\n"),
        ] {
            let Request::Forward { head, .. } = head_of(&format!("{line}\r\n\r\n")) else {
                panic!("not forwarded")
            };
            assert!(String::from_utf8(head).unwrap().contains(host), "{line}");
        }
    }

    fn head_of(s: &str) -> Request {
        head(s).unwrap()
    }

    #[test]
    fn what_is_not_a_proxy_request_is_refused() {
        for bad in [
            "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n",
            "GET https://a.test/ HTTP/1.1\r\n\r\n",
            "GET http://allowed.test@other.test/ HTTP/1.1\r\n\r\n",
            "GET http://a.test/ HTTP/2\r\n\r\n",
            "GET  http://a.test/ HTTP/1.1\r\n\r\n",
            "\r\n\r\n",
        ] {
            assert!(head(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_head_is_read_up_to_its_end_and_no_further() {
        let mut r: &[u8] = b"CONNECT a.test:443 HTTP/1.1\r\n\r\n\x16\x03\x01";
        let (req, rest) = read_request(&mut r).unwrap();
        assert_eq!(req.dest().to_string(), "a.test:443");
        assert_eq!(rest, b"\x16\x03\x01");
        let mut r: &[u8] = b"CONNECT a.test:443 HTTP/1.1\r\n";
        assert!(matches!(read_request(&mut r), Err(HttpError::Ended)));
        let long = vec![b'a'; MAX_HEAD + 10];
        assert!(matches!(
            read_request(&mut long.as_slice()),
            Err(HttpError::TooLong)
        ));
    }
}
