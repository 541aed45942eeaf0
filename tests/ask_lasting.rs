//! Lasting answers of `veilfs prompt` under `veilfs run`: `a` (always allow) and
//! `x` (always deny) answer the question and append a rule to the policy file of
//! the mount that asked; the running session takes it at its next reload, and the
//! next session starts with it, asking nobody. A name the command chose gets an
//! exact rule or none, a mount on the built-in policy gets none (and says how to
//! get a file), and the confined command cannot write such a rule itself.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::daemon::{Approver, Prompt};

const SECRET: &str = "lasting-secret-41\n";

/// The workspace policy: the directory `mig` asks.
const ASK_MIG: &str = "[[rules]]\naction = \"ask\"\npaths = [\"mig/\"]\n";

/// The home policy: `~/.config/tool` asks.
const ASK_TOOL: &str =
    "extends = \"home-default\"\n[[rules]]\naction = \"ask\"\npaths = [\"/.config/tool/\"]\n";

/// `TMP/ws` (its policy `ws/.veilfs.toml`), `TMP/home` (its policy in
/// `~/.config/veilfs/home.toml`, found as `veilfs run` finds it) and the runtime
/// directory `TMP/rt`.
struct Tree {
    tmp: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        let t = Tree {
            tmp: common::temp_tree(
                "veilfs-ask-lasting",
                &[
                    "ws/mig/sub",
                    "home/.config/tool",
                    "home/.config/veilfs",
                    "rt",
                ],
            ),
        };
        for f in [
            "ws/mig/sub/001.sql",
            "ws/mig/002.sql",
            "home/.config/tool/token",
        ] {
            std::fs::write(t.p(f), SECRET).unwrap();
        }
        std::fs::write(t.p("ws/.veilfs.toml"), ASK_MIG).unwrap();
        std::fs::write(t.p("home/.config/veilfs/home.toml"), ASK_TOOL).unwrap();
        t
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.p(rel)).unwrap()
    }

    /// `veilfs run -- sh -c script` in the workspace, each policy found where
    /// `run` looks for it.
    fn run(&self, script: &str) -> Running {
        let child = Command::new(env!("CARGO_BIN_EXE_veilfs"))
            .env("VEILFS_RUNTIME_DIR", self.p("rt"))
            .env("HOME", self.p("home"))
            .env_remove("XDG_CONFIG_HOME")
            .args(["run", "--ask-timeout", "600", "--workspace"])
            .arg(self.p("ws"))
            .args(["--", "sh", "-c", script])
            .current_dir(self.p("ws"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Running(Some(child))
    }

    /// `veilfs prompt` in the workspace (its home the temporary directory, so that
    /// paths are shown as `~/ws/...`).
    fn prompt(&self) -> Prompt {
        let mut c = Command::new(env!("CARGO_BIN_EXE_veilfs"));
        c.env("VEILFS_RUNTIME_DIR", self.p("rt"))
            .env("HOME", self.tmp.path())
            .arg("prompt")
            .current_dir(self.p("ws"));
        Prompt::start(c)
    }

    /// Lets the command go on past its wait for the file `name`.
    fn go(&self, name: &str) {
        std::fs::write(self.p("ws").join(name), "").unwrap();
    }
}

/// Waits for the file `name` in the workspace (created by [`Tree::go`]).
fn wait_for(name: &str) -> String {
    format!("while [ ! -e {name} ]; do sleep 0.05; done; ")
}

/// Reads `path` until it is served (at most 10 s: the session reloads its policy
/// file within about a second of an edit), then says `NAME=yes` or `NAME=no`.
fn read_once_served(path: &str, name: &str) -> String {
    format!(
        "ok=no; for i in $(seq 100); do if cat {path} 2>/dev/null; then ok=yes; break; fi; \
         sleep 0.1; done; echo {name}=$ok; "
    )
}

/// A `veilfs run` child, killed (by its pid) if a test fails before
/// [`finish`] waits for it.
struct Running(Option<Child>);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take()
            && matches!(c.try_wait(), Ok(None))
        {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[track_caller]
fn finish(mut run: Running) -> (i32, String, String) {
    let child = run.0.take().expect("not finished yet");
    common::finish(child, Duration::from_secs(60))
}

/// What `run` says at its end when it refused questions for want of an approver.
const UNHEARD: &str = "of `ask` paths";

/// "Always allow" in the workspace and in the home directory: the rule names the
/// directory the question comes from (as the prompt's line said), for reading (what
/// was asked), the running session takes it (a path the session grant never
/// covered is served with nobody answering any more), and the next session serves
/// both paths asking nobody.
#[test]
fn an_always_allow_lasts_into_the_next_session() {
    let t = Tree::new();
    let mut prompt = t.prompt();
    let script = format!(
        "{} cat mig/sub/001.sql; echo rc=$?; cat \"$HOME\"/.config/tool/token; echo rc=$?; \
         {} {} cat mig/sub/001.sql; echo again=$?",
        wait_for("go"),
        wait_for("go2"),
        read_once_served("mig/002.sql", "later"),
    );
    let run = t.run(&script);
    prompt
        .out
        .expect("-- [~/ws] answering for veilfs run (pid ");
    t.go("go");
    let shown = prompt.out.expect("always deny this path");
    assert!(
        shown.contains(
            "  a always allow reading mig/ and what is in it | x always deny this path   \
             (a rule in ~/ws/.veilfs.toml)"
        ),
        "{shown}"
    );
    prompt.type_keys(b"a");
    let said = prompt.out.expect("within a second)");
    assert!(
        said.contains("-> allow-dir")
            && said.contains("-- added to ~/ws/.veilfs.toml:6: read-only \"/mig/\""),
        "{said}"
    );
    let shown = prompt.out.expect("always deny this path");
    assert!(
        shown.contains("wants to read ~/.config/tool/token")
            && shown.contains("a always allow reading .config/tool/ and what is in it"),
        "{shown}"
    );
    prompt.type_keys(b"a");
    let said = prompt.out.expect("within a second)");
    assert!(said.contains("read-only \"/.config/tool/\""), "{said}");
    // Nobody answers from now on: what is served is the rules' doing.
    assert_eq!(prompt.close(), 0);
    t.go("go2");
    let (code, out, err) = finish(run);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out,
        format!("{SECRET}rc=0\n{SECRET}rc=0\n{SECRET}later=yes\n{SECRET}again=0\n"),
        "{err}"
    );
    let text = t.read("ws/.veilfs.toml");
    let added = text
        .strip_prefix(ASK_MIG)
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        added.starts_with("\n# veilfs prompt, 20")
            && added.contains("Z: always allow, asked by cat (pid ")
            && added.contains(", uid ")
            && added.ends_with(")\n[[rules]]\naction = \"read-only\"\npaths = [\"/mig/\"]\n"),
        "{added}"
    );
    let home = t.read("home/.config/veilfs/home.toml");
    assert!(
        home.starts_with(ASK_TOOL)
            && home.ends_with("[[rules]]\naction = \"read-only\"\npaths = [\"/.config/tool/\"]\n"),
        "{home}"
    );

    // The next session: no approver at all, and nothing asks. Reading was
    // approved, not writing: a change is refused (without a question).
    let run = t.run(
        "cat mig/sub/001.sql mig/002.sql \"$HOME\"/.config/tool/token; echo rc=$?; \
         echo more 2>/dev/null >> mig/002.sql; echo w=$?",
    );
    let (code, out, err) = finish(run);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with(&format!("{SECRET}{SECRET}{SECRET}rc=0\nw=")) && !out.contains("w=0"),
        "{out}{err}"
    );
    assert_eq!(t.read("ws/mig/002.sql"), SECRET);
    assert!(!err.contains(UNHEARD), "{err}");
}

