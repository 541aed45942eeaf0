//! What `veilfs run` says as it starts: at most three short lines on stderr, or,
//! with `-v`, one line for each thing it set up, in full.
//!
//! ```text
//! veilfs: running bash in /home/you/project (top of the git work tree) with the built-in default policy, hiding 2 paths in 2 places
//! veilfs: home /home/you: built-in default home policy; system read-only; no host sockets; dropped AWS_SECRET_ACCESS_KEY; host network
//! veilfs: some paths ask: answer with `veilfs prompt` in another terminal; refusals noted in /run/veilfs/notices-run-42.log; -v says more
//! ```
//!
//! The first line says what runs where and under which policy (and, first of all,
//! when nothing is refused: `--permissive`); the second what else is confined; the
//! third what the person may have to do while it runs, and where refusals go.

/// One thing said: in a few words, and in full (`-v`). An empty `short` is said
/// only in full.
#[derive(Debug, Clone, Default)]
pub(super) struct Note {
    pub short: String,
    pub long: String,
}

impl Note {
    pub fn new(short: impl Into<String>, long: impl Into<String>) -> Note {
        Note {
            short: short.into(),
            long: long.into(),
        }
    }

    /// The same words, short or long.
    pub fn same(text: impl Into<String>) -> Note {
        let text = text.into();
        Note {
            short: text.clone(),
            long: text,
        }
    }
}

/// The start-up lines, gathered as `run` sets the session up.
#[derive(Debug, Default)]
pub(super) struct Startup {
    /// "running CMD in WS (how it was found)".
    pub running: String,
    /// The workspace policy, and what it hides.
    pub policy: Note,
    /// `--permissive`, or empty.
    pub mode: Note,
    /// The home directory and the rest of the system.
    pub confined: Vec<Note>,
    /// What the person may need to do while the command runs, and where refusals go.
    pub person: Vec<Note>,
}

impl Startup {
    /// Prints the lines on stderr (`verbose`: in full), after `warning` if there
    /// is one. Paths and names come from the command line and the tree: never a
    /// control character raw.
    pub fn say(&self, warning: Option<&str>, verbose: bool) {
        if let Some(w) = warning {
            eprintln!("veilfs: warning: {}", crate::escape::escape(w));
        }
        for line in self.lines(verbose) {
            eprintln!("{}", crate::escape::escape(&line));
        }
    }

