//! The command line: `veilfs check`, `veilfs explain` (and, as they land, `mount`
//! and `run`). Doc comments on these types are the `--help` text.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// A FUSE filesystem that mirrors a workspace and enforces one path policy on every
/// lookup, listing, open and change. Denied paths answer "Permission denied" when
/// named and are absent from listings.
#[derive(Debug, Parser)]
#[command(name = "veilfs", version, about)]
pub struct Cli {
    /// More diagnostics on stderr: -v info (under `run`, the start-up lines in full
    /// too), -vv debug (every FUSE request), -vvv trace. `RUST_LOG` (e.g.
    /// `RUST_LOG=fuser=debug`) takes precedence. Without either, veilfs's errors and
    /// fuser's warnings are printed (under `run`, only veilfs's errors).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Mount SRC at MNT through the policy, in the foreground.
    ///
    /// Mount SRC at MNT through the policy, in the foreground. Prints one line on
    /// stderr once the mount is live; SIGINT, SIGTERM or `umount MNT` unmount it and
    /// exit 0. Refuses to start (exit 2, nothing mounted) on a bad policy, a missing
    /// source or mount point, a mount point that is already mounted or lies inside
    /// SRC, or when FUSE is unavailable.
    Mount {
        /// The policy file. Default: SRC/.veilfs.toml if present, else the built-in
        /// default policy.
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        /// Let other users (e.g. an agent running under its own uid) use the mount.
        #[arg(long)]
        allow_other: bool,
        /// Mount read-only: every change fails with EROFS.
        #[arg(long)]
        read_only: bool,
        #[command(flatten)]
        cache: CacheArgs,
        /// The workspace to mirror.
        src: PathBuf,
        /// Where to mount it (an existing, empty directory outside SRC).
        mnt: PathBuf,
        /// Say what the mount would be (SRC, MNT, the policy and what it hides) and
        /// the steps it would take, one a line, and stop: nothing is mounted. Exit 0
        /// when `mount` would start, 2 when it would refuse (and why).
        #[arg(long)]
        dry_run: bool,
    },
    /// Run CMD with the workspace (and home) seen through the policy.
    ///
    /// Run CMD (default: $SHELL, else /bin/sh) with the workspace seen through the
    /// policy at its usual path: veilfs is mounted over DIR in a private mount
    /// namespace, CMD starts in the current directory, and nothing outside ever sees
    /// the mount. The exit status is CMD's (128+N when it dies of signal N).
    Run {
        /// The policy file. Default: DIR/.veilfs.toml if present, else the built-in
        /// default policy.
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        /// The workspace to police. Default: found from the current directory as git
        /// finds its repository: the nearest directory holding a `.veilfs.toml`, else
        /// the top of the git work tree, else the current directory.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// Print nothing of veilfs's own: no start-up lines, no summary of refusals
        /// at the end (refusal notices go to the log, `-v`).
        #[arg(long, short)]
        quiet: bool,
        /// The home policy (paths relative to the home directory). Default:
        /// `~/.config/veilfs/home.toml` (`$XDG_CONFIG_HOME/veilfs/home.toml`) of the
        /// user running veilfs if present, else the built-in default home policy
        /// (`veilfs check --print-default-home`).
        #[arg(long, value_name = "FILE", conflicts_with = "no_home")]
        home_policy: Option<PathBuf>,
        /// Do not mount veilfs over the home directory of the user CMD runs as.
        #[arg(long)]
        no_home: bool,
        #[command(flatten)]
        cache: Box<CacheArgs>,
        /// Run CMD as `USER[:GROUP]`, names or numbers (root only). Without a group:
        /// the user's primary group.
        #[arg(long, value_name = "USER[:GROUP]", value_parser = crate::run::parse_user)]
        user: Option<(u32, u32)>,
        /// Let CMD write below DIR outside the workspace (repeatable; an existing
        /// directory). Outside the workspace the system is read-only for CMD (EROFS,
        /// root too) but for /tmp, /var/tmp, /dev/shm, the devices, /proc and /sys.
        #[arg(long, value_name = "DIR")]
        writable: Vec<PathBuf>,
        /// Leave the system outside the workspace writable (as far as CMD's user may
        /// write it).
        #[arg(long, conflicts_with = "writable")]
        system_writable: bool,
        /// Pass the variables NAME names (a glob: `'AWS_*'`; `'*'` passes the whole
        /// environment) although they look like credentials. Repeatable. By default
        /// variables whose names look like credentials (`*TOKEN*`, `*SECRET*`,
        /// `*PASSWORD*`, `*API_KEY*`, `AWS_*`, `SSH_AUTH_SOCK`, ...; `veilfs check
        /// --print-default-env` lists them) do not reach CMD. Names are matched
        /// case-insensitively.
        #[arg(long, value_name = "NAME", value_parser = crate::run::env::parse_name_glob)]
        keep_env: Vec<String>,
        /// Do not pass the variables NAME names (a glob allowed), besides the
        /// built-in ones. Repeatable; a `--keep-env` that matches too wins.
        #[arg(long, value_name = "NAME", value_parser = crate::run::env::parse_name_glob)]
        drop_env: Vec<String>,
        /// Let CMD reach the socket PATH (or the sockets below the directory PATH)
        /// of a service outside, e.g. an ssh-agent on purpose; the variables whose
        /// value holds PATH (`SSH_AUTH_SOCK`) pass too. Repeatable. By default CMD
        /// reaches no socket it did not make: /run is private to the session, and so
        /// are /tmp, /var/tmp and /dev/shm (see --share-tmp).
        #[arg(long, value_name = "PATH")]
        allow_socket: Vec<PathBuf>,
        /// Share /tmp, /var/tmp and /dev/shm with the system instead of giving CMD
        /// private, empty ones (the sockets in them at start stay out of reach).
        #[arg(long)]
        share_tmp: bool,
        /// What CMD may reach on the network: `host` (the default: the host's
        /// network), `none` (loopback only), or `allow=SPEC[,SPEC...]`: only these
        /// destinations, through veilfs's proxy (HTTP_PROXY, HTTPS_PROXY and
        /// ALL_PROXY are set), each a name (`api.example.com`), a glob below a name
        /// (`*.example.com`), either with `:PORT`, or an address with its port
        /// (`192.0.2.7:443`). A `[network]` table in the policy (allow, ask, deny)
        /// confines CMD the same way when --net is not given, and adds to `allow=`.
        #[arg(long, value_name = "MODE", value_parser = crate::run::net::parse_net)]
        net: Option<crate::run::net::NetArg>,
        /// The agent CMD is (claude, codex, gemini, aider, opencode, goose; `none`
        /// for no profile): its profile makes the files it runs later as you (hooks,
        /// MCP servers, plugins) read-only, keeps its state writable and its login
        /// readable. Default: the one the policy extends (`agent:NAME`), else the
        /// one CMD's name starts. `veilfs check --print-profile NAME` prints one.
        #[arg(long, value_name = "NAME", value_parser = crate::run::parse_agent)]
        agent: Option<String>,
        /// Run although this kernel cannot confine CMD to its own abstract sockets
        /// and processes (Landlock ABI 6, Linux 6.12): connect() to the host's
        /// abstract sockets is still refused, but a datagram sent to one gets
        /// through.
        #[arg(long)]
        without_landlock: bool,
        /// Say what the session would be (the workspace, the policies, what is
        /// confined and how), in full, and the steps it would take, one a line, and
        /// stop: nothing is mounted and CMD does not run. Exit 0 when `run` would
        /// start, 2 when it would refuse (and why).
        #[arg(long)]
        dry_run: bool,
        /// Write the refusal notices to FILE while CMD runs (appended; default: a
        /// file in veilfs's runtime directory, named in the start-up line). They
        /// never go to the terminal, which is CMD's; `run` prints a summary when CMD
        /// ends.
        #[arg(long, value_name = "FILE")]
        notices: Option<PathBuf>,
        /// The command and its arguments (one that starts with `-` after `--`).
        #[arg(trailing_var_arg = true, value_name = "CMD")]
        command: Vec<std::ffi::OsString>,
    },
    /// Ask the sessions serving PATH to reload their policy now.
    ///
    /// Ask every session serving PATH (the `veilfs mount` at mount point PATH, each
    /// `veilfs run` of workspace PATH) to reload its policy file now, and print each
    /// outcome. Only the user who started a session (or root) may ask, and never a
    /// process inside a `veilfs run` session. Exit 0 when the new policy is in force
    /// everywhere, 1 when any session kept its old one (the errors are printed), 2
    /// when no session answers for PATH.
    Reload {
        /// The mount point or the workspace.
        #[arg(value_name = "PATH")]
        mnt: PathBuf,
    },
    /// Print what the sessions serving PATH have served.
    ///
    /// Print, for every session serving PATH (the `veilfs mount` at mount point
    /// PATH, each `veilfs run` of workspace PATH), one line of JSON: the requests
    /// each of its mounts has received from the kernel, by opcode, and the
    /// daemon's CPU time and peak RSS so far. For benchmarks: run it before and
    /// after a workload and subtract. Only the user who started a session (or
    /// root) may ask, and never a process inside a `veilfs run` session.
    Stats {
        /// The mount point or the workspace.
        #[arg(value_name = "PATH")]
        mnt: PathBuf,
    },
    /// Answer the questions of `ask` paths in this workspace's sessions.
    ///
    /// Answer the questions of `ask` paths: shows each request that waits (the
    /// session's workspace or mount point, as `[~/project]`; the path, the
    /// operation, the process and its command line, the rule) and takes one key: y
    /// allow once, p allow this path for the session, d allow its directory for the
    /// session, n deny, r deny with a reason (written to the audit log). While no
    /// approver is connected to a session, its questions are refused at once.
    ///
    /// Two keys answer for good: a always allow, x always deny this path. The
    /// question is answered as p (or d) or n would, and a rule saying the same is
    /// appended to the policy file of the mount that asked (the workspace's, or the
    /// home policy for a path in the home directory), with a comment saying when
    /// and for which process; the session reloads it, and the next one starts with
    /// it. The rule names exactly what the line of keys shows: the path, or the
    /// directory whose rule asks about it (a path beneath an asking directory asks
    /// whatever a rule says of it alone); after a question to read, it allows
    /// reading only. Nothing is written, and the prompt says why, when the mount
    /// has no policy file (`veilfs init` writes one), for a name shown escaped, a
    /// file not yours or reached through a symbolic link, or a rule that would not
    /// lift the question.
    ///
    /// Without PATH, it answers for the sessions of the workspace of the current
    /// directory (found as `veilfs run` finds it: the nearest directory holding a
    /// `.veilfs.toml`, else the top of the git work tree, else the current
    /// directory); with PATH, for the sessions serving each PATH (the `veilfs mount`
    /// at mount point PATH, each `veilfs run` of workspace PATH); with --all, for
    /// every session of this user. Never for another user's.
    ///
    /// Sessions that start later are answered too: while none has started it says
    /// on stderr what it waits for, and it stays when they end, for the next one of
    /// the same workspace. It ends when stdin closes, or on q, Ctrl-C or Ctrl-D
    /// (exit 0); exit 2 when a PATH does not exist or the runtime directory is
    /// refused.
    Prompt {
        /// Answer for every session of this user (`veilfs mount` and `veilfs run`),
        /// whatever it serves.
        #[arg(long, conflicts_with = "paths")]
        all: bool,
        /// Mount points or workspaces. Default: the workspace of the current
        /// directory.
        #[arg(value_name = "PATH")]
        paths: Vec<PathBuf>,
    },
    /// Write a starting `.veilfs.toml` for the workspace.
    ///
    /// Write a starting `.veilfs.toml` for the workspace: the built-in default's
    /// rules (`extends = "default"`), the ignore files found in the tree
    /// (`.cursorignore`, `.aiexclude`, ...) and Claude Code's settings imported, and
    /// a commented list of the files whose names look like secrets. Then print what
    /// the mount will hide. Never replaces an existing file without --force.
    ///
    /// With --from-audit LOG, the policy learned from a `veilfs run --learn LOG`
    /// session instead: an allow-list (`default = "deny"`) of what the session
    /// changed (`allow`) and read (`read-only`), directories it listed or used
    /// several names of as one pattern, each pattern with how often it was used,
    /// and the built-in default's deny rules after them, so that its secrets stay
    /// hidden.
    Init {
        /// The workspace. Default: found from the current directory as `run` finds
        /// it (the nearest directory holding a `.veilfs.toml`, else the top of the
        /// git work tree, else the current directory).
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// Replace an existing `.veilfs.toml`.
        #[arg(long)]
        force: bool,
        /// Write the policy learned from the audit log LOG of a `veilfs run
        /// --learn LOG` session (paths of this workspace; home paths are not
        /// learned).
        #[arg(long, value_name = "LOG")]
        from_audit: Option<PathBuf>,
    },
    /// Check what this machine offers veilfs, and say what to change.
    ///
    /// Check this machine: /dev/fuse, fusermount3, the kernel and FUSE passthrough,
    /// user namespaces (for `run` without root), --allow-other, the open-file limit.
    /// Says what to change; exit 0 when mounting will work.
    Doctor,
    /// Print a shell completion script.
    ///
    /// Print a shell completion script on stdout, e.g.
    /// `veilfs completions bash > ~/.local/share/bash-completion/completions/veilfs`.
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the manual pages into DIR.
    ///
    /// Print the manual pages (roff) of veilfs and of each subcommand into DIR, as
    /// `veilfs.1`, `veilfs-mount.1`, ... (the repository keeps them in `doc/man`).
    Man {
        /// An existing directory.
        dir: PathBuf,
    },
    /// Parse and lint a policy.
    ///
    /// Parse and lint a policy: exit 0 when it is usable (warnings are printed), 1 with
    /// its errors (file:line:col and what was expected).
    Check {
        /// The policy file to check. Default: .veilfs.toml in the current directory if
        /// present, else the built-in default policy.
        policy: Option<PathBuf>,
        /// Print the built-in default policy and exit.
        #[arg(long, conflicts_with = "policy")]
        print_default: bool,
        /// Print the built-in default home policy of `veilfs run` and exit.
        #[arg(long, conflicts_with_all = ["policy", "print_default"])]
        print_default_home: bool,
        /// Print the built-in environment policy of `veilfs run` (the variables it
        /// drops and keeps) as an `[env]` table and exit.
        #[arg(long, conflicts_with_all = ["policy", "print_default"])]
        print_default_env: bool,
        /// Print the profile of the agent NAME (claude, codex, gemini, aider,
        /// opencode, goose) as policy text, with the source of each entry, and exit.
        #[arg(long, value_name = "NAME", conflicts_with = "policy", value_parser = crate::run::parse_agent)]
        print_profile: Option<String>,
    },
    /// Say what the policy does with each PATH, and why.
    ///
    /// Say, for each PATH, the action the policy takes (allow, read-only, deny) and
    /// the rule (file:line:col) or other reason that decided it. A path in the home
    /// directory outside the workspace is decided by the home policy of `veilfs
    /// run`, and shown as `~/PATH`.
    Explain(ExplainArgs),
}