/// "Always deny": the path is refused for the session now, and in the next one
/// without a question, while its neighbours still ask (the rule names that path
/// alone).
#[test]
fn an_always_deny_lasts_into_the_next_session() {
    let t = Tree::new();
    let mut prompt = t.prompt();
    let run = t.run(&format!(
        "{} cat mig/sub/001.sql; echo rc=$?",
        wait_for("go")
    ));
    prompt
        .out
        .expect("-- [~/ws] answering for veilfs run (pid ");
    t.go("go");
    prompt.out.expect("always deny this path");
    prompt.type_keys(b"x");
    let said = prompt.out.expect("within a second)");
    assert!(
        said.contains("-> deny") && said.contains(":6: deny \"/mig/sub/001.sql\""),
        "{said}"
    );
    assert_eq!(prompt.close(), 0);
    let (code, out, err) = finish(run);
    assert_eq!((code, out.as_str()), (0, "rc=1\n"), "{err}");
    assert!(
        t.read("ws/.veilfs.toml")
            .ends_with("[[rules]]\naction = \"deny\"\npaths = [\"/mig/sub/001.sql\"]\n")
    );

    // The next session, an approver listening: the denied path asks nothing, its
    // neighbour does.
    std::fs::remove_file(t.p("ws/go")).unwrap();
    let run = t.run(&format!(
        "{} cat mig/sub/001.sql; echo rc=$?; cat mig/002.sql; echo rc=$?",
        wait_for("go")
    ));
    let mut a = Approver::subscribe(&t.p("rt"));
    t.go("go");
    let q = a.question(Duration::from_secs(30));
    assert_eq!(q["path"], "mig/002.sql", "{:#?}", a.log);
    a.answer(&q["id"], "allow-once", None);
    let (code, out, err) = finish(run);
    assert_eq!((code, out), (0, format!("rc=1\n{SECRET}rc=0\n")), "{err}");
    let questions = a.log.iter().filter(|l| l.contains("\"question\"")).count();
    assert_eq!(questions, 1, "{:#?}", a.log);
}

