//! The environment policy of `veilfs run`: which of the caller's environment
//! variables reach the command.
//!
//! A variable is dropped **by its name**, never by its value: an exported
//! `DB_PASSWORD`, `AWS_SECRET_ACCESS_KEY` or `GITHUB_TOKEN` does not reach the
//! command, while a harmless name holding a secret value passes. Values are never
//! printed nor logged anywhere, only names.
//!
//! # The rules
//!
//! Three sources, each a list of `keep` and a list of `drop` patterns:
//!
//! 1. the built-in default ([`DEFAULT_DROP`], [`DEFAULT_KEEP`]);
//! 2. the `[env]` table of the home policy file ([`parse_env_section`]):
//!    ```toml
//!    [env]
//!    keep = ["ANTHROPIC_API_KEY"]
//!    drop = ["MY_COMPANY_*"]
//!    ```
//! 3. the flags `--keep-env NAME` and `--drop-env NAME` (each repeatable).
//!
//! For one name, the **last source with a pattern that matches it decides**
//! (flags over the file over the built-in list); within one source, **keep wins
//! over drop**. A name no pattern matches passes. So `--keep-env 'AWS_*'` passes
//! what the built-in `AWS_*` drops, `--drop-env PATH` drops what nothing built in
//! would, and `--keep-env '*'` passes everything.
//!
//! Patterns are `globset` globs matched against the whole name,
//! **case-insensitively** (`*PASSWORD*` drops `db_password`): `*` and `?` match any
//! character, `[A-Z]` and `{a,b}` work, `\` escapes. A pattern may not be empty nor
//! hold `=` or NUL (no name can).
//!
//! | sources                                     | name                 | result |
//! |---------------------------------------------|----------------------|--------|
//! | built-in                                    | `GITHUB_TOKEN`       | drop   |
//! | built-in                                    | `db_password`        | drop   |
//! | built-in                                    | `AWS_SESSION_TOKEN`  | drop   |
//! | built-in                                    | `AWS_REGION`         | pass   |
//! | built-in                                    | `PATH`, `FOO`        | pass   |
//! | built-in, `--keep-env 'AWS_*'`              | `AWS_SECRET_ACCESS_KEY` | pass |
//! | built-in, `--drop-env 'aws_region'`         | `AWS_REGION`         | drop   |
//! | built-in, `[env] keep = ["X_TOKEN"]`, `--drop-env X_TOKEN` | `X_TOKEN` | drop |
//! | built-in, `--keep-env '*'`                  | anything             | pass   |
//!
//! # The agent's own API key
//!
//! An agent needs its key, the programs it starts do not, and veilfs cannot tell
//! them apart: the variable is inherited by both. So `*API_KEY*` drops
//! `ANTHROPIC_API_KEY` and `OPENAI_API_KEY` like any other key, and the person who
//! wants the key through says so once (`--keep-env ANTHROPIC_API_KEY`, or in the
//! `[env]` table). An agent logged in through its own directory (`~/.claude`,
//! `~/.codex`, which stay writable) needs no key in the environment.
//!
//! # What the command can read
//!
//! The command is started with exactly the filtered environment, so its
//! `/proc/self/environ` holds nothing else. Init (PID 1 of the command's PID
//! namespace) is a fork of `veilfs run`, so its memory still held the caller's
//! environment: init overwrites those strings with zeros
//! ([`wipe_initial_environment`]) and makes itself non-dumpable, so that the rest
//! of its memory (`/proc/1/mem`) needs `CAP_SYS_PTRACE`, which the command never
//! has. Non-dumpable alone is not enough: the kernel (seen on Linux 6.18) lets a
//! process of the same uid and capabilities read a non-dumpable process's
//! `environ`. Today the command cannot open `/proc/1/environ` at all (init holds
//! capabilities the command lacks, or is another uid under `--user`); wiped, it
//! would show nothing even if that changed.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::Arc;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use toml::Spanned;

use crate::policy::{LineIndex, Location, PolicyError, toml_message};