/// The arguments of `veilfs explain`.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// The policy file. Default: .veilfs.toml at the workspace root if present,
    /// else the built-in default policy.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// The workspace; relative PATHs are then relative to it. Default: found from
    /// the current directory as `veilfs run` finds it (nearest `.veilfs.toml`,
    /// else the git work tree's top, else the current directory), and relative
    /// PATHs are relative to the current directory.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// One JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
    /// The home policy for paths in the home directory outside the workspace
    /// (as `veilfs run` takes it; default: `~/.config/veilfs/home.toml`, else the
    /// built-in default home policy).
    #[arg(long, value_name = "FILE", conflicts_with = "no_home")]
    pub home_policy: Option<PathBuf>,
    /// Explain as `veilfs run --no-home` would: paths outside the workspace are
    /// refused as arguments.
    #[arg(long)]
    pub no_home: bool,
    /// Instead of paths, read an audit log: its refusals, and what a
    /// `--permissive` run would have refused or asked about, counted by the
    /// rule that made them, then path by path with what the policy in force
    /// (--policy, --workspace) decides now.
    #[arg(long, value_name = "FILE", conflicts_with = "paths")]
    pub audit: Option<PathBuf>,
    /// Instead of paths, every path of the workspace that the policy denies or
    /// makes read-only (or asks for), with the rule that decided it: one walk of
    /// the tree that opens no file (`.git` is not walked). A path that only
    /// inherits its directory's decision is counted, not listed.
    #[arg(long, conflicts_with_all = ["paths", "audit"])]
    pub all: bool,
    /// Instead of paths, destinations (`HOST:PORT`, repeatable): what `veilfs
    /// run` does with a connection to each under the policy's `[network]` table
    /// (allow, ask or deny), and the SPEC that decides.
    #[arg(long, value_name = "HOST:PORT", conflicts_with_all = ["paths", "audit", "all"])]
    pub net: Vec<String>,
    /// Paths (relative, or absolute inside the workspace or the home directory). A
    /// trailing `/`, or an existing directory in the workspace, is asked about as
    /// a directory.
    #[arg(required_unless_present_any = ["audit", "all", "net"], value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