/// Names the confined command chose: `*` and `[x]` are written as literals (the
/// next session serves those two files and still asks about `x.sql`), and a name
/// holding a newline gets no rule at all (answered for the session only, said).
#[test]
fn a_hostile_name_gets_an_exact_rule_or_none() {
    let t = Tree::new();
    let own = "[[rules]]\naction = \"ask\"\npaths = [\"*.sql\"]\n";
    std::fs::write(t.p("ws/.veilfs.toml"), own).unwrap();
    for name in ["*.sql", "[x].sql", "x.sql", "nl\n.sql"] {
        std::fs::write(t.p("ws").join(name), SECRET).unwrap();
    }
    let mut prompt = t.prompt();
    let run = t.run(&format!(
        "{} cat '*.sql'; cat '[x].sql'; cat 'nl\n.sql'; echo rc=$?",
        wait_for("go")
    ));
    prompt
        .out
        .expect("-- [~/ws] answering for veilfs run (pid ");
    t.go("go");
    for want in [
        "read-only \"/[*].sql\"",
        "read-only \"/[[]x[]].sql\"",
        "-- no rule written (allowed for the session only): nl\\x0a.sql cannot be \
         written as a rule exactly as it is shown",
    ] {
        let shown = prompt.out.expect("always deny this path");
        assert!(
            shown.contains("a always allow reading this path"),
            "{shown}"
        );
        prompt.type_keys(b"a");
        let said = prompt.out.expect(want);
        assert!(said.contains("-> allow-path"), "{said}");
    }
    assert_eq!(prompt.close(), 0);
    let (code, out, err) = finish(run);
    assert_eq!(
        (code, out),
        (0, format!("{SECRET}{SECRET}{SECRET}rc=0\n")),
        "{err}"
    );
    let text = t.read("ws/.veilfs.toml");
    let added = text.strip_prefix(own).unwrap_or_else(|| panic!("{text}"));
    assert_eq!(added.matches("[[rules]]").count(), 2, "{added}");
    assert!(!added.contains("/nl"), "{added}");

    // The next session: the two named files are served asking nobody; `x.sql`
    // (which `[x].sql` read as a glob would name) and the newline one still ask.
    std::fs::remove_file(t.p("ws/go")).unwrap();
    let run = t.run(&format!(
        "{} cat '*.sql' '[x].sql'; echo rc=$?; cat x.sql; echo rc=$?; cat 'nl\n.sql'; echo rc=$?",
        wait_for("go")
    ));
    let mut a = Approver::subscribe(&t.p("rt"));
    t.go("go");
    for path in ["x.sql", "nl\n.sql"] {
        let q = a.question(Duration::from_secs(30));
        assert_eq!(q["path"], path, "{:#?}", a.log);
        a.answer(&q["id"], "deny", None);
    }
    let (code, out, err) = finish(run);
    assert_eq!(
        (code, out),
        (0, format!("{SECRET}{SECRET}rc=0\nrc=1\nrc=1\n")),
        "{err}"
    );
}