/// Names dropped by default because they look like credentials, each with why.
pub const DEFAULT_DROP: &[(&str, &str)] = &[
    (
        "*TOKEN*",
        "GITHUB_TOKEN, GH_TOKEN, NPM_TOKEN, HF_TOKEN, AWS_SESSION_TOKEN",
    ),
    (
        "*SECRET*",
        "AWS_SECRET_ACCESS_KEY, CLIENT_SECRET, SECRET_KEY_BASE",
    ),
    ("*PASSWORD*", "DB_PASSWORD, PGPASSWORD"),
    ("*PASSWD*", "passwords"),
    ("*PASSPHRASE*", "key passphrases"),
    ("*_PASS", "SMTP_PASS"),
    ("*_PWD", "MYSQL_PWD (PWD and OLDPWD do not match)"),
    (
        "*API_KEY*",
        "OPENAI_API_KEY, ANTHROPIC_API_KEY (keep the agent's own)",
    ),
    ("*APIKEY*", "API keys"),
    ("*ACCESS_KEY*", "AWS_ACCESS_KEY_ID"),
    ("*PRIVATE_KEY*", "keys themselves"),
    ("*_KEY", "STRIPE_KEY, ENCRYPTION_KEY, SIGNING_KEY"),
    (
        "*CREDENTIAL*",
        "GOOGLE_APPLICATION_CREDENTIALS, AWS_SHARED_CREDENTIALS_FILE",
    ),
    ("*_AUTH", "NPM_CONFIG__AUTH"),
    ("*_AUTH_CONFIG", "DOCKER_AUTH_CONFIG"),
    ("*COOKIE*", "session cookies"),
    ("*JWT*", "CI_JOB_JWT"),
    ("*_PAT", "personal access tokens: GITHUB_PAT"),
    ("*_DSN", "SENTRY_DSN, database DSNs"),
    ("DATABASE_URL", "a connection string holds its password"),
    ("*_DATABASE_URL", "a connection string holds its password"),
    ("*_DB_URL", "a connection string holds its password"),
    (
        "*_CONNECTION_STRING",
        "a connection string holds its password",
    ),
    ("REDIS_URL", "a connection string holds its password"),
    (
        "*DATABASE_URI*",
        "SQLALCHEMY_DATABASE_URI: a connection string",
    ),
    ("MONGO*_URI", "MONGODB_URI, MONGO_URI: a connection string"),
    ("MONGO*_URL", "MONGO_URL: a connection string"),
    ("*_BROKER_URL", "CELERY_BROKER_URL: a connection string"),
    ("AMQP_URL", "a connection string holds its password"),
    ("RABBITMQ_URL", "a connection string holds its password"),
    ("*_PW", "LDAP_BIND_PW"),
    ("SSHPASS", "sshpass's password"),
    (
        "AWS_*",
        "AWS_PROFILE, AWS_CONFIG_FILE, AWS_ROLE_ARN: the whole prefix chooses credentials",
    ),
    ("VAULT_*", "VAULT_TOKEN and the server it opens"),
    ("SSH_AUTH_SOCK", "lets the command sign with your ssh keys"),
    ("GPG_AGENT_INFO", "lets the command use your gpg keys"),
    ("KRB5CCNAME", "your Kerberos tickets"),
    (
        "*ASKPASS*",
        "GIT_ASKPASS, SSH_ASKPASS: a program that hands out passwords",
    ),
    ("VSCODE_GIT_IPC_HANDLE", "VS Code's git credential channel"),
    ("OP_SESSION_*", "1Password CLI sessions"),
    ("BW_SESSION", "Bitwarden CLI session"),
    ("*WEBHOOK*", "a webhook URL posts as you"),
];

/// Names dropped by default because they name a host socket (its path or
/// address), each with why: a program that finds one talks to the service behind
/// it. The sockets themselves are out of reach too (`run`'s private `/run` and `/tmp`);
/// `--allow-socket PATH` passes the variables whose value holds PATH.
pub const SOCKET_DROP: &[(&str, &str)] = &[
    (
        "TMUX",
        "your tmux server: `tmux run-shell` runs code outside",
    ),
    ("TMUX_PANE", "a pane of your tmux server"),
    ("STY", "your screen session"),
    ("ZELLIJ*", "your zellij session"),
    (
        "DBUS_SESSION_BUS_ADDRESS",
        "your D-Bus session: systemd-run --user, the keyring",
    ),
    ("DBUS_SYSTEM_BUS_ADDRESS", "the system bus"),
    ("DISPLAY", "your X server: keystrokes into every window"),
    ("WAYLAND_DISPLAY", "your Wayland compositor"),
    ("WAYLAND_SOCKET", "a Wayland connection"),
    ("XAUTHORITY", "the X server's cookie"),
    (
        "VSCODE_IPC_HOOK*",
        "VS Code's window: runs commands and tasks",
    ),
    ("KITTY_LISTEN_ON", "kitty's remote control"),
    ("NVIM", "your neovim's server"),
    ("NVIM_LISTEN_ADDRESS", "your neovim's server"),
    ("EMACS_SOCKET_NAME", "your emacs server"),
    ("DOCKER_HOST", "the Docker daemon: root on the host"),
    ("CONTAINER_HOST", "the Podman service"),
    ("SWAYSOCK", "sway's IPC: runs commands"),
    ("I3SOCK", "i3's IPC: runs commands"),
    ("HYPRLAND_INSTANCE_SIGNATURE", "Hyprland's IPC"),
    ("PULSE_SERVER", "your sound server"),
    ("PIPEWIRE_REMOTE", "your sound server"),
    ("WEZTERM_UNIX_SOCKET", "WezTerm's mux: spawns panes"),
    ("ALACRITTY_SOCKET", "Alacritty's IPC: opens windows"),
    ("GNOME_KEYRING_CONTROL", "the keyring"),
    ("NOTIFY_SOCKET", "systemd's notification socket"),
];