/// Caching and data-path options shared by `mount` and `run`.
#[derive(Debug, clap::Args)]
pub struct CacheArgs {
    /// Serve writes (and, with --strict-open, reads of large files) through the
    /// daemon instead of FUSE passthrough.
    #[arg(long)]
    pub no_passthrough: bool,
    /// Seconds the kernel may cache entries and attributes where edits made outside
    /// the mount could go unseen (no watcher, or a directory that could not be
    /// watched); such edits show within this time. In watched directories entries
    /// are cached for up to 10 minutes and invalidated at once on any change.
    /// `inf`: for as long as the kernel keeps them (edits made outside the mount in
    /// an unwatched directory may then never show).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = crate::fs::DEFAULT_TTL.as_secs_f64(),
        value_parser = parse_ttl
    )]
    pub ttl: f64,
    /// Give every open a backing descriptor in the daemon. Every open is checked
    /// either way (an open for writing of a read-only file fails with EACCES); by
    /// default an open for reading gets no descriptor (one round trip, one `fstatat`
    /// in the daemon), and a read through it that misses the cache is checked against the
    /// current policy. With this flag a descriptor keeps reading after a reload
    /// denies its path, as with Unix permissions, and files of at least 1 MiB
    /// opened for reading are served by FUSE passthrough too (files opened for
    /// writing are, either way).
    #[arg(long)]
    pub strict_open: bool,
    /// Threads serving requests (by default one per core, at least 2 and at most 8).
    #[arg(long, value_name = "N", default_value_t = crate::session::mount::default_threads())]
    pub threads: usize,
    /// How requests travel between the kernel and veilfs: `uring` (FUSE over
    /// io_uring: one queue per CPU, each reply sent in the same system call that
    /// waits for the next request; needs Linux 6.14 or later with the fuse module's
    /// `enable_uring` on, see `veilfs doctor`), `dev` (reads and writes on
    /// /dev/fuse), or `auto`: `uring` where the kernel grants it, else `dev`.
    /// When `uring` is asked for by name and not granted, veilfs says so and uses
    /// `dev`. Under `uring`, a request waiting for an answer about an `ask` path
    /// holds one of its CPU's 32 queue entries; at most 24 are held so, and one
    /// more is refused at once (EACCES), so that the queue keeps serving every
    /// other request.
    #[arg(long, value_enum, value_name = "WAY", default_value_t = crate::session::mount::Transport::Auto)]
    pub transport: crate::session::mount::Transport,
    /// Log every refusal as one JSON line to FILE (`-`: stderr): time, operation,
    /// path, action, rule, pid, uid, gid and process name.
    #[arg(long, value_name = "FILE")]
    pub audit: Option<PathBuf>,
    /// With --audit, log allowed operations too: lookups, opens, listings, and
    /// each change the policy allows (`"change": true`).
    #[arg(long, requires = "audit")]
    pub audit_all: bool,
    /// Enforce none of the policy's rules, for tuning a policy before enforcing it:
    /// every access they would refuse (or ask about) is allowed and written to the
    /// --audit log as `would-refuse` (or `would-ask`), with its full path; read it
    /// with `veilfs explain --audit FILE`. veilfs's own guards still hold: the
    /// policy file and the files it imports stay read-only, and under `run` so do
    /// git's control files and veilfs's configuration directory.
    #[arg(long, requires = "audit")]
    pub permissive: bool,
    /// Learn a policy from what the command does: exactly `--permissive --audit
    /// FILE --audit-all` (nothing the policy would refuse is refused, and every
    /// access is logged to FILE, outside the workspace). Then `veilfs init
    /// --from-audit FILE` writes the allow-list of what it read and changed.
    /// FILE's name ends in `.learn.log` (the built-in policies keep such files
    /// read-only, so that no later session plants or extends one), and it is new.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["audit", "audit_all", "permissive"],
        value_parser = learn_log
    )]
    pub learn: Option<PathBuf>,
    /// Do not watch the source for outside edits (then only the TTL bounds how long
    /// the kernel may show stale entries).
    #[arg(long)]
    pub no_watch: bool,
    /// Seconds a question about an `ask` path waits for `veilfs prompt` (or another
    /// approver) before the request is refused with EACCES.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = crate::fs::ask::DEFAULT_TIMEOUT.as_secs_f64(),
        value_parser = parse_ask_timeout
    )]
    pub ask_timeout: f64,
}