/// A session on the built-in policy (its `ask` entries imported from Claude
/// Code's settings) has no policy file: the prompt writes none, says how to get
/// one, and answers for the session.
#[test]
fn without_a_policy_file_the_answer_holds_for_the_session_only() {
    let t = Tree::new();
    std::fs::remove_file(t.p("ws/.veilfs.toml")).unwrap();
    std::fs::create_dir_all(t.p("ws/.claude")).unwrap();
    let settings = serde_json::json!({"permissions": {"ask": ["Read(./mig/**)"]}});
    std::fs::write(t.p("ws/.claude/settings.json"), settings.to_string()).unwrap();
    let mut prompt = t.prompt();
    let run = t.run(&format!("{} cat mig/002.sql; echo rc=$?", wait_for("go")));
    prompt
        .out
        .expect("-- [~/ws] answering for veilfs run (pid ");
    t.go("go");
    let shown = prompt.out.expect("always deny this path");
    assert!(
        shown.contains("(no policy file: for the session only)"),
        "{shown}"
    );
    prompt.type_keys(b"a");
    let said = prompt.out.expect("(the next session reads it)");
    assert!(
        said.contains("-> allow-")
            && said.contains("-- no rule written (allowed for the session only): this mount runs on the built-in policy")
            && said.contains("`veilfs init` in the workspace"),
        "{said}"
    );
    assert_eq!(prompt.close(), 0);
    let (code, out, err) = finish(run);
    assert_eq!((code, out), (0, format!("{SECRET}rc=0\n")), "{err}");
    assert!(!t.p("ws/.veilfs.toml").exists());
}