/// Whether the built-in pattern `glob` is one of [`SOCKET_DROP`].
fn names_socket(glob: &str) -> bool {
    SOCKET_DROP.iter().any(|(g, _)| *g == glob)
}

/// Names a default drop pattern would hit that are no credential, each with why.
pub const DEFAULT_KEEP: &[(&str, &str)] = &[
    ("AWS_REGION", "a region is no credential; AWS SDKs need one"),
    (
        "AWS_DEFAULT_REGION",
        "a region is no credential; AWS SDKs need one",
    ),
    ("TOKENIZERS_PARALLELISM", "a Hugging Face setting, no token"),
];

/// Where a pattern was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The built-in default, with its reason.
    BuiltIn(&'static str),
    /// An `[env]` table.
    File(Location),
    /// `--keep-env` or `--drop-env`.
    Flag(&'static str),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::BuiltIn(why) => write!(f, "built-in: {why}"),
            Origin::File(at) => write!(f, "{at}"),
            Origin::Flag(flag) => f.write_str(flag),
        }
    }
}

/// One name pattern as written, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamePattern {
    pub glob: String,
    pub origin: Origin,
}

impl fmt::Display for NamePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} ({})", self.glob, self.origin)
    }
}

/// The `keep` and `drop` lists of one `[env]` table, checked (every glob compiles).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvRules {
    pub keep: Vec<NamePattern>,
    pub drop: Vec<NamePattern>,
}

/// The compiled globs of one list, and the patterns they came from (same order).
#[derive(Debug)]
struct Matcher {
    set: GlobSet,
    patterns: Vec<NamePattern>,
}

impl Matcher {
    fn new(patterns: Vec<NamePattern>) -> Result<Matcher, EnvError> {
        let mut set = GlobSetBuilder::new();
        for p in &patterns {
            set.add(build_glob(&p.glob).map_err(|cause| EnvError::Pattern {
                origin: p.origin.clone(),
                cause,
            })?);
        }
        let set = set.build().map_err(EnvError::Set)?;
        Ok(Matcher { set, patterns })
    }

    /// The first pattern that matches `name`.
    fn first(&self, name: &OsStr) -> Option<&NamePattern> {
        let hits = self.set.matches(std::path::Path::new(name));
        hits.first().map(|&i| &self.patterns[i])
    }
}

/// One source's lists.
#[derive(Debug)]
struct Layer {
    keep: Matcher,
    drop: Matcher,
}

/// The environment policy: built-in default, `[env]` table and flags, compiled.
#[derive(Debug)]
pub struct EnvPolicy {
    /// Lowest first: built-in, file, flags.
    layers: Vec<Layer>,
}

/// What the policy says of one name, and the pattern that said it (`None`: no
/// pattern matched, so it passes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict<'a> {
    pub pass: bool,
    pub by: Option<&'a NamePattern>,
}

/// A variable the policy dropped (its name only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    pub name: OsString,
    /// Dropped by a built-in pattern (not by the person's own `drop`).
    pub built_in: bool,
    /// Dropped because it names a host socket ([`SOCKET_DROP`]).
    pub socket: bool,
}

/// An environment after the policy.
#[derive(Clone, Debug, Default)]
pub struct Filtered {
    /// What the command gets, in the caller's order.
    pub vars: Vec<(OsString, OsString)>,
    /// What it does not, sorted by name.
    pub dropped: Vec<Dropped>,
}

