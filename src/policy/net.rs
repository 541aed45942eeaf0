//! The network policy of `veilfs run --net allow=...`: which destinations the
//! command may reach through the session's proxy. Pure: text in, decisions out.
//!
//! A destination is what a client asks the proxy for: a host (a name, or an IP
//! address written as one) and a port. A SPEC names destinations:
//!
//! | SPEC | names |
//! |---|---|
//! | `api.example.com` | that name, any port |
//! | `api.example.com:443` | that name, port 443 |
//! | `*.example.com` (`:PORT`) | every name below `example.com` (not `example.com` itself) |
//! | `192.0.2.7:443`, `[2001:db8::7]:443` | that address written as the host, that port (a port is required) |
//!
//! Names are compared as written by the client, lower-cased and without a final
//! dot; the proxy resolves a name only once a SPEC has named it, so a name no SPEC
//! names is never looked up (no DNS query carries it out). An address written as
//! the host matches only an address SPEC, never a name that resolves to it.
//!
//! The lists: `allow`, `ask` and `deny`. The strictest list that names a
//! destination wins (`deny`, then `ask`, then `allow`); a destination no list names
//! is refused.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use serde::Deserialize;
use toml::Spanned;

use super::file::{LineIndex, Location, PolicyError};

/// What a list does with the destinations it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NetAction {
    Allow,
    Ask,
    Deny,
}

impl NetAction {
    pub fn as_str(self) -> &'static str {
        match self {
            NetAction::Allow => "allow",
            NetAction::Ask => "ask",
            NetAction::Deny => "deny",
        }
    }
}

/// A host as a client names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    /// A name: lower-case, no final dot.
    Name(String),
    /// An address written as the host (IPv4-mapped IPv6 addresses as IPv4).
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(IpAddr::V6(a)) => write!(f, "[{a}]"),
            Host::Ip(a) => write!(f, "{a}"),
        }
    }
}

/// Where a client asks to connect.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Dest {
    pub host: Host,
    pub port: u16,
}

impl fmt::Display for Dest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Why a host, a destination or a SPEC cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetSpecError {
    #[error("empty")]
    Empty,
    #[error("{0:?} is neither a host name nor an IP address")]
    BadHost(String),
    #[error(
        "{0:?} looks like an address in a form the resolver reads (a number as its \
         last label); write the address itself"
    )]
    NumericName(String),
    #[error("the port {0:?} is not a number from 1 to 65535")]
    BadPort(String),
    #[error("an address needs a port (`{0}:443`)")]
    AddressWithoutPort(String),
    #[error("a port is required (`host:port`)")]
    NoPort,
    #[error("a glob is `*.` followed by a name (`*.example.com`), not {0:?}")]
    BadGlob(String),
}

/// Reads a host name: lower-cased, the final dot removed; letters, digits, `-`
/// and `_` in labels of 1 to 63 bytes, 253 bytes in all. A name whose last label
/// is a number (or `0x...`) is refused: the resolver would read it as an address
/// (`127.1`, `2130706433`), which only an address SPEC may name.
fn name(text: &str) -> Result<String, NetSpecError> {
    let lower = text.to_ascii_lowercase();
    let n = lower.strip_suffix('.').unwrap_or(&lower);
    let bad = || NetSpecError::BadHost(text.to_string());
    if n.is_empty() || n.len() > 253 {
        return Err(bad());
    }
    for label in n.split('.') {
        if label.is_empty()
            || label.len() > 63
            || !label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(bad());
        }
    }
    let last = n.rsplit('.').next().unwrap_or(n);
    if last.bytes().all(|b| b.is_ascii_digit()) || last.starts_with("0x") {
        return Err(NetSpecError::NumericName(text.to_string()));
    }
    Ok(n.to_string())
}

/// Reads a host as a client writes it: an address (IPv6 in brackets or bare) or a
/// name.
pub fn parse_host(text: &str) -> Result<Host, NetSpecError> {
    if text.is_empty() {
        return Err(NetSpecError::Empty);
    }
    let bare = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(Host::Ip(ip.to_canonical()));
    }
    if bare.len() != text.len() {
        return Err(NetSpecError::BadHost(text.to_string()));
    }
    name(text).map(Host::Name)
}

fn parse_port(text: &str) -> Result<u16, NetSpecError> {
    match text.parse::<u16>() {
        Ok(p) if p > 0 && text.bytes().all(|b| b.is_ascii_digit()) => Ok(p),
        _ => Err(NetSpecError::BadPort(text.to_string())),
    }
}

