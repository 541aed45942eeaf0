//! Under `veilfs run`, refusal notices never reach the terminal while the command
//! runs (it is the command's: a line drawn there lands over a full-screen agent or
//! editor): they go to the session's notices file, named in the start-up line, and
//! `run` prints one summary when the command has ended.

mod common;

use common::run::{show, text};

use std::path::Path;
use std::process::{Command, Output};

use common::require_fuse;
use common::tmux::Tmux;

const SECRET: &str = "notices-secret-5150";

#[test]
fn notices_never_reach_the_commands_screen() {
    let Scratch { tmp, ws, notices } = Scratch::new(true);
    let sock = tmp.path().join("tmux.sock");
    // A full-screen program's view: the command reads .env (refused) and waits.
    let cmd = format!(
        "cd {ws} && {bin} run --notices {n} -- sh -c 'clear; cat .env 2>/dev/null; touch .env 2>/dev/null; \
         echo READY; read x; echo BYE'; sleep 30",
        ws = ws.display(),
        bin = env!("CARGO_BIN_EXE_veilfs"),
        n = notices.display(),
    );
    let t = Tmux::start(&sock, &cmd, (120, 40));
    let screen = t.screen_with("READY");
    assert!(screen.contains("READY"), "{screen}");
    assert!(
        !screen.contains("refused") && !screen.contains("veilfs:"),
        "{screen}"
    );
    assert!(!screen.contains(SECRET), "{screen}");
    // The refusal is in the file, with its rule.
    let logged = std::fs::read_to_string(&notices).unwrap();
    assert!(
        logged.contains("veilfs: .env: lookup refused: rule 1"),
        "{logged}"
    );
    // When the command ends, one summary line says how many and where.
    t.keys("Enter");
    let screen = t.screen_with("veilfs: refused");
    assert!(screen.contains("BYE"), "{screen}");
    assert!(
        screen.contains(&format!(
            "veilfs: refused 1 name (.env); each with its rule in {}",
            notices.display()
        )),
        "{screen}"
    );
}

/// A test's directory: the workspace `ws` (holding a `.env` when asked) and where
/// the notices go.
struct Scratch {
    tmp: tempfile::TempDir,
    ws: std::path::PathBuf,
    notices: std::path::PathBuf,
}

impl Scratch {
    fn new(env: bool) -> Scratch {
        require_fuse();
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        if env {
            std::fs::write(ws.join(".env"), SECRET).unwrap();
        }
        let notices = tmp.path().join("notices.log");
        Scratch { tmp, ws, notices }
    }
}

/// `veilfs run -- sh -c SCRIPT` in `dir`, with the notices in `notices`: its output.
fn run_in(dir: &Path, notices: &Path, args: &[&str], script: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .arg("run")
        .arg("--notices")
        .arg(notices)
        .args(args)
        .args(["--", "sh", "-c", script])
        .current_dir(dir)
        .output()
        .unwrap()
}

/// A repository at `dir` holding `files` (path, body), committed.
fn repository(dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    common::git(dir, &["init", "-q"]);
    for (path, body) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
    common::git(dir, &["add", "-A"]);
    common::git(dir, &["commit", "-qm", "files"]);
}

/// The start-up lines are at most three short ones; `-v` says each thing in full.
#[test]
fn the_start_up_lines_are_three_short_ones() {
    let Scratch {
        tmp: _tmp,
        ws,
        notices,
    } = Scratch::new(true);
    let o = run_in(&ws, &notices, &[], "true");
    assert!(o.status.success(), "{}", show(&o));
    let err = text(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{}", show(&o));
    assert!(
        lines[0].starts_with(&format!(
            "veilfs: running sh in {} (the current directory) with the built-in default \
             policy, hiding 1 path in 1 place",
            ws.display()
        )),
        "{}",
        show(&o)
    );
    assert!(lines[1].contains("system read-only"), "{}", show(&o));
    assert!(lines[2].contains("`-v` says more"), "{}", show(&o));
    for l in &lines {
        let width = l.chars().count() - ws.display().to_string().len();
        assert!(width <= 130, "a long start-up line ({width}): {l}");
    }
    // In full: one line per thing set up.
    let o = run_in(&ws, &notices, &["-v"], "true");
    let err = text(&o.stderr);
    for said in [
        "veilfs:   policy: built-in default policy; hiding 1 path in 1 place (`veilfs explain --all` lists them)",
        "veilfs:   system read-only but /tmp",
        "veilfs:   no host socket (private /run, /tmp)",
        &format!("veilfs:   refusal notices in {}", notices.display()),
    ] {
        assert!(err.contains(said), "no {said:?} in\n{}", show(&o));
    }
}

/// Refusals that tools meet every time they start (a shell's history) are counted
/// in the summary, not named; the others are named.
#[test]
fn routine_refusals_are_counted_not_named() {
    let Scratch {
        tmp: _tmp,
        ws,
        notices,
    } = Scratch::new(true);
    let o = run_in(
        &ws,
        &notices,
        &["-q"],
        "cat \"$HOME/.bash_history\"; cat .env; exit 0",
    );
    assert!(o.status.success(), "{}", show(&o));
    assert!(
        text(&o.stderr).contains("Permission denied"),
        "{}",
        show(&o)
    );
    // -q: no summary, no file.
    assert!(!text(&o.stderr).contains("veilfs:"), "{}", show(&o));
    let o = run_in(
        &ws,
        &notices,
        &[],
        "cat \"$HOME/.bash_history\" 2>/dev/null; cat .env 2>/dev/null; exit 0",
    );
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!(
            "veilfs: refused 2 names (.env; 1 routine: histories and the like); each with \
             its rule in {}",
            notices.display()
        )),
        "{}",
        show(&o)
    );
    assert!(!err.contains("bash_history"), "{}", show(&o));
    // The file has both, with their rules.
    let logged = std::fs::read_to_string(&notices).unwrap();
    assert!(logged.contains(".bash_history: lookup refused"), "{logged}");
}