impl EnvPolicy {
    /// The built-in default, then `file` (the home policy's `[env]` table), then
    /// the flags (`--keep-env`, `--drop-env`).
    pub fn new(
        file: EnvRules,
        keep_flags: &[String],
        drop_flags: &[String],
    ) -> Result<Self, EnvError> {
        let flags = |list: &[String], flag: &'static str| -> Result<Vec<NamePattern>, EnvError> {
            list.iter()
                .map(|g| {
                    check_name_glob(g).map_err(|cause| EnvError::Flag {
                        flag,
                        glob: g.clone(),
                        cause,
                    })?;
                    Ok(NamePattern {
                        glob: g.clone(),
                        origin: Origin::Flag(flag),
                    })
                })
                .collect()
        };
        let built_in = |list: &[(&str, &'static str)]| -> Vec<NamePattern> {
            list.iter()
                .map(|&(g, why)| NamePattern {
                    glob: g.into(),
                    origin: Origin::BuiltIn(why),
                })
                .collect()
        };
        let layers = vec![
            Layer {
                keep: Matcher::new(built_in(DEFAULT_KEEP))?,
                drop: Matcher::new(built_in(&[DEFAULT_DROP, SOCKET_DROP].concat()))?,
            },
            Layer {
                keep: Matcher::new(file.keep)?,
                drop: Matcher::new(file.drop)?,
            },
            Layer {
                keep: Matcher::new(flags(keep_flags, "--keep-env")?)?,
                drop: Matcher::new(flags(drop_flags, "--drop-env")?)?,
            },
        ];
        Ok(EnvPolicy { layers })
    }

    /// The built-in default alone.
    pub fn built_in() -> Self {
        // The built-in lists are tested to compile (`built_in_lists_compile`).
        Self::new(EnvRules::default(), &[], &[]).unwrap_or(EnvPolicy { layers: Vec::new() })
    }

    /// Whether `name` passes, and which pattern decided.
    pub fn decide(&self, name: &OsStr) -> Verdict<'_> {
        for layer in self.layers.iter().rev() {
            if let Some(p) = layer.keep.first(name) {
                return Verdict {
                    pass: true,
                    by: Some(p),
                };
            }
            if let Some(p) = layer.drop.first(name) {
                return Verdict {
                    pass: false,
                    by: Some(p),
                };
            }
        }
        Verdict {
            pass: true,
            by: None,
        }
    }

    /// Splits `vars` into what passes and what is dropped.
    pub fn apply(&self, vars: impl IntoIterator<Item = (OsString, OsString)>) -> Filtered {
        self.apply_allowing(vars, &[])
    }

    /// As [`apply`](Self::apply), but a variable dropped only for naming a socket
    /// passes when its value holds one of the `allowed` paths (`--allow-socket`).
    pub fn apply_allowing(
        &self,
        vars: impl IntoIterator<Item = (OsString, OsString)>,
        allowed: &[std::path::PathBuf],
    ) -> Filtered {
        let mut out = Filtered::default();
        for (name, value) in vars {
            let v = self.decide(&name);
            let socket = matches!(
                v.by,
                Some(NamePattern {
                    origin: Origin::BuiltIn(_),
                    glob,
                }) if names_socket(glob)
            );
            let allowed = socket && allowed.iter().any(|a| holds(&value, a.as_os_str()));
            if v.pass || allowed {
                out.vars.push((name, value));
                continue;
            }
            if let Some(p) = v.by {
                log::debug!(
                    "environment: {} dropped by {p}",
                    crate::escape::printable(name.as_bytes())
                );
            }
            let built_in = matches!(
                v.by,
                Some(NamePattern {
                    origin: Origin::BuiltIn(_),
                    ..
                })
            );
            forget_value(value);
            out.dropped.push(Dropped {
                name,
                built_in,
                socket,
            });
        }
        out.dropped.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }
}

/// Whether `value` holds `path` (a socket's path inside an address such as
/// `unix:path=/run/user/1000/bus`).
fn holds(value: &OsStr, path: &OsStr) -> bool {
    let (v, p) = (value.as_bytes(), path.as_bytes());
    !p.is_empty() && v.windows(p.len()).any(|w| w == p)
}

/// Zeroes a dropped value's bytes before freeing them, so that no copy stays in
/// the heap init inherits (best effort: `black_box` keeps the compiler from
/// dropping the writes).
fn forget_value(value: OsString) {
    let mut bytes = value.into_vec();
    bytes.fill(0);
    std::hint::black_box(&mut bytes);
}