/// Splits `host:port` (`[v6]:port`); the port is `None` when none is written. A
/// bare IPv6 address (more than one `:`) has no port.
fn split_port(text: &str) -> Result<(&str, Option<u16>), NetSpecError> {
    if let Some(rest) = text.strip_prefix('[') {
        let end = rest
            .find(']')
            .ok_or_else(|| NetSpecError::BadHost(text.to_string()))?;
        let after = &rest[end + 1..];
        return match after.strip_prefix(':') {
            Some(p) => Ok((&text[..end + 2], Some(parse_port(p)?))),
            None if after.is_empty() => Ok((text, None)),
            None => Err(NetSpecError::BadHost(text.to_string())),
        };
    }
    match text.rsplit_once(':') {
        Some((h, _)) if h.contains(':') => Ok((text, None)),
        Some((h, p)) => Ok((h, Some(parse_port(p)?))),
        None => Ok((text, None)),
    }
}

impl Dest {
    /// Reads `host:port` (`[v6]:port`), as `explain --net` is given it.
    pub fn parse(text: &str) -> Result<Dest, NetSpecError> {
        let (host, port) = split_port(text.trim())?;
        Ok(Dest {
            host: parse_host(host)?,
            port: port.ok_or(NetSpecError::NoPort)?,
        })
    }
}

/// What a SPEC names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    /// One name.
    Name { name: String, port: Option<u16> },
    /// Every name ending in `.suffix`.
    Below { suffix: String, port: Option<u16> },
    /// One address, written as the host.
    Ip { ip: IpAddr, port: u16 },
}

impl Spec {
    /// Reads a SPEC (see the module's documentation).
    pub fn parse(text: &str) -> Result<Spec, NetSpecError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(NetSpecError::Empty);
        }
        let (host, port) = split_port(text)?;
        if let Some(rest) = host.strip_prefix("*.") {
            return Ok(Spec::Below {
                suffix: name(rest)?,
                port,
            });
        }
        if host.contains('*') {
            return Err(NetSpecError::BadGlob(host.to_string()));
        }
        match parse_host(host)? {
            Host::Ip(ip) => match port {
                Some(port) => Ok(Spec::Ip { ip, port }),
                None => Err(NetSpecError::AddressWithoutPort(host.to_string())),
            },
            Host::Name(name) => Ok(Spec::Name { name, port }),
        }
    }

    /// Whether the SPEC names `dest`.
    pub fn names(&self, dest: &Dest) -> bool {
        let port_ok = |p: &Option<u16>| p.is_none_or(|p| p == dest.port);
        match (self, &dest.host) {
            (Spec::Name { name, port }, Host::Name(n)) => n == name && port_ok(port),
            (Spec::Below { suffix, port }, Host::Name(n)) => {
                n.len() > suffix.len() + 1
                    && n.ends_with(suffix.as_str())
                    && n.as_bytes()[n.len() - suffix.len() - 1] == b'.'
                    && port_ok(port)
            }
            (Spec::Ip { ip, port }, Host::Ip(a)) => ip == a && *port == dest.port,
            _ => false,
        }
    }

    /// Whether the SPEC names the address `ip` at `port` (an address a name
    /// resolved to: only address SPECs name it).
    pub fn names_address(&self, ip: IpAddr, port: u16) -> bool {
        matches!(self, Spec::Ip { ip: i, port: p } if *i == ip.to_canonical() && *p == port)
    }
}

/// Where a SPEC was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetOrigin {
    /// `--net allow=...`.
    CommandLine,
    /// The `[network]` table of a policy file.
    File(Location),
}

/// One SPEC of one list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetRule {
    pub action: NetAction,
    pub spec: Spec,
    /// As written.
    pub text: String,
    pub origin: NetOrigin,
}

impl NetRule {
    /// The rule as `explain`, notices and the audit log name it.
    pub fn why(&self) -> String {
        match &self.origin {
            NetOrigin::CommandLine => {
                format!("{} {:?} (--net)", self.action.as_str(), self.text)
            }
            NetOrigin::File(at) => {
                format!("network.{} {:?} ({at})", self.action.as_str(), self.text)
            }
        }
    }
}

/// What the lists decide for one destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetDecision<'a> {
    pub action: NetAction,
    /// The SPEC that decided; `None`: no list names the destination.
    pub rule: Option<&'a NetRule>,
}

impl NetDecision<'_> {
    pub fn why(&self) -> String {
        match self.rule {
            Some(r) => r.why(),
            None => "not in the network allow-list".into(),
        }
    }
}

/// The network lists of a session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetRules {
    rules: Vec<NetRule>,
}