/// A clone inside the workspace's repository is refused (its hooks would run as the
/// person); the summary says to clone outside, and nothing was made.
#[test]
fn a_refused_clone_says_to_clone_outside() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    repository(&ws, &[("README", "ws")]);
    repository(&ws.join("upstream"), &[("a.txt", "a")]);
    let notices = tmp.path().join("notices.log");
    let o = run_in(&ws, &notices, &[], "git clone -q upstream fixclone");
    assert!(!o.status.success(), "{}", show(&o));
    let err = text(&o.stderr);
    assert!(
        err.contains("veilfs: refused 1 name (fixclone/.git)"),
        "{}",
        show(&o)
    );
    assert!(
        err.contains(
            "veilfs: fixclone/.git: no repository is made inside the workspace's own under \
             `veilfs run` (git would later run its hooks and config as you): clone it \
             outside the workspace, into your home directory (`~/src/NAME`: seen through \
             the home policy under `veilfs run` too)"
        ),
        "{}",
        show(&o)
    );
    assert!(!ws.join("fixclone/.git").exists());
}

/// A checkout that meets a denied name fails; the summary names the rule and the
/// `allow` rule to add, and with that rule in the policy the same clone succeeds.
#[test]
fn a_refused_checkout_says_the_rule_to_add_and_that_rule_works() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    repository(
        &ws.join("upstream"),
        &[("a.txt", "a"), ("certs/server.pem", "a test certificate")],
    );
    let notices = tmp.path().join("notices.log");
    let clone = "git clone -q upstream c2 && cat c2/certs/server.pem";
    let o = run_in(&ws, &notices, &[], clone);
    assert!(!o.status.success(), "{}", show(&o));
    let err = text(&o.stderr);
    assert!(
        err.contains("Clone succeeded, but checkout failed"),
        "{}",
        show(&o)
    );
    let said = "veilfs: c2/certs/server.pem: create refused by rule 1 \"*.pem\" (<built-in>:";
    let Some(at) = err.find(said) else {
        panic!("no {said:?} in\n{}", show(&o));
    };
    assert!(
        err[at..].contains(
            "to let the command make it, run `veilfs init` in the workspace, then add to \
             the .veilfs.toml it writes:"
        ),
        "{}",
        show(&o)
    );
    // The rule given, as the person would paste it.
    let rule: String = err[at..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("    "))
        .map(|l| format!("{}\n", &l[4..]))
        .collect();
    assert_eq!(
        rule,
        "[[rules]]\naction = \"allow\"\npaths = [\"/c2/certs/server.pem\"]\n"
    );
    // Done as said, outside the run.
    std::fs::remove_dir_all(ws.join("c2")).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .arg("init")
        .current_dir(&ws)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let policy = std::fs::read_to_string(ws.join(".veilfs.toml")).unwrap();
    std::fs::write(ws.join(".veilfs.toml"), format!("{policy}\n{rule}")).unwrap();
    let o = run_in(&ws, &notices, &["-q"], clone);
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(text(&o.stdout), "a test certificate");
    // Only that path: another .pem stays denied.
    let o = run_in(&ws, &notices, &["-q"], "cat upstream/certs/server.pem");
    assert!(
        text(&o.stderr).contains("Permission denied"),
        "{}",
        show(&o)
    );
}

