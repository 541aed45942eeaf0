//! Agent profiles: for one coding agent, the places it keeps its state (writable),
//! the files it reads its login from (readable by it, and so by the commands it
//! runs), and the files that make something run later as the person (hooks, MCP
//! server definitions, status-line and notify programs, plugins and extensions):
//! read-only, so that a confined session cannot leave code behind that the agent
//! runs outside it.
//!
//! Each profile is policy text (`policy-examples/agents/NAME.toml`, whose comments
//! name the documentation each entry comes from), anchored at the root of each
//! mount: the home directory and the workspace. A policy takes one with `extends =
//! "agent:NAME"` (the built-in default, then the profile) or `extends = ["home-default",
//! "agent:NAME"]`; `veilfs run` takes the command's own (`--agent NAME`, or found
//! from the command's name) for both its mounts, after the built-in rules and
//! before the person's own ([`super::Policy::parse_for_agent`]).

/// One agent's profile.
#[derive(Debug)]
pub struct Profile {
    /// The profile's name (`extends = "agent:NAME"`, `--agent NAME`).
    pub name: &'static str,
    /// What the agent is called in documentation.
    pub title: &'static str,
    /// The command names that start the agent (`veilfs run -- claude`).
    pub commands: &'static [&'static str],
    /// The profile's rules, as policy text.
    pub text: &'static str,
    /// The files it reads its login from, relative to the home directory (said in
    /// the start-up line: the agent's commands can read them too).
    pub credentials: &'static [&'static str],
    /// The variable that moves its own directory, that directory (relative to the
    /// home directory), and where it then lies below the variable's value.
    pub moved_by: Option<(&'static str, &'static str, &'static str)>,
}

/// The built-in profiles.
pub const PROFILES: [Profile; 6] = [
    Profile {
        name: "claude",
        title: "Claude Code",
        commands: &["claude"],
        text: include_str!("../../policy-examples/agents/claude.toml"),
        credentials: &[".claude/.credentials.json"],
        moved_by: Some(("CLAUDE_CONFIG_DIR", ".claude", "")),
    },
    Profile {
        name: "codex",
        title: "Codex CLI",
        commands: &["codex"],
        text: include_str!("../../policy-examples/agents/codex.toml"),
        credentials: &[".codex/auth.json"],
        moved_by: Some(("CODEX_HOME", ".codex", "")),
    },
    Profile {
        name: "gemini",
        title: "Gemini CLI",
        commands: &["gemini"],
        text: include_str!("../../policy-examples/agents/gemini.toml"),
        credentials: &[
            ".gemini/oauth_creds.json",
            ".gemini/google_accounts.json",
            ".gemini/.env",
        ],
        moved_by: Some(("GEMINI_CLI_HOME", ".gemini", "/.gemini")),
    },
    Profile {
        name: "aider",
        title: "aider",
        commands: &["aider"],
        text: include_str!("../../policy-examples/agents/aider.toml"),
        credentials: &[".aider/oauth-keys.env"],
        moved_by: None,
    },
    Profile {
        name: "opencode",
        title: "opencode",
        commands: &["opencode"],
        text: include_str!("../../policy-examples/agents/opencode.toml"),
        credentials: &[".local/share/opencode/auth.json"],
        moved_by: None,
    },
    Profile {
        name: "goose",
        title: "goose",
        commands: &["goose"],
        text: include_str!("../../policy-examples/agents/goose.toml"),
        credentials: &[".config/goose/secrets.yaml"],
        moved_by: None,
    },
];

/// The profile named `name`.
pub fn profile(name: &str) -> Option<&'static Profile> {
    PROFILES.iter().find(|p| p.name == name)
}

/// The profile of the agent a command starts, found from its first word's last
/// name (`/usr/local/bin/claude` is Claude Code).
pub fn detect(command: &std::ffi::OsStr) -> Option<&'static Profile> {
    let base = std::path::Path::new(command).file_name()?.to_str()?;
    PROFILES.iter().find(|p| p.commands.contains(&base))
}

