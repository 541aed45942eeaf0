//! What the command may reach on the network (`veilfs run --net`):
//!
//! * `host` (the default, said in the start-up line): the host's network, as
//!   before.
//! * `none`: a network namespace of its own, with loopback only.
//! * `allow=SPEC,...` (or a `[network]` table in the workspace policy): a network
//!   namespace of its own whose only way out is the session's proxy
//!   ([`proxy`]), which runs in the daemon outside it and connects only where the
//!   lists ([`crate::policy::net`]) allow.
//!
//! How the proxy is reached: init makes the namespace, brings its loopback up,
//! makes a listening socket on `127.0.0.1:`[`PROXY_PORT`] there, and hands it
//! over a Unix socket (`SCM_RIGHTS`) to the daemon, which accepts on it from
//! outside. The command gets `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` (and
//! their lower-case forms) naming it; its own loopback stays its own
//! (`NO_PROXY=localhost,127.0.0.1,::1`). Nothing else leaves the namespace: no
//! route, no DNS server, no other interface; a raw socket gets nowhere either
//! (and `CAP_NET_RAW`, like `CAP_NET_ADMIN`, is dropped).

pub mod ask;
pub mod http;
pub mod proxy;
pub mod socks;
pub mod who;

use std::ffi::OsString;
use std::os::fd::OwnedFd;

use crate::policy::net::{NetRules, NetSpecError};

/// The socket families no network namespace bounds, which a command with one of
/// its own cannot make (`socket()` fails with `EAFNOSUPPORT`): `AF_VSOCK`, a
/// virtual machine's channel to its host (and the host's way in), and Bluetooth.
pub const UNBOUNDED: [i32; 2] = [libc::AF_VSOCK, libc::AF_BLUETOOTH];

/// Where the proxy listens in the command's network namespace.
pub const PROXY_PORT: u16 = 3128;

/// `--net` as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetArg {
    Host,
    None,
    Allow(NetRules),
}

/// Why `--net` cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum NetArgError {
    #[error("expected `host`, `none` or `allow=SPEC[,SPEC...]`")]
    Unknown,
    #[error("{spec:?}: {why}")]
    Spec { spec: String, why: NetSpecError },
    #[error("`allow=` names nothing: `--net none` gives loopback only")]
    Empty,
}

/// Reads `--net`.
pub fn parse_net(text: &str) -> Result<NetArg, NetArgError> {
    match text {
        "host" => Ok(NetArg::Host),
        "none" => Ok(NetArg::None),
        _ => {
            let specs = text.strip_prefix("allow=").ok_or(NetArgError::Unknown)?;
            let rules = NetRules::from_command_line(specs)
                .map_err(|(spec, why)| NetArgError::Spec { spec, why })?;
            if rules.is_empty() {
                return Err(NetArgError::Empty);
            }
            Ok(NetArg::Allow(rules))
        }
    }
}

/// The session's network, as planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Network {
    /// The host's; `table_unused`: the policy has a `[network]` table that `--net
    /// host` set aside.
    Host { table_unused: bool },
    /// Loopback only.
    Loopback,
    /// Through the proxy, by these lists.
    Proxied(NetRules),
}

impl Network {
    /// Decides the network from `--net` (`arg`) and the workspace policy's
    /// `[network]` table (`table`): without `--net`, a table confines the command
    /// to it; `allow=` adds to the table (whose `deny` and `ask` still hold).
    pub fn decide(arg: Option<&NetArg>, table: Option<NetRules>) -> Network {
        match (arg, table) {
            (Some(NetArg::Host), t) => Network::Host {
                table_unused: t.is_some(),
            },
            (None, None) => Network::Host {
                table_unused: false,
            },
            (Some(NetArg::None), _) => Network::Loopback,
            (Some(NetArg::Allow(cli)), t) => {
                Network::Proxied(cli.clone().and(t.unwrap_or_default()))
            }
            (None, Some(t)) => Network::Proxied(t),
        }
    }

    /// The command has a network namespace of its own.
    pub fn own(&self) -> bool {
        !matches!(self, Network::Host { .. })
    }

    /// What the start-up lines say of it.
    pub(in crate::run) fn note(&self, permissive: bool) -> super::startup::Note {
        use super::startup::Note;
        match self {
            Network::Host {
                table_unused: false,
            } => Note::new(
                "host network",
                "network: the host's (the default; `--net none` or `--net allow=HOST,...` \
                 confines it)",
            ),
            Network::Host { table_unused: true } => Note::new(
                "host network (--net host)",
                "network: the host's (--net host: the policy's [network] table is not used)",
            ),
            Network::Loopback => Note::new(
                "no network",
                "network: none (--net none): a namespace of its own with loopback only",
            ),
            Network::Proxied(rules) => {
                let names: Vec<&str> = rules.rules().iter().map(|r| r.text.as_str()).collect();
                let shown = if names.len() > 3 {
                    format!("{}, ...", names[..3].join(", "))
                } else {
                    names.join(", ")
                };
                Note::new(
                    format!(
                        "network only to {shown}{}",
                        if permissive {
                            " (permissive: logged)"
                        } else {
                            ""
                        }
                    ),
                    format!(
                        "network: only through veilfs's proxy (127.0.0.1:{PROXY_PORT}, set in \
                         HTTP_PROXY, HTTPS_PROXY and ALL_PROXY), to {}{}",
                        names.join(", "),
                        if permissive {
                            "; permissive: nothing is refused, what would be is logged"
                        } else {
                            ""
                        }
                    ),
                )
            }
        }
    }
}