/// The names in the summary are the command's choice: a control character in one
/// reaches the person's terminal escaped, in the names and in the rule offered.
#[test]
fn the_summary_escapes_the_names_the_command_chose() {
    let Scratch {
        tmp: _tmp,
        ws,
        notices,
    } = Scratch::new(false);
    let o = run_in(
        &ws,
        &notices,
        &[],
        "touch \"$(printf 'a\\033]0;owned\\007.pem')\" 2>/dev/null; touch 'b\u{202e}mep.x.pem' 2>/dev/null; exit 0",
    );
    let err = text(&o.stderr);
    assert!(err.contains("refused 2 names"), "{}", show(&o));
    assert!(err.contains("a\\x1b]0;owned\\x07.pem"), "{}", show(&o));
    assert!(
        !err.contains('\u{1b}') && !err.contains('\u{202e}'),
        "{}",
        show(&o)
    );
    assert!(!ws.join("b\u{202e}mep.x.pem").exists());
}

/// A notices file inside the workspace is refused before anything runs: the
/// command could rewrite what the person reads.
#[test]
fn a_notices_file_inside_the_workspace_is_refused() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let marker = ws.join("ran");
    for inside in [ws.join("n.log"), ws.join("sub/../n.log")] {
        let o = run_in(&ws, &inside, &[], "touch ran");
        assert_eq!(o.status.code(), Some(2), "{}", show(&o));
        assert!(
            text(&o.stderr).contains("is inside the workspace"),
            "{}",
            show(&o)
        );
        assert!(
            !marker.exists() && !ws.join("n.log").exists(),
            "{}",
            show(&o)
        );
    }
}

/// The blocks of rule lines (indented by four) that follow each line of `text`
/// holding `after`, as the person would paste them.
fn blocks_after(text: &str, after: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if l.contains(after) {
            out.push(
                lines[i + 1..]
                    .iter()
                    .take_while(|l| l.starts_with("    "))
                    .map(|l| format!("{}\n", &l[4..]))
                    .collect(),
            );
        }
    }
    out
}

/// A workspace inside the home directory is held by the home policy too: the
/// summary says both rules to add, where, and with both the checkout succeeds.
#[test]
fn a_refused_checkout_in_the_home_directory_says_both_rules() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let ws = home.join("src/proj");
    std::fs::create_dir_all(&ws).unwrap();
    repository(
        &ws.join("up"),
        &[("certs/server.pem", "a test certificate")],
    );
    let notices = tmp.path().join("notices.log");
    let run = |args: &[&str], script: &str| {
        Command::new(env!("CARGO_BIN_EXE_veilfs"))
            .arg("run")
            .arg("--notices")
            .arg(&notices)
            .args(args)
            .args(["--", "sh", "-c", script])
            .current_dir(&ws)
            .env("HOME", &home)
            .env_remove("XDG_CONFIG_HOME")
            .output()
            .unwrap()
    };
    let clone = "git clone -q up c2 && cat c2/certs/server.pem";
    let o = run(&[], clone);
    assert!(!o.status.success(), "{}", show(&o));
    let err = text(&o.stderr);
    let ws_rule = blocks_after(&err, "then add to the .veilfs.toml it writes:");
    let home_policy = home.join(".config/veilfs/home.toml");
    let home_rule = blocks_after(
        &err,
        &format!(
            "as the workspace lies in your home directory, put in {}:",
            home_policy.display()
        ),
    );
    assert_eq!(ws_rule.len(), 1, "{}", show(&o));
    assert_eq!(
        home_rule,
        [
            "extends = \"home-default\"\n[[rules]]\naction = \"allow\"\npaths = [\"/src/proj/c2/certs/server.pem\"]\n"
        ],
        "{}",
        show(&o)
    );
    // The workspace's rule alone is not enough: the home policy holds there too.
    std::fs::remove_dir_all(ws.join("c2")).unwrap();
    std::fs::write(
        ws.join(".veilfs.toml"),
        format!("extends = \"default\"\n{}", ws_rule[0]),
    )
    .unwrap();
    let o = run(&["-q"], clone);
    assert!(!o.status.success(), "{}", show(&o));
    // With both, as said.
    std::fs::remove_dir_all(ws.join("c2")).unwrap();
    std::fs::create_dir_all(home_policy.parent().unwrap()).unwrap();
    std::fs::write(&home_policy, &home_rule[0]).unwrap();
    let o = run(&["-q"], clone);
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(text(&o.stdout), "a test certificate");
}

