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
}

/// The built-in profiles.
pub const PROFILES: [Profile; 6] = [
    Profile {
        name: "claude",
        title: "Claude Code",
        commands: &["claude"],
        text: include_str!("../../policy-examples/agents/claude.toml"),
        credentials: &[".claude/.credentials.json"],
    },
    Profile {
        name: "codex",
        title: "Codex CLI",
        commands: &["codex"],
        text: include_str!("../../policy-examples/agents/codex.toml"),
        credentials: &[".codex/auth.json"],
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
    },
    Profile {
        name: "aider",
        title: "aider",
        commands: &["aider"],
        text: include_str!("../../policy-examples/agents/aider.toml"),
        credentials: &[".aider/oauth-keys.env"],
    },
    Profile {
        name: "opencode",
        title: "opencode",
        commands: &["opencode"],
        text: include_str!("../../policy-examples/agents/opencode.toml"),
        credentials: &[".local/share/opencode/auth.json"],
    },
    Profile {
        name: "goose",
        title: "goose",
        commands: &["goose"],
        text: include_str!("../../policy-examples/agents/goose.toml"),
        credentials: &[".config/goose/secrets.yaml"],
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
            assert!(policy.rule_count() >= 3, "agent:{}", p.name);
            for c in p.credentials {
                let d = policy.decide(c.as_bytes(), false);
                assert_eq!(d.action, Action::Allow, "agent:{} {c}: {}", p.name, d.why());
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