/// Overwrites with zeros the caller's environment strings as this process got them
/// at exec (the memory `/proc/<pid>/environ` shows, between the `env_start` and
/// `env_end` of `/proc/self/stat`), through `/proc/self/mem`. For init, a fork of
/// `veilfs run` whose command gets only the filtered environment: whatever reads
/// its `environ` then finds NUL bytes. The strings are not used afterwards (the
/// command's environment is a list of its own; `getenv` finds nothing).
pub fn wipe_initial_environment() -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let bad = |what: &str| std::io::Error::other(format!("/proc/self/stat: {what}"));
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // Fields after the command name (which may hold spaces and parentheses) start
    // at field 3; env_start and env_end are fields 50 and 51.
    let (_, rest) = stat
        .rsplit_once(')')
        .ok_or_else(|| bad("no command name"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> std::io::Result<u64> {
        fields
            .get(n - 3)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| bad(&format!("no field {n}")))
    };
    let (start, end) = (field(50)?, field(51)?);
    if start == 0 || end < start || end - start > 16 << 20 {
        return Err(bad("no environment range"));
    }
    let mem = std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/self/mem")?;
    mem.write_all_at(&vec![0u8; (end - start) as usize], start)
}

/// What the start-up line says of `dropped` (empty when nothing was): names only,
/// escaped for a terminal.
pub fn startup_note(dropped: &[Dropped]) -> String {
    if dropped.is_empty() {
        return String::new();
    }
    let names: Vec<String> = dropped
        .iter()
        .map(|d| crate::escape::printable(d.name.as_bytes()))
        .collect();
    let n = dropped.len();
    let what = if n == 1 { "variable" } else { "variables" };
    let sockets = dropped.iter().filter(|d| d.socket).count();
    let why = match (dropped.iter().all(|d| d.built_in), sockets, n) {
        (false, _, _) => "",
        (true, 0, 1) => " that looks like a credential",
        (true, 0, _) => " that look like credentials",
        (true, 1, 1) => " that names a host socket",
        (true, s, n) if s == n => " that name host sockets",
        (true, _, _) => " that look like credentials or name host sockets",
    };
    format!(
        "; dropped {n} {what}{why} ({}; --keep-env NAME passes one)",
        names.join(", ")
    )
}

/// The built-in lists as an `[env]` table a person can paste into the home policy.
pub fn default_section() -> String {
    let mut out = String::from(
        "# The built-in environment policy of `veilfs run`. A variable whose name matches a\n\
         # `drop` pattern does not reach the command, unless a `keep` pattern matches it\n\
         # too. Names are matched case-insensitively; `*` matches any characters. The\n\
         # home policy's own `keep` and `drop` decide over these, the flags\n\
         # `--keep-env NAME` and `--drop-env NAME` over both.\n\
         [env]\n",
    );
    let section = |out: &mut String, list: &[(&str, &str)]| {
        for (glob, why) in list {
            out.push_str(&format!("    {glob:?}, # {why}\n"));
        }
    };
    out.push_str("keep = [\n");
    section(&mut out, DEFAULT_KEEP);
    out.push_str("]\ndrop = [\n");
    section(&mut out, DEFAULT_DROP);
    out.push_str(
        "    # They name a host socket (`--allow-socket PATH` passes those that hold PATH):\n",
    );
    section(&mut out, SOCKET_DROP);
    out.push_str("]\n");
    out
}

/// Builds a name glob with this module's options (whole name, any character,
/// case-insensitive).
fn build_glob(text: &str) -> Result<globset::Glob, globset::Error> {
    GlobBuilder::new(text)
        .case_insensitive(true)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
}

/// Why a name pattern (of `--keep-env`, `--drop-env` or an `[env]` table) is
/// refused.
#[derive(Debug, thiserror::Error)]
pub enum NameGlobError {
    #[error("empty pattern: expected a name or a glob such as \"AWS_*\"")]
    Empty,
    #[error("contains `=`, which no variable's name can hold")]
    HoldsEquals,
    #[error("contains a NUL byte, which no variable's name can hold")]
    HoldsNul,
    /// The glob compiles to a regular expression too large to build.
    #[error("too large to compile")]
    TooLarge,
    /// The glob does not compile (in globset's words).
    #[error("{0}")]
    Glob(globset::ErrorKind),
}

/// Why the environment policy cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// A pattern given by a flag: `--keep-env "[x": ...`.
    #[error("{flag} {glob:?}: {cause}")]
    Flag {
        flag: &'static str,
        glob: String,
        cause: NameGlobError,
    },
    /// A pattern of a list that does not compile, and where it was written.
    #[error("{origin}: {cause}")]
    Pattern {
        origin: Origin,
        cause: globset::Error,
    },
    /// The patterns of one list do not compile together.
    #[error("{0}")]
    Set(globset::Error),
}

/// What is wrong with an `[env]` table: every problem found, one per line, each
/// as `file:line:col: error: ...`.
#[derive(Debug, thiserror::Error)]
pub enum EnvSectionError {
    /// The table is not a table of `keep` and `drop` lists.
    #[error("{0}")]
    Shape(PolicyError),
    /// Patterns refused (at least one), each where it was written.
    #[error("{}", one_per_line(.0))]
    Patterns(Vec<PolicyError>),
}