impl CacheArgs {
    /// Applies these options to `opts`.
    pub fn apply(&self, opts: &mut crate::session::mount::MountOptions) {
        opts.passthrough = !self.no_passthrough;
        opts.ttl = ttl(self.ttl);
        opts.watch = !self.no_watch;
        opts.strict_open = self.strict_open;
        opts.threads = self.threads.max(1);
        opts.transport = self.transport;
        opts.audit = self.audit.clone().or_else(|| self.learn.clone());
        opts.audit_all = self.audit_all || self.learn.is_some();
        opts.permissive = self.permissive || self.learn.is_some();
        opts.learn = self.learn.is_some();
        opts.ask_timeout = std::time::Duration::from_secs_f64(self.ask_timeout);
    }
}

/// The manual pages, generated from the command-line definitions: `veilfs.1`, then
/// `veilfs-SUBCOMMAND.1` for each subcommand, as (file name, roff text).
pub fn man_pages() -> std::io::Result<Vec<(String, Vec<u8>)>> {
    use clap::CommandFactory;
    let top = Cli::command();
    let render = |cmd: clap::Command, name: String| -> std::io::Result<(String, Vec<u8>)> {
        let mut out = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut out)?;
        Ok((format!("{name}.1"), out))
    };
    let mut pages = vec![render(top.clone(), "veilfs".to_string())?];
    for sub in top.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("veilfs-{}", sub.get_name());
        pages.push(render(
            sub.clone().name(name.clone()).bin_name(name.clone()),
            name,
        )?);
    }
    Ok(pages)
}