    /// The lines to print: three at most, or with `verbose` one per note.
    pub fn lines(&self, verbose: bool) -> Vec<String> {
        if verbose {
            let mut out = vec![format!("veilfs: {}", self.running)];
            let all = [&self.mode, &self.policy]
                .into_iter()
                .chain(&self.confined)
                .chain(&self.person);
            out.extend(
                all.filter(|n| !n.long.is_empty())
                    .map(|n| format!("veilfs:   {}", n.long)),
            );
            return out;
        }
        let join = |notes: &mut dyn Iterator<Item = &Note>| {
            notes
                .filter(|n| !n.short.is_empty())
                .map(|n| n.short.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        };
        let mut first = format!("veilfs: {}", self.running);
        if !self.policy.short.is_empty() {
            first.push_str(" with ");
            first.push_str(&self.policy.short);
        }
        if !self.mode.short.is_empty() {
            first = format!("{first}; {}", self.mode.short);
        }
        let mut out = vec![first];
        let confined = join(&mut self.confined.iter());
        if !confined.is_empty() {
            out.push(format!("veilfs: {confined}"));
        }
        let person = join(&mut self.person.iter());
        out.push(match person.is_empty() {
            true => format!("veilfs: {MORE}"),
            false => format!("veilfs: {person}; {MORE}"),
        });
        out
    }
}

/// What the start-up lines say of a session, gathered as it is planned, before
/// anything starts: all but what the mounts and the notices' destination tell once
/// they exist (see [`Facts::say`]).
#[derive(Debug)]
pub(super) struct Facts {
    /// The command's name (its first word).
    pub command: std::ffi::OsString,
    pub ws: std::path::PathBuf,
    /// How the workspace was found.
    pub found: crate::workspace::load::Found,
    /// The workspace policy, and what it hides.
    pub policy: Note,
    /// `--permissive`, or empty.
    pub mode: Note,
    /// The home directory, then the confinement's notes (see
    /// [`super::plan::Confinement::notes`]).
    pub confined: Vec<Note>,
    /// `run` started by root without `--user`.
    pub as_root: Note,
    /// Said before the lines: what the workspace policy's walk warns of.
    pub warning: Option<String>,
}

impl Facts {
    /// Says the start-up lines (`verbose`: in full): `VERB CMD in WS (how it was
    /// found)`, the policies and the confinement, then what the person may need to
    /// do (`ask`) and where refusals go (`notices`).
    pub fn say(&self, verb: &str, (ask, notices): (Note, Note), verbose: bool) {
        let said = Startup {
            running: format!(
                "{verb} {} in {} ({})",
                self.command.to_string_lossy(),
                self.ws.display(),
                self.found
            ),
            policy: self.policy.clone(),
            mode: self.mode.clone(),
            confined: self.confined.clone(),
            person: vec![ask, self.as_root.clone(), notices],
        };
        said.say(self.warning.as_deref(), verbose);
    }
}

/// The last words of the short form.
const MORE: &str = "`-v` says more";

/// `run` started by root, without `--user`.
pub(super) fn as_root_note(as_root: bool) -> Note {
    match as_root {
        true => Note::new(
            "as root: `--user NAME` confines better",
            "as root: `--user NAME` confines it better",
        ),
        false => Note::default(),
    }
}

/// The workspace policy (`source`, as [`crate::workspace::load::Loaded::source`] says it)
/// and what it hides.
pub(super) fn policy_note(source: &str, walk: &crate::workspace::walk::StartupWalk) -> Note {
    let name = match source.starts_with("built-in") {
        true => format!("the {source}"),
        false => format!("policy {source}"),
    };
    match (&walk.hiding, walk.hiding_in_full()) {
        (Some(short), Some(long)) => Note::new(
            format!("{name}, {short}"),
            format!("policy: {source}; {long}"),
        ),
        _ => Note::new(name, format!("policy: {source}")),
    }
}

/// `--permissive` (and `--learn`): nothing is refused.
pub(super) fn mode_note(
    mount: &crate::session::mount::MountOptions,
    layout: &super::home::Layout,
) -> Note {
    let home = matches!(layout, super::home::Layout::Separate(_));
    match &mount.audit {
        Some(log) if mount.permissive => Note::new(
            format!(
                "{}: nothing {}is refused, {} logged to {}",
                if mount.learn {
                    "LEARNING"
                } else {
                    "PERMISSIVE"
                },
                if home { "in the workspace " } else { "" },
                if mount.learn { "every access" } else { "only" },
                log.display()
            ),
            mount.permissive_note(home).unwrap_or_default(),
        ),
        _ => Note::default(),
    }
}

/// Some paths ask a person (and the mount enforces).
/// `ws`: the workspace, which `veilfs prompt` is given (or started in).
pub(super) fn ask_note(
    asks: bool,
    mount: &crate::session::mount::MountOptions,
    ws: &std::path::Path,
) -> Note {
    match asks && !mount.permissive {
        true => Note::same(crate::session::mount::ask_note(ws)),
        false => Note::default(),
    }
}

/// The home directory's mount, under the policy `source` (`None`: no home mount).
pub(super) fn home_note(layout: &super::home::Layout, source: Option<&str>) -> Note {
    use super::home::Layout;
    match (layout, source) {
        (Layout::Uncovered(why), _) => Note::same(format!("home not covered: {why}")),
        (Layout::Same(_), Some(src)) => Note::new(
            format!("the workspace is home: stacked on {src}"),
            format!(
                "the workspace is the home directory: its policy stacked on the home policy {src}"
            ),
        ),
        (Layout::Separate(h), Some(src)) => Note::new(
            format!("home {}: {src}", h.display()),
            format!("home {} with policy {src}", h.display()),
        ),
        _ => Note::default(),
    }
}

/// The person's home directories under `--user`.
pub(super) fn homes_note(homes: &[std::path::PathBuf], ws: &std::path::Path) -> Note {
    let said: Vec<String> = homes
        .iter()
        .map(|h| match ws.starts_with(h) {
            true => format!("{}: only the way to the workspace", h.display()),
            false => format!("{} hidden", h.display()),
        })
        .collect();
    match said.is_empty() {
        true => Note::default(),
        false => Note::same(format!("your home {}", said.join(", "))),
    }
}

/// Sockets: the host's are out of reach, but those allowed.
pub(super) fn sockets_note(private: &super::private::Private, without_landlock: bool) -> Note {
    let mut long = if private.share_tmp {
        "no host socket (private /run; /tmp shared".to_string()
    } else {
        "no host socket (private /run, /tmp".to_string()
    };
    let mut short = "no host sockets".to_string();
    for s in &private.sockets {
        long.push_str(&format!("; {} allowed", s.display()));
    }
    if !private.sockets.is_empty() {
        short.push_str(&format!(" but {}", private.sockets.len()));
        short.push_str(if private.sockets.len() == 1 {
            " allowed"
        } else {
            " allowed ones"
        });
    }
    if without_landlock {
        long.push_str("; host abstract sockets reachable: --without-landlock");
        short.push_str(" (abstract ones reachable: --without-landlock)");
    }
    long.push(')');
    Note::new(short, long)
}

/// The system outside the workspace.
pub(super) fn system_note(read_only: bool, writable: &[std::path::PathBuf]) -> Note {
    if !read_only {
        return Note::same("system writable: --system-writable");
    }
    let mut places: Vec<String> = super::confine::SCRATCH
        .iter()
        .filter(|s| std::path::Path::new(s).exists())
        .map(|s| s.to_string())
        .collect();
    let given: Vec<String> = writable.iter().map(|w| w.display().to_string()).collect();
    let short = match given.is_empty() {
        true => "system read-only".to_string(),
        false => format!("system read-only but {}", given.join(", ")),
    };
    places.extend(given);
    Note::new(short, format!("system read-only but {}", places.join(", ")))
}

/// The variables that do not reach the command: names only, escaped.
pub(super) fn env_note(dropped: &[super::env::Dropped]) -> Note {
    use std::os::unix::ffi::OsStrExt;
    const SHOWN: usize = 2;
    if dropped.is_empty() {
        return Note::default();
    }
    let names: Vec<String> = dropped
        .iter()
        .take(SHOWN)
        .map(|d| crate::escape::printable(d.name.as_bytes()))
        .collect();
    let more = match dropped.len().saturating_sub(SHOWN) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    Note::new(
        format!("dropped {}{more}", names.join(", ")),
        super::env::startup_note(dropped)
            .trim_start_matches("; ")
            .to_string(),
    )
}

/// What the start-up lines say of the agent's profile: whose, how it was chosen,
/// and that the files it reads its login from are readable by the commands it
/// runs too.
pub(super) fn agent_note(p: &crate::policy::agents::Profile, from: super::plan::AgentFrom) -> Note {
    use super::plan::AgentFrom;
    let how = match from {
        AgentFrom::Given => "--agent",
        AgentFrom::Policy => "the policy extends it",
        AgentFrom::Command => "found from the command's name",
    };
    let logins: Vec<String> = p.credentials.iter().map(|c| format!("~/{c}")).collect();
    Note::new(
        format!(
            "agent {}: what it runs later read-only, its login readable by its commands",
            p.name
        ),
        format!(
            "agent {} ({}, {how}): its hooks, MCP servers, settings and plugins read-only; \
             its state writable; its login ({}) readable by it and so by every command it \
             runs (`veilfs check --print-profile {}` lists all; `--agent none` for none)",
            p.name,
            p.title,
            logins.join(", "),
            p.name
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn startup() -> Startup {
        Startup {
            running: "running bash in /p (the current directory)".into(),
            policy: Note::new(
                "the built-in default policy, hiding 1 path in 1 place",
                "policy: built-in default policy; hiding 1 path in 1 place (`veilfs explain --all` lists them)",
            ),
            mode: Note::default(),
            confined: vec![
                Note::new(
                    "home /root: built-in default home policy",
                    "home /root with policy built-in default home policy",
                ),
                Note::new(
                    "system read-only",
                    "system read-only but /tmp, /var/tmp, /dev/shm",
                ),
            ],
            person: vec![Note::new(
                "refusals noted in /run/veilfs/n.log",
                "refusal notices in /run/veilfs/n.log",
            )],
        }
    }

    #[test]
    fn three_short_lines_or_one_per_note() {
        let s = startup();
        let short = s.lines(false);
        assert_eq!(short.len(), 3, "{short:#?}");
        assert_eq!(
            short[0],
            "veilfs: running bash in /p (the current directory) with the built-in default policy, hiding 1 path in 1 place"
        );
        assert_eq!(
            short[1],
            "veilfs: home /root: built-in default home policy; system read-only"
        );
        assert!(short[2].starts_with("veilfs: refusals noted in /run/veilfs/n.log"));
        let long = s.lines(true);
        assert_eq!(long.len(), 5, "{long:#?}");
        assert_eq!(
            long[3],
            "veilfs:   system read-only but /tmp, /var/tmp, /dev/shm"
        );
    }
}