impl NetRules {
    /// `--net allow=SPEC,...`: the SPECs, each allowed.
    pub fn from_command_line(specs: &str) -> Result<NetRules, (String, NetSpecError)> {
        let mut rules = Vec::new();
        for text in specs.split(',').filter(|s| !s.trim().is_empty()) {
            let spec = Spec::parse(text).map_err(|e| (text.to_string(), e))?;
            rules.push(NetRule {
                action: NetAction::Allow,
                spec,
                text: text.trim().to_string(),
                origin: NetOrigin::CommandLine,
            });
        }
        Ok(NetRules { rules })
    }

    /// These rules, then `other`'s.
    pub fn and(mut self, other: NetRules) -> NetRules {
        self.rules.extend(other.rules);
        self
    }

    pub fn rules(&self) -> &[NetRule] {
        &self.rules
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The strictest list naming `dest`; refused when none does.
    pub fn decide(&self, dest: &Dest) -> NetDecision<'_> {
        self.strictest(|s| s.names(dest)).unwrap_or(NetDecision {
            action: NetAction::Deny,
            rule: None,
        })
    }

    /// A `deny` address SPEC naming `ip` at `port`, an address an allowed name
    /// resolved to: the proxy does not connect there.
    pub fn denies_address(&self, ip: IpAddr, port: u16) -> Option<&NetRule> {
        self.rules
            .iter()
            .find(|r| r.action == NetAction::Deny && r.spec.names_address(ip, port))
    }

    fn strictest(&self, names: impl Fn(&Spec) -> bool) -> Option<NetDecision<'_>> {
        self.rules
            .iter()
            .filter(|r| names(&r.spec))
            .max_by_key(|r| r.action)
            .map(|r| NetDecision {
                action: r.action,
                rule: Some(r),
            })
    }
}