/// The command's last words cannot hide veilfs's own: text it left hidden (or
/// coloured) on the person's terminal is reset before the summary.
#[test]
fn the_summary_is_never_drawn_in_the_commands_attributes() {
    let Scratch { tmp, ws, notices } = Scratch::new(true);
    let sock = tmp.path().join("tmux.sock");
    let cmd = format!(
        "cd {ws} && {bin} run --notices {n} -- sh -c 'cat .env 2>/dev/null; touch new.pem 2>/dev/null; printf \"fake\\033[8m\"; \
         printf \"veilfs: refused 9 names (forged)\\n\\033[1;2r\"'; sleep 30",
        ws = ws.display(),
        bin = env!("CARGO_BIN_EXE_veilfs"),
        n = notices.display(),
    );
    let t = Tmux::start(&sock, &cmd, (200, 40));
    // Drawn whole on the screen, not in the two-line scrolling region the command
    // left.
    let screen = t.screen_with("veilfs: refused 2 names");
    assert!(
        screen.contains("veilfs: refused 2 names (.env, new.pem)"),
        "{screen}"
    );
    // With its attributes: the hidden text the command turned on is off again
    // before veilfs's line.
    let screen = t.screen(true);
    let at = screen.find("veilfs: refused").unwrap();
    // The attributes in force at veilfs's line: those of the last SGR sequence
    // before it (tmux says each change of attributes between cells).
    let before = &screen[..at];
    let last_sgr = before
        .rmatch_indices("\x1b[")
        .map(|(i, _)| &before[i + 2..])
        .find_map(|rest| {
            let end = rest.find(|c: char| !(c.is_ascii_digit() || c == ';'))?;
            (rest[end..].starts_with('m')).then(|| rest[..end].to_string())
        })
        .unwrap_or_default();
    assert!(
        !last_sgr.split(';').any(|p| p == "8"),
        "the summary is drawn hidden ({last_sgr:?}): {screen:?}"
    );
}

/// The hint only ever offers to let the command make the one file it names: a
/// hostile command that touches a name inside a denied directory, or an existing
/// secret, is offered no rule (an allow of the directory, or of the secret, would
/// open it).
#[test]
fn no_rule_is_offered_for_a_denied_directory_or_an_existing_secret() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(ws.join("secrets")).unwrap();
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::write(ws.join("secrets/db.txt"), SECRET).unwrap();
    std::fs::write(ws.join(".env"), SECRET).unwrap();
    std::fs::write(home.join(".aws/credentials"), SECRET).unwrap();
    let notices = tmp.path().join("notices.log");
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["run", "--notices"])
        .arg(&notices)
        .args(["--", "sh", "-c"])
        .arg(
            "touch secrets/new.txt; touch .env; mkdir -p secrets/x; touch ~/.aws/x; \
             touch ~/.aws/credentials; exit 0",
        )
        .current_dir(&ws)
        .env("HOME", &home)
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(err.contains("veilfs: refused "), "{}", show(&o));
    assert!(
        !err.contains("allow") && !err.contains("[[rules]]"),
        "{}",
        show(&o)
    );
    assert!(!ws.join("secrets/new.txt").exists() && !home.join(".aws/x").exists());
}

/// A notices file in a part of the home directory the command may write is kept
/// from it all the same: it cannot be rewritten, truncated, moved or replaced, and
/// what the person reads there is what veilfs wrote.
#[test]
fn a_notices_file_the_command_could_reach_is_read_only_to_it() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(home.join(".cache")).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join(".env"), SECRET).unwrap();
    let notices = home.join(".cache/n.log");
    // First shown writable to the command: a file beside it.
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["run", "--notices"])
        .arg(&notices)
        .args(["--", "sh", "-c"])
        .arg(
            "cat .env 2>/dev/null; N=~/.cache/n.log; echo beside > ~/.cache/beside && \
             echo BESIDE-OK; echo forged >> $N || echo APPEND-REFUSED; true > $N || \
             echo TRUNCATE-REFUSED; mv $N $N.x || echo MOVE-REFUSED; rm -f $N; \
             ln -sf /etc/passwd $N || echo LINK-REFUSED; exit 0",
        )
        .current_dir(&ws)
        .env("HOME", &home)
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap();
    let out = text(&o.stdout);
    for said in [
        "BESIDE-OK",
        "APPEND-REFUSED",
        "TRUNCATE-REFUSED",
        "MOVE-REFUSED",
        "LINK-REFUSED",
    ] {
        assert!(out.contains(said), "no {said}: {}", show(&o));
    }
    let logged = std::fs::read_to_string(&notices).unwrap();
    // This session's lines, under a line of their own.
    assert!(logged.starts_with("# veilfs run (pid "), "{logged}");
    assert!(
        logged
            .lines()
            .nth(1)
            .unwrap_or("")
            .starts_with("veilfs: .env: lookup refused"),
        "{logged}"
    );
    assert!(!logged.contains("forged"), "{logged}");
    assert!(
        !text(&o.stderr).contains("is not the file this run wrote"),
        "{}",
        show(&o)
    );
}