/// `--ask-timeout`: seconds, more than 0 and at most a day.
fn parse_ask_timeout(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(t) if t > 0.0 && t <= 86_400.0 => Ok(t),
        _ => Err("expected a number of seconds, more than 0 and at most 86400".into()),
    }
}

/// The longest entry and attribute TTL handed to the kernel, for `--ttl inf` and
/// anything longer: about 136 years, which the kernel takes as "until invalidated"
/// (it caps what it is given far lower).
pub const LONGEST_TTL: std::time::Duration = std::time::Duration::from_secs(u32::MAX as u64);

/// `--ttl`: seconds, zero or more (fractions allowed), or `inf`.
fn parse_ttl(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(t) if t >= 0.0 => Ok(t),
        _ => Err("expected a number of seconds, 0 or more, or `inf`".into()),
    }
}

/// The TTL for `seconds` (as [`parse_ttl`] accepts them), capped at [`LONGEST_TTL`].
fn ttl(seconds: f64) -> std::time::Duration {
    if seconds >= LONGEST_TTL.as_secs_f64() {
        LONGEST_TTL
    } else {
        std::time::Duration::try_from_secs_f64(seconds).unwrap_or_default()
    }
}

/// `--learn FILE`: a name ending in `.learn.log`, and no file there yet with
/// anything in it (what a log holds before the session would be learned too).
fn learn_log(text: &str) -> Result<PathBuf, LearnLogError> {
    let path = PathBuf::from(text);
    if !path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(".learn.log") && n.len() > ".learn.log".len())
    {
        return Err(LearnLogError::Name);
    }
    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.len() > 0 || !m.is_file()) {
        return Err(LearnLogError::Exists(text.to_string()));
    }
    Ok(path)
}

/// Why `--learn FILE` is refused.
#[derive(Debug, thiserror::Error)]
pub enum LearnLogError {
    #[error("a learning log's name ends in `.learn.log` (`session.learn.log`)")]
    Name,
    #[error(
        "{0} exists: a learning session writes a new log (what one holds already would \
         be learned too)"
    )]
    Exists(String),
}