#[derive(Deserialize)]
struct DocShape {
    network: Option<Spanned<NetworkShape>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkShape {
    #[serde(default)]
    allow: Vec<Spanned<String>>,
    #[serde(default)]
    ask: Vec<Spanned<String>>,
    #[serde(default)]
    deny: Vec<Spanned<String>>,
}

/// Why the `[network]` table of a policy file cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(PolicyError::to_string).collect::<Vec<_>>().join("\n"))]
pub struct NetSectionError(pub Vec<PolicyError>);

/// Reads the `[network]` table of a policy file (the other keys are not looked
/// at); `None` when there is none. `name` is what errors print as the file.
pub fn parse_network_section(name: &str, text: &str) -> Result<Option<NetRules>, NetSectionError> {
    let index = LineIndex::new(Arc::from(name), text);
    let doc: DocShape = toml::from_str(text).map_err(|e| {
        NetSectionError(vec![PolicyError {
            at: index.at(e.span().map_or(0, |s| s.start)),
            message: e.message().replace(
                "expected struct NetworkShape",
                "expected a table with `allow`, `ask` and `deny`",
            ),
        }])
    })?;
    let Some(net) = doc.network else {
        return Ok(None);
    };
    let net = net.into_inner();
    let mut errors = Vec::new();
    let mut rules = Vec::new();
    for (action, list) in [
        (NetAction::Allow, net.allow),
        (NetAction::Ask, net.ask),
        (NetAction::Deny, net.deny),
    ] {
        for s in list {
            let at = index.at(s.span().start);
            let text = s.into_inner();
            match Spec::parse(&text) {
                Ok(spec) => rules.push(NetRule {
                    action,
                    spec,
                    text,
                    origin: NetOrigin::File(at),
                }),
                Err(e) => errors.push(PolicyError {
                    at,
                    message: format!("network.{}: {text:?}: {e}", action.as_str()),
                }),
            }
        }
    }
    if errors.is_empty() {
        Ok(Some(NetRules { rules }))
    } else {
        Err(NetSectionError(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(text: &str) -> NetRules {
        parse_network_section("p.toml", text).unwrap().unwrap()
    }

    #[test]
    fn specs_name_what_the_table_says() {
        // (spec, destination, named)
        let table: &[(&str, &str, bool)] = &[
            ("api.example.com", "api.example.com:443", true),
            ("api.example.com", "api.example.com:22", true),
            ("api.example.com", "API.Example.COM.:443", true),
            ("api.example.com", "example.com:443", false),
            ("api.example.com", "x.api.example.com:443", false),
            ("api.example.com", "api.example.com.evil.test:443", false),
            ("api.example.com:443", "api.example.com:443", true),
            ("api.example.com:443", "api.example.com:80", false),
            ("*.example.com", "a.example.com:443", true),
            ("*.example.com", "a.b.example.com:1", true),
            ("*.example.com", "example.com:443", false),
            ("*.example.com", "aexample.com:443", false),
            ("*.example.com:443", "a.example.com:80", false),
            ("192.0.2.7:443", "192.0.2.7:443", true),
            ("192.0.2.7:443", "192.0.2.7:80", false),
            ("192.0.2.7:443", "[::ffff:192.0.2.7]:443", true),
            ("[2001:db8::7]:443", "[2001:db8::7]:443", true),
            ("[2001:db8::7]:443", "[2001:db8:0::7]:443", true),
            // A name never names an address, nor an address a name.
            ("localhost", "127.0.0.1:80", false),
            ("127.0.0.1:80", "localhost:80", false),
        ];
        for (spec, dest, named) in table {
            let s = Spec::parse(spec).unwrap();
            let d = Dest::parse(dest).unwrap();
            assert_eq!(s.names(&d), *named, "{spec} names {dest}");
        }
    }

    #[test]
    fn bad_specs_and_destinations_are_refused() {
        for bad in [
            "",
            "*",
            "*.",
            "a*.example.com",
            "ex ample.com",
            "192.0.2.7",
            "[::1]",
            "a.com:0",
            "a.com:x",
            "a.com:70000",
            "[::1:80",
            "127.1",
            "2130706433",
            "a.0x7f",
            "*.1",
        ] {
            assert!(Spec::parse(bad).is_err(), "{bad:?} is a SPEC");
        }
        for bad in [
            "a.com",
            "a.com:",
            "127.1:80",
            "0x7f000001:80",
            "a..b:1",
            "[a.b]:1",
        ] {
            assert!(Dest::parse(bad).is_err(), "{bad:?} is a destination");
        }
    }

    #[test]
    fn the_strictest_list_wins_and_unlisted_is_refused() {
        let r = rules(
            "[network]\nallow = [\"*.example.com\", \"192.0.2.7:443\"]\n\
             ask = [\"gist.example.com\"]\ndeny = [\"secret.example.com\"]\n",
        );
        let decide = |d: &str| r.decide(&Dest::parse(d).unwrap()).action;
        assert_eq!(decide("api.example.com:443"), NetAction::Allow);
        assert_eq!(decide("gist.example.com:443"), NetAction::Ask);
        assert_eq!(decide("secret.example.com:443"), NetAction::Deny);
        assert_eq!(decide("192.0.2.7:443"), NetAction::Allow);
        assert_eq!(decide("192.0.2.8:443"), NetAction::Deny);
        assert_eq!(decide("other.test:443"), NetAction::Deny);
        let d = r.decide(&Dest::parse("other.test:443").unwrap());
        assert_eq!(d.rule, None);
        assert_eq!(d.why(), "not in the network allow-list");
        let d = r.decide(&Dest::parse("secret.example.com:1").unwrap());
        assert_eq!(d.why(), "network.deny \"secret.example.com\" (p.toml:4:9)");
    }

    #[test]
    fn addresses_a_name_resolves_to_can_be_denied() {
        let r = rules("[network]\nallow = [\"a.test\"]\ndeny = [\"169.254.169.254:80\"]\n");
        let meta: IpAddr = "169.254.169.254".parse().unwrap();
        assert!(r.denies_address(meta, 80).is_some());
        assert!(r.denies_address(meta, 443).is_none());
        assert!(
            r.denies_address("::ffff:169.254.169.254".parse().unwrap(), 80)
                .is_some()
        );
    }

    #[test]
    fn the_table_is_checked_where_written() {
        assert_eq!(
            parse_network_section("p.toml", "default = \"deny\"\n"),
            Ok(None)
        );
        let e = parse_network_section("p.toml", "[network]\nallow = [\"ok.test\", \"*\"]\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("p.toml:2:21: error: network.allow: \"*\""),
            "{e}"
        );
        let e = parse_network_section("p.toml", "[network]\nallowed = []\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `allowed`"), "{e}");
    }

    #[test]
    fn the_command_line_list_is_allowed() {
        let r = NetRules::from_command_line("localhost:8080, *.example.com").unwrap();
        assert_eq!(r.rules().len(), 2);
        assert!(r.rules().iter().all(|x| x.origin == NetOrigin::CommandLine));
        let d = r.decide(&Dest::parse("localhost:8080").unwrap());
        assert_eq!(d.action, NetAction::Allow);
        assert_eq!(d.why(), "allow \"localhost:8080\" (--net)");
        assert!(NetRules::from_command_line("a.test,bad host").is_err());
    }
}