/// A repository can commit a `.veilfs.toml`; a clone of it is the person's, so the
/// policy counts. When such a policy leaves the usual secrets open, `run` says so
/// (even with `-q`); the person's own untracked policy, or a committed one that
/// keeps the default, is not warned about.
#[test]
fn a_committed_policy_that_opens_the_usual_secrets_is_warned_about() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    let open = "extends = \"none\"\ndefault = \"allow\"\n";
    repository(&ws, &[(".veilfs.toml", open)]);
    std::fs::write(ws.join(".env"), SECRET).unwrap();
    let notices = tmp.path().join("notices.log");
    let warning = "veilfs run: warning: the policy .veilfs.toml is tracked by git, so it may \
                   have come with the repository, and it does not hide .env, which the \
                   built-in default hides: read it before you trust it (`veilfs explain --all`)";
    let o = run_in(&ws, &notices, &["-q"], "cat .env");
    assert!(text(&o.stderr).contains(warning), "{}", show(&o));
    // Untracked: the person's own choice.
    common::git(&ws, &["rm", "-q", "--cached", ".veilfs.toml"]);
    let o = run_in(&ws, &notices, &["-q"], "true");
    assert!(!text(&o.stderr).contains("warning"), "{}", show(&o));
    // Committed, but keeping the built-in secrets hidden.
    std::fs::write(
        ws.join(".veilfs.toml"),
        "extends = \"default\"\n[[rules]]\naction = \"read-only\"\npaths = [\"docs/\"]\n",
    )
    .unwrap();
    common::git(&ws, &["add", ".veilfs.toml"]);
    let o = run_in(&ws, &notices, &["-q"], "true");
    assert!(!text(&o.stderr).contains("warning"), "{}", show(&o));
    // Committed, keeping the default but opening a key that is in the tree.
    std::fs::create_dir(ws.join("deploy")).unwrap();
    std::fs::write(ws.join("deploy/prod.key"), SECRET).unwrap();
    std::fs::write(
        ws.join(".veilfs.toml"),
        "extends = \"default\"\n[[rules]]\naction = \"allow\"\npaths = [\"deploy/prod.key\"]\n",
    )
    .unwrap();
    common::git(&ws, &["add", ".veilfs.toml"]);
    let o = run_in(&ws, &notices, &["-q"], "true");
    assert!(
        text(&o.stderr).contains("and it does not hide deploy/prod.key, which the built-in"),
        "{}",
        show(&o)
    );
}

/// A `.veilfs.toml` committed in a subdirectory of a repository does not make the
/// workspace that subdirectory (leaving the rest of the project, `../.env`, as it
/// is): `run` started there refuses and says which workspace to name. The person's
/// own, untracked, still does.
#[test]
fn a_committed_policy_below_the_top_does_not_narrow_the_workspace() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let top = tmp.path().join("repo");
    repository(&top, &[("pkg/.veilfs.toml", "extends = \"default\"\n")]);
    std::fs::write(top.join(".env"), SECRET).unwrap();
    let pkg = top.join("pkg");
    let notices = tmp.path().join("notices.log");
    let o = run_in(&pkg, &notices, &["-q"], "cat ../.env");
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(!text(&o.stdout).contains(SECRET), "{}", show(&o));
    assert!(
        text(&o.stderr).contains(&format!(
            "is committed in the repository at {}, so the workspace would be {}",
            top.display(),
            pkg.display()
        )),
        "{}",
        show(&o)
    );
    // As it says: the whole project, and ../.env is hidden.
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["run", "-q", "--workspace"])
        .arg(&top)
        .args(["--", "sh", "-c", "cat ../.env"])
        .current_dir(&pkg)
        .output()
        .unwrap();
    assert!(
        text(&o.stderr).contains("Permission denied"),
        "{}",
        show(&o)
    );
    assert!(!text(&o.stdout).contains(SECRET), "{}", show(&o));
    // Untracked: the person's own word on where the workspace is.
    common::git(&top, &["rm", "-q", "--cached", "pkg/.veilfs.toml"]);
    let o = run_in(&pkg, &notices, &["-q"], "pwd");
    assert!(o.status.success(), "{}", show(&o));
}