/// `errors`, one per line.
fn one_per_line(errors: &[PolicyError]) -> String {
    errors
        .iter()
        .map(PolicyError::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Checks one name pattern: not empty, no `=` nor NUL, a glob that compiles.
pub fn check_name_glob(text: &str) -> Result<(), NameGlobError> {
    if text.is_empty() {
        return Err(NameGlobError::Empty);
    }
    if text.contains('=') {
        return Err(NameGlobError::HoldsEquals);
    }
    if text.contains('\0') {
        return Err(NameGlobError::HoldsNul);
    }
    build_glob(text)
        .and_then(|g| GlobSet::new([&g]))
        .map(drop)
        .map_err(|e| match e.kind() {
            globset::ErrorKind::Regex(_) => NameGlobError::TooLarge,
            k => NameGlobError::Glob(k.clone()),
        })
}

/// `--keep-env` and `--drop-env`: a name or a glob ([`check_name_glob`]).
pub fn parse_name_glob(text: &str) -> Result<String, NameGlobError> {
    check_name_glob(text).map(|()| text.to_string())
}

#[derive(Deserialize)]
struct DocShape {
    env: Option<Spanned<EnvShape>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvShape {
    #[serde(default)]
    keep: Vec<Spanned<String>>,
    #[serde(default)]
    drop: Vec<Spanned<String>>,
}

/// Reads the `[env]` table of a policy file (the other keys are not looked at);
/// no table gives empty lists. `name` is what errors print as the file. Every
/// problem found is reported, one per line, as `file:line:col: error: ...`.
pub fn parse_env_section(name: &str, text: &str) -> Result<EnvRules, EnvSectionError> {
    let file: Arc<str> = Arc::from(name);
    let index = LineIndex::new(file, text);
    let doc: DocShape = toml::from_str(text).map_err(|e| {
        let message = toml_message(e.message()).replace(
            "expected struct EnvShape",
            "expected a table with `keep` and `drop`",
        );
        EnvSectionError::Shape(PolicyError {
            at: index.at(e.span().map_or(0, |s| s.start)),
            message,
        })
    })?;
    let Some(env) = doc.env else {
        return Ok(EnvRules::default());
    };
    let env = env.into_inner();
    let mut errors = Vec::new();
    let mut list = |key: &str, globs: Vec<Spanned<String>>| -> Vec<NamePattern> {
        let mut out = Vec::new();
        for g in globs {
            let at = index.at(g.span().start);
            let glob = g.into_inner();
            match check_name_glob(&glob) {
                Ok(()) => out.push(NamePattern {
                    glob,
                    origin: Origin::File(at),
                }),
                Err(why) => errors.push(PolicyError {
                    at,
                    message: format!("env.{key}: pattern {glob:?}: {why}"),
                }),
            }
        }
        out
    };
    let rules = EnvRules {
        keep: list("keep", env.keep),
        drop: list("drop", env.drop),
    };
    if errors.is_empty() {
        Ok(rules)
    } else {
        Err(EnvSectionError::Patterns(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(keep: &[&str], drop: &[&str]) -> EnvPolicy {
        let s = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        EnvPolicy::new(EnvRules::default(), &s(keep), &s(drop)).unwrap()
    }

    fn passes(p: &EnvPolicy, name: &str) -> bool {
        p.decide(OsStr::new(name)).pass
    }

    #[test]
    fn built_in_lists_compile() {
        for (g, _) in DEFAULT_DROP.iter().chain(DEFAULT_KEEP) {
            check_name_glob(g).unwrap();
        }
        assert_eq!(EnvPolicy::built_in().layers.len(), 3);
    }

    /// One row per name: (name, passes under the built-in default).
    #[test]
    fn built_in_default_table() {
        let p = EnvPolicy::built_in();
        let rows: &[(&str, bool)] = &[
            ("GITHUB_TOKEN", false),
            ("GH_TOKEN", false),
            ("github_token", false),
            ("Db_Password", false),
            ("PGPASSWORD", false),
            ("MYSQL_PWD", false),
            ("SMTP_PASS", false),
            ("AWS_SECRET_ACCESS_KEY", false),
            ("AWS_ACCESS_KEY_ID", false),
            ("AWS_SESSION_TOKEN", false),
            ("AWS_PROFILE", false),
            ("aws_config_file", false),
            ("OPENAI_API_KEY", false),
            ("ANTHROPIC_API_KEY", false),
            ("STRIPE_KEY", false),
            ("GOOGLE_APPLICATION_CREDENTIALS", false),
            ("NPM_CONFIG__AUTH", false),
            ("DATABASE_URL", false),
            ("PROD_DATABASE_URL", false),
            ("SENTRY_DSN", false),
            ("SSH_AUTH_SOCK", false),
            ("SSHPASS", false),
            ("MONGODB_URI", false),
            ("SQLALCHEMY_DATABASE_URI", false),
            ("CELERY_BROKER_URL", false),
            ("AMQP_URL", false),
            ("LDAP_BIND_PW", false),
            ("GPG_AGENT_INFO", false),
            ("VAULT_ADDR", false),
            ("GIT_ASKPASS", false),
            ("OP_SESSION_my", false),
            ("SLACK_WEBHOOK_URL", false),
            ("AWS_REGION", true),
            ("aws_default_region", true),
            ("TOKENIZERS_PARALLELISM", true),
            ("PATH", true),
            ("HOME", true),
            ("TERM", true),
            ("LANG", true),
            ("LC_ALL", true),
            ("USER", true),
            ("LOGNAME", true),
            ("SHELL", true),
            ("PWD", true),
            ("OLDPWD", true),
            ("TMPDIR", true),
            ("EDITOR", true),
            ("PAGER", true),
            ("DISPLAY", false),
            ("COLORTERM", true),
            ("SSH_TTY", true),
            ("SSH_CONNECTION", true),
            ("SSH_AGENT_PID", true),
            ("GPG_TTY", true),
            ("XDG_RUNTIME_DIR", true),
            ("XDG_SESSION_ID", true),
            ("DBUS_SESSION_BUS_ADDRESS", false),
            ("TMUX", false),
            ("tmux_pane", false),
            ("VSCODE_IPC_HOOK_CLI", false),
            ("DOCKER_HOST", false),
            ("WAYLAND_DISPLAY", false),
            ("XAUTHORITY", false),
            ("STY", false),
            ("KITTY_LISTEN_ON", false),
            ("NVIM", false),
            ("ZELLIJ_SESSION_NAME", false),
            ("TMUX_TMPDIR", true),
            ("TERM_PROGRAM", true),
            ("CARGO_HOME", true),
            ("RUSTUP_HOME", true),
            ("GOPATH", true),
            ("PYTHONPATH", true),
            ("VIRTUAL_ENV", true),
            ("NODE_PATH", true),
            ("MANPATH", true),
            ("KEYTIMEOUT", true),
            ("HISTFILE", true),
            ("FOO", true),
        ];
        let wrong: Vec<String> = rows
            .iter()
            .filter(|(n, pass)| passes(&p, n) != *pass)
            .map(|(n, pass)| {
                format!(
                    "{n}: expected {}, decided by {:?}",
                    if *pass { "pass" } else { "drop" },
                    p.decide(OsStr::new(n)).by
                )
            })
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn the_last_source_that_matches_decides_and_keep_wins_within_one() {
        let p = policy(&["AWS_*"], &[]);
        assert!(passes(&p, "AWS_SECRET_ACCESS_KEY"));
        assert!(!passes(&p, "GITHUB_TOKEN"));
        let p = policy(&[], &["aws_region", "FOO*", "PATH"]);
        assert!(!passes(&p, "AWS_REGION"));
        assert!(!passes(&p, "foobar"));
        assert!(!passes(&p, "PATH"));
        let p = policy(&["*"], &["FOO"]);
        assert!(passes(&p, "FOO"));
        assert!(passes(&p, "GITHUB_TOKEN"));
        let p = policy(&["github_token"], &[]);
        assert!(passes(&p, "GITHUB_TOKEN"));
        assert!(!passes(&p, "GH_TOKEN"));

        let file = parse_env_section("home.toml", "[env]\nkeep = [\"X_TOKEN\"]\n").unwrap();
        let p = EnvPolicy::new(file.clone(), &[], &[]).unwrap();
        assert!(passes(&p, "X_TOKEN"));
        let v = p.decide(OsStr::new("X_TOKEN"));
        assert_eq!(v.by.unwrap().origin.to_string(), "home.toml:2:9");
        let p = EnvPolicy::new(file, &[], &["X_TOKEN".into()]).unwrap();
        assert!(!passes(&p, "X_TOKEN"));
    }

    #[test]
    fn names_that_are_not_utf8_are_matched_as_bytes() {
        let p = EnvPolicy::built_in();
        use std::os::unix::ffi::OsStrExt;
        assert!(!p.decide(OsStr::from_bytes(b"\xffTOKEN")).pass);
        assert!(p.decide(OsStr::from_bytes(b"\xffFOO")).pass);
    }

    #[test]
    fn apply_keeps_order_and_reports_names_only() {
        let vars = [
            ("B_TOKEN", "v1"),
            ("PATH", "/bin"),
            ("A_SECRET", "v2"),
            ("X", "y"),
        ]
        .map(|(n, v)| (OsString::from(n), OsString::from(v)));
        let f = policy(&[], &["X"]).apply(vars);
        assert_eq!(
            f.vars,
            vec![(OsString::from("PATH"), OsString::from("/bin"))]
        );
        let names: Vec<_> = f.dropped.iter().map(|d| d.name.clone()).collect();
        assert_eq!(names, ["A_SECRET", "B_TOKEN", "X"]);
        let note = startup_note(&f.dropped);
        assert_eq!(
            note,
            "; dropped 3 variables (A_SECRET, B_TOKEN, X; --keep-env NAME passes one)"
        );
        let f = EnvPolicy::built_in()
            .apply([("DB_PASSWORD", "v")].map(|(n, v)| (OsString::from(n), OsString::from(v))));
        assert_eq!(
            startup_note(&f.dropped),
            "; dropped 1 variable that looks like a credential (DB_PASSWORD; --keep-env NAME passes one)"
        );
        let f = EnvPolicy::built_in().apply(
            [("A\x1b]0;x\x07_TOKEN", "v")].map(|(n, v)| (OsString::from(n), OsString::from(v))),
        );
        assert!(startup_note(&f.dropped).contains("A\\x1b]0;x\\x07_TOKEN"));
        assert_eq!(startup_note(&[]), "");
    }

    #[test]
    fn the_default_section_parses_back_to_the_built_in_lists() {
        let r = parse_env_section("<default>", &default_section()).unwrap();
        let globs = |l: &[NamePattern]| l.iter().map(|p| p.glob.clone()).collect::<Vec<_>>();
        let want = |l: &[(&str, &str)]| l.iter().map(|p| p.0.to_string()).collect::<Vec<_>>();
        assert_eq!(globs(&r.keep), want(DEFAULT_KEEP));
        assert_eq!(globs(&r.drop), want(&[DEFAULT_DROP, SOCKET_DROP].concat()));
    }

    #[test]
    fn the_section_is_read_alone_and_errors_are_located() {
        let text = "default = \"allow\"\n[[rules]]\naction = \"deny\"\npaths = [\".env\"]\n\
                    [home]\nwhatever = 1\n";
        assert_eq!(
            parse_env_section("h.toml", text).unwrap(),
            EnvRules::default()
        );

        let rows: &[(&str, &str)] = &[
            (
                "[env]\nkeep = [\"\"]\n",
                "h.toml:2:9: error: env.keep: pattern \"\": empty pattern",
            ),
            (
                "[env]\ndrop = [\"A=B\"]\n",
                "h.toml:2:9: error: env.drop: pattern \"A=B\": contains `=`",
            ),
            (
                "[env]\ndrop = [\"ok\", \"[A\"]\n",
                "h.toml:2:15: error: env.drop: pattern \"[A\": unclosed character class",
            ),
            (
                "[env]\nkept = [\"A\"]\n",
                "h.toml:2:1: error: unknown key `kept`, expected `keep` or `drop`",
            ),
            (
                "[env]\nkeep = \"A\"\n",
                "h.toml:2:8: error: invalid type: string \"A\", expected a sequence",
            ),
            (
                "[env]\nkeep = [1]\n",
                "h.toml:2:9: error: invalid type: integer `1`, expected a string",
            ),
            (
                "env = 3\n",
                "h.toml:1:7: error: invalid type: integer `3`, expected a table with `keep` and `drop`",
            ),
            ("[env\n", "h.toml:1:5: error: "),
        ];
        for (text, want) in rows {
            let got = parse_env_section("h.toml", text).unwrap_err().to_string();
            assert!(
                got.starts_with(want),
                "{text:?}:\n got: {got}\nwant: {want}"
            );
        }
        let both = parse_env_section("h.toml", "[env]\nkeep = [\"\"]\ndrop = [\"a=b\"]\n")
            .unwrap_err()
            .to_string();
        assert_eq!(both.lines().count(), 2, "{both}");
    }

    #[test]
    fn flags_are_checked() {
        assert!(parse_name_glob("AWS_*").is_ok());
        assert!(parse_name_glob("").is_err());
        assert!(parse_name_glob("A=B").is_err());
        assert!(parse_name_glob("[A").is_err());
        let e = EnvPolicy::new(EnvRules::default(), &["[x".into()], &[])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--keep-env \"[x\": "), "{e}");
    }
}