/// The proxy's variables, set for the command (replacing the caller's): every
/// proxy-aware client goes through the proxy, but to its own loopback.
pub fn proxy_env() -> Vec<(OsString, OsString)> {
    let http = format!("http://127.0.0.1:{PROXY_PORT}");
    let socks = format!("socks5h://127.0.0.1:{PROXY_PORT}");
    let local = "localhost,127.0.0.1,::1";
    [
        ("HTTP_PROXY", http.as_str()),
        ("HTTPS_PROXY", &http),
        ("ALL_PROXY", &socks),
        ("NO_PROXY", local),
        ("http_proxy", &http),
        ("https_proxy", &http),
        ("all_proxy", &socks),
        ("no_proxy", local),
    ]
    .into_iter()
    .map(|(k, v)| (k.into(), v.into()))
    .collect()
}

/// `env` with the proxy's variables in place of any the caller had.
pub fn with_proxy_env(env: Vec<(OsString, OsString)>) -> Vec<(OsString, OsString)> {
    let ours = proxy_env();
    let mut out: Vec<_> = env
        .into_iter()
        .filter(|(k, _)| !ours.iter().any(|(o, _)| o == k))
        .collect();
    out.extend(ours);
    out
}

/// What init makes of the network.
#[derive(Debug)]
pub(in crate::run) enum InitNet {
    /// Nothing: the host's.
    Host,
    /// A namespace of its own; with a socket, the proxy's listener is sent through
    /// it.
    Own(Option<OwnedFd>),
}

/// In init, before anything else of the command's: a network namespace of its
/// own with its loopback up; with `hand_to`, the proxy's listener made on it and
/// sent through `hand_to` to the daemon.
pub fn isolate(hand_to: Option<OwnedFd>) -> std::io::Result<()> {
    crate::sys::unshare(libc::CLONE_NEWNET)?;
    crate::sys::loopback_up()?;
    if let Some(to) = hand_to {
        let listener = std::net::TcpListener::bind(("127.0.0.1", PROXY_PORT))?;
        crate::sys::send_fd(&to, &listener)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_is_read_and_decided_with_the_policy_table() {
        assert_eq!(parse_net("host").unwrap(), NetArg::Host);
        assert_eq!(parse_net("none").unwrap(), NetArg::None);
        assert!(parse_net("allow=").is_err());
        assert!(parse_net("allow=a.test,b c").is_err());
        assert!(parse_net("everything").is_err());
        let cli = parse_net("allow=a.test").unwrap();
        let table = crate::policy::net::parse_network_section(
            "p.toml",
            "[network]\nallow = [\"b.test\"]\ndeny = [\"c.test\"]\n",
        )
        .unwrap();
        assert_eq!(
            Network::decide(None, None),
            Network::Host {
                table_unused: false
            }
        );
        assert_eq!(
            Network::decide(Some(&NetArg::Host), table.clone()),
            Network::Host { table_unused: true }
        );
        assert_eq!(
            Network::decide(Some(&NetArg::None), table.clone()),
            Network::Loopback
        );
        let Network::Proxied(both) = Network::decide(Some(&cli), table.clone()) else {
            panic!("not proxied")
        };
        let texts: Vec<_> = both.rules().iter().map(|r| r.text.as_str()).collect();
        assert_eq!(texts, ["a.test", "b.test", "c.test"]);
        assert!(matches!(
            Network::decide(None, table),
            Network::Proxied(r) if r.rules().len() == 2
        ));
    }

    #[test]
    fn the_proxy_variables_replace_the_callers() {
        let env = with_proxy_env(vec![
            ("HTTPS_PROXY".into(), "http://corp:8080".into()),
            ("no_proxy".into(), "*".into()),
            ("PATH".into(), "/bin".into()),
        ]);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("HTTPS_PROXY").unwrap(), "http://127.0.0.1:3128");
        assert_eq!(get("no_proxy").unwrap(), "localhost,127.0.0.1,::1");
        assert_eq!(get("PATH").unwrap(), "/bin");
        assert_eq!(env.iter().filter(|(n, _)| n == "HTTPS_PROXY").count(), 1);
    }
}