/// The profiles' names, for messages.
pub fn names() -> String {
    PROFILES
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The profile's text with each entry in its own directory named again where
/// its variable moved that directory (`moved`, relative to the mount's root: the
/// home directory), so that both places are held alike. One line per entry, as
/// the profiles are written.
pub fn relocated_text(p: &Profile, moved: &str) -> String {
    let Some((_, dir, below)) = p.moved_by else {
        return p.text.to_string();
    };
    let to = format!(
        "\"/{}{below}/",
        super::literal_glob(moved.trim_matches('/'))
    );
    let mut out = String::with_capacity(p.text.len() * 2);
    for line in p.text.lines() {
        out.push_str(line);
        out.push('\n');
        // Its own directory's entries, and a project's (`**/.claude/...`), which
        // the moved directory holds as well.
        for from in [format!("\"/{dir}/"), format!("\"**/{dir}/")] {
            if line.trim_start().starts_with(&from) {
                out.push_str(&line.replacen(&from, &to, 1));
                out.push('\n');
            }
        }
    }
    out
}

/// The profile compiled, for the guard of what the agent runs later
/// (`crate::fs::gate::places::AgentFiles`).
pub fn compiled(p: &Profile) -> Result<super::Policy, super::LoadError> {
    super::Policy::parse(&location_name(p), p.text)
}

/// The name a profile's locations print as.
pub fn location_name(profile: &Profile) -> String {
    format!("<agent:{}>", profile.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Action, Policy};

    #[test]
    fn every_profile_compiles_and_its_credentials_are_readable() {
        for p in &PROFILES {
            let policy = Policy::parse(&location_name(p), p.text)
                .unwrap_or_else(|e| panic!("agent:{}: {e}", p.name));
            assert!(policy.rule_count() >= 2, "agent:{}", p.name);
            assert_eq!(policy.lint(), Vec::new(), "agent:{}", p.name);
            for c in p.credentials {
                let d = policy.decide(c.as_bytes(), false);
                assert!(d.action.visible(), "agent:{} {c}: {}", p.name, d.why());
            }
            // Each profile makes something read-only: what runs later.
            assert!(
                policy
                    .patterns()
                    .iter()
                    .any(|pat| pat.action == Action::ReadOnly),
                "agent:{}",
                p.name
            );
        }
    }

    #[test]
    fn a_moved_directory_is_held_in_both_places() {
        let claude = profile("claude").unwrap();
        let text = relocated_text(claude, "cfg/claude");
        let policy = Policy::parse("<t>", &text).unwrap();
        for p in [
            ".claude/settings.json",
            "cfg/claude/settings.json",
            "cfg/claude/statusline.sh",
        ] {
            assert_eq!(
                policy.decide(p.as_bytes(), false).action,
                Action::ReadOnly,
                "{p}"
            );
        }
        assert_eq!(
            policy.decide(b"cfg/claude/.credentials.json", false).action,
            Action::Allow
        );
        let gemini = profile("gemini").unwrap();
        let policy = Policy::parse("<t>", &relocated_text(gemini, "gh")).unwrap();
        assert_eq!(
            policy.decide(b"gh/.gemini/settings.json", false).action,
            Action::ReadOnly
        );
        // A name with glob characters is held as written.
        let policy = Policy::parse("<t>", &relocated_text(claude, "c*")).unwrap();
        assert_eq!(
            policy.decide(b"cx/settings.json", false).action,
            Action::Allow
        );
        assert_eq!(
            policy.decide(b"c*/settings.json", false).action,
            Action::ReadOnly
        );
    }

    #[test]
    fn the_agent_is_found_from_the_commands_name() {
        let found = |c: &str| detect(std::ffi::OsStr::new(c)).map(|p| p.name);
        assert_eq!(found("claude"), Some("claude"));
        assert_eq!(found("/usr/local/bin/codex"), Some("codex"));
        assert_eq!(found("./gemini"), Some("gemini"));
        assert_eq!(found("bash"), None);
        assert_eq!(found("claude-helper"), None);
        assert_eq!(profile("goose").map(|p| p.title), Some("goose"));
        assert!(profile("cursor").is_none());
    }
}