/// The files the prompt writes are the policy files, which the confined command
/// cannot write by any route: its own rule never lands in either, its `ask` paths
/// still ask (refused with nobody answering), in this session and the next.
#[test]
fn the_command_cannot_write_a_lasting_rule_itself() {
    let t = Tree::new();
    let rule =
        "[[rules]]\\naction = \\\"allow\\\"\\npaths = [\\\"/mig/\\\", \\\"/.config/tool/\\\"]\\n";
    let script = format!(
        r#"
try() {{ if sh -c "$1" 2>/dev/null; then echo "ATTACK-WORKED: $2"; else echo "refused: $2"; fi; }}
for P in "$PWD/.veilfs.toml" "$HOME/.config/veilfs/home.toml"; do
  try "printf '{rule}' >> '$P'" "append to $P"
  try "python3 -c 'open(\"$P\", \"a\").write(\"x\")'" "python append to $P"
  try "sed -i 's/ask/allow/' '$P'" "sed -i $P"
  try "cp '$P' '$P.new' && printf '{rule}' >> '$P.new' && mv -f '$P.new' '$P'" "rename over $P"
  try "ln -f '$P' '$P.hard' && printf '{rule}' >> '$P.hard'" "hard link to $P"
  try "ln -sf '$P' \"\$HOME/link\" && printf '{rule}' >> \"\$HOME/link\"" "symbolic link to $P"
  try "truncate -s 0 '$P'" "truncate $P"
done
sleep 2
cat mig/002.sql; echo rc=$?; cat "$HOME"/.config/tool/token; echo rc=$?
"#
    );
    let (code, out, err) = finish(t.run(&script));
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("ATTACK-WORKED"), "{out}{err}");
    assert_eq!(out.matches("refused: ").count(), 14, "{out}");
    assert!(out.ends_with("rc=1\nrc=1\n"), "{out}{err}");
    assert!(!out.contains(SECRET.trim()), "{out}");
    assert_eq!(t.read("ws/.veilfs.toml"), ASK_MIG);
    assert_eq!(t.read("home/.config/veilfs/home.toml"), ASK_TOOL);
    let (code, out, err) = finish(t.run("cat mig/002.sql; echo rc=$?"));
    assert_eq!((code, out.as_str()), (0, "rc=1\n"), "{err}");
    assert!(err.contains(UNHEARD), "{err}");
}

/// Under `veilfs mount` too: "always allow" of a write writes an `allow` rule into
/// the mount's policy file (given with `--policy`), and the next mount serves the
/// change with no approver at all.
#[test]
fn an_always_allow_of_a_write_lasts_past_a_remount() {
    let t = Tree::new();
    std::fs::create_dir_all(t.p("mnt")).unwrap();
    let policy = t.p("pol.toml");
    std::fs::write(&policy, ASK_MIG).unwrap();
    let mount = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_veilfs"));
        cmd.env("VEILFS_RUNTIME_DIR", t.p("rt"))
            .args(["mount", "--ask-timeout", "600", "--policy"])
            .arg(&policy)
            .arg(t.p("ws"))
            .arg(t.p("mnt"));
        common::daemon::Daemon::start(cmd, &t.p("mnt"))
    };
    let append = |file: &str| {
        Command::new("sh")
            .arg("-c")
            .arg(format!("echo more >> {file}; echo rc=$?"))
            .current_dir(t.p("mnt"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let daemon = mount();
    let mut prompt = {
        let mut c = Command::new(env!("CARGO_BIN_EXE_veilfs"));
        c.env("VEILFS_RUNTIME_DIR", t.p("rt"))
            .env("HOME", t.tmp.path())
            .arg("prompt")
            .arg(t.p("mnt"));
        Prompt::start(c)
    };
    prompt.out.expect("answering for veilfs mount");
    let writer = append("mig/002.sql");
    let shown = prompt.out.expect("always deny this path");
    assert!(
        shown.contains("wants to write ")
            && shown.contains("  a always allow mig/ and what is in it | x always deny this path   (a rule in ~/pol.toml)"),
        "{shown}"
    );
    prompt.type_keys(b"a");
    let said = prompt.out.expect("within a second)");
    assert!(
        said.contains("-> allow-dir") && said.contains("-- added to ~/pol.toml:6: allow \"/mig/\""),
        "{said}"
    );
    let (code, out, err) = common::finish(writer, Duration::from_secs(30));
    assert_eq!((code, out.as_str()), (0, "rc=0\n"), "{err}");
    assert_eq!(prompt.close(), 0);
    drop(daemon);

    let _daemon = mount();
    let (code, out, err) = common::finish(append("mig/sub/001.sql"), Duration::from_secs(30));
    assert_eq!((code, out.as_str()), (0, "rc=0\n"), "{err}");
    assert_eq!(t.read("ws/mig/sub/001.sql"), format!("{SECRET}more\n"));
    assert_eq!(t.read("ws/mig/002.sql"), format!("{SECRET}more\n"));
}
