//! `veilfs run` and its policy: the command can neither rewrite nor plant the policy,
//! the person outside can change it while the command runs, no descriptor it starts
//! with reaches around the mount, and the workspace is found the way git finds its
//! repository. Each test attacks from inside a real `veilfs run`.

mod common;

use common::run::{show, text};

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::{require_fuse, wait_until};

const SECRET: &str = "TOPSECRET-policy";

const DENY_ENV: &str = "[[rules]]\naction = \"deny\"\npaths = [\".env\", \"secrets/\"]\n";
const DENY_ENV_AND_A: &str =
    "[[rules]]\naction = \"deny\"\npaths = [\".env\", \"secrets/\", \"a.txt\"]\n";
const ALLOW_ALL: &str = "default = \"allow\"\n";

/// `TMP/ws` with a secret `.env`, `secrets/token`, `a.txt`, `src/lib.rs`, and
/// `TMP/outside/` for files outside the workspace.
struct Ws {
    tmp: tempfile::TempDir,
    dir: PathBuf,
}

impl Ws {
    fn new() -> Ws {
        require_fuse();
        let tmp = tempfile::Builder::new()
            .prefix("veilfs-runpol")
            .tempdir()
            .unwrap();
        let dir = tmp.path().join("ws");
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::create_dir_all(dir.join("secrets")).unwrap();
        std::fs::create_dir_all(tmp.path().join("outside")).unwrap();
        std::fs::write(dir.join(".env"), format!("{SECRET}\n")).unwrap();
        std::fs::write(dir.join("secrets/token"), format!("{SECRET}\n")).unwrap();
        std::fs::write(dir.join("a.txt"), "hello\n").unwrap();
        std::fs::write(dir.join("src/lib.rs"), "// lib\n").unwrap();
        Ws { tmp, dir }
    }

    fn outside(&self, rel: &str) -> PathBuf {
        self.tmp.path().join("outside").join(rel)
    }

    fn run(&self, cwd: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_veilfs"));
        c.arg("run").args(args).current_dir(cwd);
        c
    }

    /// `veilfs run ARGS -- sh -c SCRIPT` from the workspace root, to completion.
    fn sh(&self, args: &[&str], script: &str) -> Output {
        let mut all = args.to_vec();
        all.extend(["--", "sh", "-c", script]);
        self.run(&self.dir, &all).output().unwrap()
    }
}

/// Kills a `veilfs run` (by pid; its namespace goes with it) if the test fails
/// before waiting for it: [`Armed::disarm`] once it has been reaped.
struct Armed(Option<u32>);

impl Armed {
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            // SAFETY: signalling our own child, not yet reaped, by pid.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }
}

/// Waits for a `veilfs run` started with piped output; kills it (by pid) when it
/// does not end within the deadline, so a hang is a failure, not a stuck suite.
fn finish(mut child: Child, limit: Duration) -> Output {
    let ended = wait_until(limit, || child.try_wait().unwrap().is_some());
    if !ended {
        let _ = child.kill();
    }
    let o = child.wait_with_output().unwrap();
    assert!(
        ended,
        "veilfs run did not end within {limit:?}: {}",
        show(&o)
    );
    o
}

/// The script a command runs to report, for each attack, whether it succeeded.
const REWRITE_ATTACKS: &str = r#"
P="$1"
try() { if sh -c "$1" 2>/dev/null; then echo "ATTACK-WORKED: $2"; else echo "refused: $2"; fi; }
try "printf 'default = \"allow\"\n' > '$P'" "in-place rewrite"
try "printf 'default = \"allow\"\n' >> '$P'" "append"
try "truncate -s 0 '$P'" "truncate"
try "chmod 666 '$P'" "chmod"
try "rm -f '$P'" "unlink"
try "printf 'default = \"allow\"\n' > '$P.new' && mv -f '$P.new' '$P'" "rename over"
try "ln -f '$P' '$P.link' && printf 'default = \"allow\"\n' > '$P.link'" "hard link then write"
"#;

/// Renaming the directory that holds the policy file (when that is the workspace,
/// the mount point itself).
const RENAME_DIR: &str =
    r#"try "mv '$(dirname "$P")' '$(dirname "$P").moved'" "rename its directory""#;

/// Item 2: a policy file outside the workspace, given with `--policy`, cannot be
/// rewritten, replaced or linked from inside; the person outside can still tighten
/// it, and the command meets the new rule within a deadline.
#[test]
fn the_command_cannot_rewrite_its_policy_outside_the_workspace() {
    let ws = Ws::new();
    let p = ws.outside("p.toml");
    std::fs::write(&p, DENY_ENV).unwrap();
    let marker = ws.dir.join("attacked");
    let script = format!(
        "{REWRITE_ATTACKS}\ntouch attacked\n\
         i=0; while cat a.txt >/dev/null 2>&1 && [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done\n\
         cat a.txt >/dev/null 2>&1 && echo a-still-readable; cat .env secrets/token"
    );
    let child = ws
        .run(
            &ws.dir,
            &[
                "-q",
                "--policy",
                p.to_str().unwrap(),
                "--",
                "sh",
                "-c",
                &script,
                "sh",
                p.to_str().unwrap(),
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the attacks are over, the person outside tightens the policy.
    assert!(
        wait_until(Duration::from_secs(20), || marker.exists()),
        "the command never got through its attacks"
    );
    assert_eq!(std::fs::read_to_string(&p).unwrap(), DENY_ENV);
    std::fs::write(&p, DENY_ENV_AND_A).unwrap();
    let o = finish(child, Duration::from_secs(40));
    let out = text(&o.stdout);
    assert!(!out.contains("ATTACK-WORKED"), "{}", show(&o));
    assert!(out.contains("refused: rename over"), "{}", show(&o));
    assert!(
        !out.contains("a-still-readable"),
        "outside edit not in force: {}",
        show(&o)
    );
    assert!(!out.contains(SECRET), "{}", show(&o));
    assert_eq!(std::fs::read_to_string(&p).unwrap(), DENY_ENV_AND_A);
    assert!(!ws.outside("p.toml.link").exists());
}

/// Items 2 and 4: `WS/.veilfs.toml`, found without `--policy`, cannot be changed
/// from inside, and an edit made outside (on the real path) is in force within a
/// deadline.
#[test]
fn the_workspace_policy_is_read_only_inside_and_editable_outside() {
    let ws = Ws::new();
    let p = ws.dir.join(".veilfs.toml");
    std::fs::write(&p, DENY_ENV).unwrap();
    let marker = ws.dir.join("attacked");
    let script = format!(
        "{REWRITE_ATTACKS}\nP=$PWD/.veilfs.toml\n{RENAME_DIR}\ntouch attacked\n\
         i=0; while cat a.txt >/dev/null 2>&1 && [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done\n\
         cat a.txt >/dev/null 2>&1 && echo a-still-readable; cat .env secrets/token"
    );
    let child = ws
        .run(
            &ws.dir,
            &["-q", "--", "sh", "-c", &script, "sh", ".veilfs.toml"],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(20), || marker.exists()),
        "the command never got through its attacks"
    );
    assert_eq!(std::fs::read_to_string(&p).unwrap(), DENY_ENV);
    std::fs::write(&p, DENY_ENV_AND_A).unwrap();
    let o = finish(child, Duration::from_secs(40));
    let out = text(&o.stdout);
    // "rename its directory" renames the workspace root itself: refused.
    assert!(!out.contains("ATTACK-WORKED"), "{}", show(&o));
    assert!(
        !out.contains("a-still-readable"),
        "outside edit not in force: {}",
        show(&o)
    );
    assert!(!out.contains(SECRET), "{}", show(&o));
    assert_eq!(std::fs::read_to_string(&p).unwrap(), DENY_ENV_AND_A);
    assert!(!ws.dir.join(".veilfs.toml.link").exists());
}

/// Item 3: with the built-in default policy, the command cannot plant a
/// `.veilfs.toml` for the next run, at the root or in a subdirectory, by any
/// route; the next run still uses the built-in policy.
#[test]
fn a_policy_cannot_be_planted_for_next_time() {
    let ws = Ws::new();
    let allow = "default = \\\"allow\\\"";
    let script = format!(
        r#"
try() {{ if sh -c "$1" 2>/dev/null; then echo "ATTACK-WORKED: $2"; else echo "refused: $2"; fi; }}
for d in . src; do
  try "printf '{allow}\n' > $d/.veilfs.toml" "create $d"
  try "printf '{allow}\n' > $d/x.toml && mv $d/x.toml $d/.veilfs.toml" "rename onto $d"
  try "printf '{allow}\n' > $d/y.toml && ln $d/y.toml $d/.veilfs.toml" "link onto $d"
  try "ln -s y.toml $d/.veilfs.toml" "symlink $d"
  try "mkfifo $d/.veilfs.toml" "mknod $d"
  try "mkdir $d/.veilfs.toml" "mkdir $d"
done
"#
    );
    let o = ws.sh(&["-q"], &script);
    let out = text(&o.stdout);
    assert!(out.contains("refused: create ."), "{}", show(&o));
    assert!(!out.contains("ATTACK-WORKED"), "{}", show(&o));
    for d in [ws.dir.clone(), ws.dir.join("src")] {
        let planted = d.join(".veilfs.toml");
        assert!(
            planted.symlink_metadata().is_err(),
            "{} was planted: {}",
            planted.display(),
            show(&o)
        );
    }
    // The next run: still the built-in policy, `.env` still hidden.
    let o = ws.run(&ws.dir, &["--", "cat", ".env"]).output().unwrap();
    assert!(
        text(&o.stderr).contains("built-in default policy"),
        "{}",
        show(&o)
    );
    assert!(!text(&o.stdout).contains(SECRET), "{}", show(&o));
}

/// Item 5: the policy file is protected by identity: `--policy` through a symlink
/// protects the file it names, and a policy file with another hard link is refused.
#[test]
fn the_policy_file_is_protected_however_it_is_named() {
    let ws = Ws::new();
    std::fs::write(ws.dir.join("pol.toml"), DENY_ENV).unwrap();
    let link = ws.outside("link.toml");
    std::os::unix::fs::symlink(ws.dir.join("pol.toml"), &link).unwrap();
    let o = ws.sh(
        &["-q", "--policy", link.to_str().unwrap()],
        &format!("set -- \"$PWD/pol.toml\"\n{REWRITE_ATTACKS}\n{RENAME_DIR}\ncat .env"),
    );
    let out = text(&o.stdout);
    assert!(out.contains("refused: in-place rewrite"), "{}", show(&o));
    // `pol.toml`'s directory is the workspace root: "rename its directory" is refused.
    assert!(!out.contains("ATTACK-WORKED"), "{}", show(&o));
    assert!(!out.contains(SECRET), "{}", show(&o));
    assert_eq!(
        std::fs::read_to_string(ws.dir.join("pol.toml")).unwrap(),
        DENY_ENV
    );

    // A second name for the file, made before the run: refused at start.
    let p = ws.outside("p.toml");
    std::fs::write(&p, DENY_ENV).unwrap();
    std::fs::hard_link(&p, ws.dir.join("alias.toml")).unwrap();
    let marker = format!("refused-after-fork-{}", std::process::id());
    let o = ws.sh(
        &["-q", "--policy", p.to_str().unwrap()],
        &format!("cat .env; echo ran # {marker}"),
    );
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(text(&o.stderr).contains("hard links"), "{}", show(&o));
    assert!(!text(&o.stdout).contains("ran"), "{}", show(&o));
    // Refused after the command's namespace was made: nothing of it is left (its
    // init, forked with the same command line, was killed and reaped).
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&marker) && !c.contains("cargo"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Item 6: a descriptor 0–2 open on a directory (here stdin on the real workspace)
/// would reach around the mount: `run` refuses to start.
#[test]
fn an_inherited_directory_descriptor_is_refused() {
    let ws = Ws::new();
    for (fd, redirect) in [(0, "0<"), (1, "1<"), (2, "2<")] {
        // `sh -c 'exec veilfs run ... N< DIR'` hands the directory on descriptor N.
        let script = format!(
            "exec {} run -q -- sh -c 'cat /proc/self/fd/{fd}/.env; echo ran' {redirect} {}",
            env!("CARGO_BIN_EXE_veilfs"),
            ws.dir.display()
        );
        let o = Command::new("sh")
            .args(["-c", &script])
            .current_dir(&ws.dir)
            .output()
            .unwrap();
        let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
        assert!(!all.contains(SECRET), "fd {fd}: {}", show(&o));
        assert_eq!(o.status.code(), Some(2), "fd {fd}: {}", show(&o));
        assert!(!all.contains("ran"), "fd {fd}: {}", show(&o));
    }
    // The message says what to do (stderr is a directory in the last case, so check
    // it with stdin only).
    let o = Command::new("sh")
        .args([
            "-c",
            &format!(
                "exec {} run -q -- true < {}",
                env!("CARGO_BIN_EXE_veilfs"),
                ws.dir.display()
            ),
        ])
        .output()
        .unwrap();
    assert!(
        text(&o.stderr).contains("stdin (descriptor 0) is open on the directory"),
        "{}",
        show(&o)
    );
}

/// Item 10: started in a subdirectory, `run` and `explain` police the whole
/// workspace (the nearest `.veilfs.toml`, else the git top), and the command starts
/// in the same subdirectory through the mount.
#[test]
fn the_workspace_is_found_from_a_subdirectory() {
    let ws = Ws::new();
    std::fs::create_dir_all(ws.dir.join("config")).unwrap();
    std::fs::write(ws.dir.join("config/prod.yaml"), format!("{SECRET}\n")).unwrap();
    std::fs::write(
        ws.dir.join(".veilfs.toml"),
        "[[rules]]\naction = \"deny\"\npaths = [\".env\", \"config/prod.yaml\"]\n",
    )
    .unwrap();
    let src = ws.dir.join("src");
    let o = ws
        .run(
            &src,
            &[
                "--",
                "sh",
                "-c",
                "pwd; cat ../.env; cat ../config/prod.yaml; cat lib.rs",
            ],
        )
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert!(
        out.starts_with(&format!("{}\n", src.display())),
        "{}",
        show(&o)
    );
    assert!(out.contains("// lib"), "{}", show(&o));
    assert!(!out.contains(SECRET), "{}", show(&o));
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!(
            "in {} (nearest directory holding .veilfs.toml)",
            ws.dir.display()
        )),
        "{}",
        show(&o)
    );
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["explain", "prod.yaml"])
        .current_dir(ws.dir.join("config"))
        .output()
        .unwrap();
    assert!(
        text(&o.stdout).contains("deny      config/prod.yaml"),
        "{}",
        show(&o)
    );

    // No `.veilfs.toml`: the top of the git work tree.
    std::fs::remove_file(ws.dir.join(".veilfs.toml")).unwrap();
    std::fs::create_dir(ws.dir.join(".git")).unwrap();
    let o = ws
        .run(
            &src,
            &["--", "sh", "-c", "cat ../.env ../secrets/token; echo done"],
        )
        .output()
        .unwrap();
    assert!(text(&o.stdout).contains("done"), "{}", show(&o));
    assert!(!text(&o.stdout).contains(SECRET), "{}", show(&o));
    assert!(
        text(&o.stderr).contains("(top of the git work tree)"),
        "{}",
        show(&o)
    );
}

/// A `.veilfs.toml` in a shared parent that another user owns does not choose the
/// workspace or its policy; and since passing over it would leave a workspace
/// smaller than the project it marks, `run` refuses and says how to name one.
#[test]
fn another_users_policy_file_is_passed_over() {
    let ws = Ws::new();
    let planted = ws.tmp.path().join(".veilfs.toml");
    std::fs::write(&planted, ALLOW_ALL).unwrap();
    std::os::unix::fs::chown(&planted, Some(65534), Some(65534)).unwrap();
    let o = ws
        .run(&ws.dir, &["--", "sh", "-c", "cat .env; echo done"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(!text(&o.stdout).contains("done"), "{}", show(&o));
    assert!(
        text(&o.stderr).contains("name the workspace (--workspace"),
        "{}",
        show(&o)
    );
    let dir = ws.dir.display().to_string();
    let o = ws
        .run(
            &ws.dir,
            &["--workspace", &dir, "--", "sh", "-c", "cat .env; echo done"],
        )
        .output()
        .unwrap();
    assert!(text(&o.stdout).contains("done"), "{}", show(&o));
    assert!(!text(&o.stdout).contains(SECRET), "{}", show(&o));
    // Started where that file lies, `run` does not fall back on it either: it
    // refuses to start (attacker finding: it said "ignoring" and then loaded it).
    std::fs::write(ws.tmp.path().join("secret.txt"), format!("{SECRET}\n")).unwrap();
    std::fs::write(ws.tmp.path().join(".env"), format!("{SECRET}\n")).unwrap();
    let o = ws
        .run(
            ws.tmp.path(),
            &["--", "sh", "-c", "cat .env ws/.env; echo ran"],
        )
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(!text(&o.stdout).contains(SECRET), "{}", show(&o));
    assert!(!text(&o.stdout).contains("ran"), "{}", show(&o));
    assert!(
        text(&o.stderr).contains("owned by uid 65534"),
        "{}",
        show(&o)
    );
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["explain", ".env"])
        .current_dir(ws.tmp.path())
        .output()
        .unwrap();
    assert_ne!(o.status.code(), Some(0), "{}", show(&o));
}

/// A `.git` made inside the project (here by the confined command) does not narrow
/// the workspace of a later run started below it: the outermost git work tree wins
/// (attacker finding: `mkdir src/.git`, then `cd src && veilfs run` exposed `../.env`).
#[test]
fn a_planted_git_directory_does_not_narrow_the_workspace() {
    let ws = Ws::new();
    std::fs::create_dir(ws.dir.join(".git")).unwrap();
    // A confined command can no longer make it (see
    // `the_command_cannot_plant_code_for_the_persons_git`); made outside here.
    let o = ws.sh(&["-q"], "mkdir src/.git && echo planted");
    assert!(!text(&o.stdout).contains("planted"), "{}", show(&o));
    std::fs::create_dir(ws.dir.join("src/.git")).unwrap();
    let o = ws
        .run(
            &ws.dir.join("src"),
            &["--", "sh", "-c", "cat ../.env; echo done"],
        )
        .output()
        .unwrap();
    assert!(text(&o.stdout).contains("done"), "{}", show(&o));
    assert!(!text(&o.stdout).contains(SECRET), "{}", show(&o));
    assert!(
        text(&o.stderr).contains(&format!(
            "in {} (top of the git work tree)",
            ws.dir.display()
        )),
        "{}",
        show(&o)
    );
}

/// Item 11: `--user` takes names; as root without it, `run` says `--user` confines
/// better (in its one start-up line).
#[test]
fn user_names_are_accepted() {
    let ws = Ws::new();
    for p in [ws.tmp.path(), &ws.dir] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let o = ws.sh(&["-q", "--user", "nobody"], "id -un; id -u; cat a.txt");
    assert_eq!(text(&o.stdout), "nobody\n65534\nhello\n", "{}", show(&o));
    let group = if Command::new("getent")
        .args(["group", "nogroup"])
        .output()
        .unwrap()
        .status
        .success()
    {
        "nogroup"
    } else {
        "nobody"
    };
    let o = ws.sh(&["-q", "--user", &format!("nobody:{group}")], "id -g");
    assert_eq!(text(&o.stdout), "65534\n", "{}", show(&o));
    let o = ws.sh(&["-q", "--user", "no-such-user-veilfs"], "true");
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(text(&o.stderr).contains("no such user"), "{}", show(&o));
    let o = ws.run(&ws.dir, &["--", "true"]).output().unwrap();
    let err = text(&o.stderr);
    assert_eq!(err.lines().count(), 3, "{err}");
    assert!(err.contains("--user"), "{err}");
}

/// The command cannot plant code that the person's own git runs later, outside any
/// confinement (attacker finding: `core.fsmonitor` appended to `.git/config` ran as
/// root at the next `git status` and printed `.env`). Git's control files of the
/// workspace's repository are read-only under `run`; commits still work.
#[test]
fn the_command_cannot_plant_code_for_the_persons_git() {
    let ws = Ws::new();
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .args(["-c", "user.email=t@t", "-c", "user.name=t"])
            .args(args)
            .current_dir(&ws.dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {}", show(&o));
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::create_dir(ws.dir.join("docs")).unwrap();
    // A submodule's checkout: its `.git` file names its repository.
    std::fs::create_dir(ws.dir.join("lib")).unwrap();
    std::fs::write(ws.dir.join("lib/.git"), "gitdir: ../.git/modules/sub\n").unwrap();
    git(&["add", "a.txt", "src"]);
    git(&["commit", "-qm", "one"]);
    std::fs::create_dir_all(ws.dir.join(".git/modules/sub/hooks")).unwrap();
    std::fs::write(ws.dir.join(".git/modules/sub/config"), "[core]\n").unwrap();
    let config = std::fs::read(ws.dir.join(".git/config")).unwrap();
    let pwned = ws.outside("pwned");
    let cmd = format!("echo planted > {}", pwned.display());
    let script = format!(
        r#"
try() {{ if sh -c "$1" 2>/dev/null; then echo "ATTACK-WORKED: $2"; else echo "refused: $2"; fi; }}
try "printf '[core]\n\tfsmonitor = \"{cmd}\"\n' >> .git/config" "append to config"
try "printf '[core]\n\tpager = \"{cmd}\"\n' > .git/c2 && mv -f .git/c2 .git/config" "rename over config"
try "printf '[core]\n\thooksPath = /tmp\n' > .git/config.worktree" "config.worktree"
try "printf '#!/bin/sh\n{cmd}\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout" "new hook"
try "mv .git/hooks .git/hooks.old" "move hooks"
try "ln -s /tmp .git/hooks/pre-commit" "symlink hook"
try "printf '[core]\n\tfsmonitor = \"{cmd}\"\n' >> .git/modules/sub/config" "submodule config"
try "mkdir .git/modules/sub/hooks/x" "submodule hook dir"
try "mkdir -p .git/evil && printf '[core]\n\tfsmonitor = \"{cmd}\"\n' > .git/evil/config && echo evil > .git/commondir" "commondir"
try "mv .git .git.old" "move .git"
try "rmdir .git" "remove .git"
try "cd src && git init -q . && git config core.fsmonitor \"{cmd}\"" "git init in a directory that was there"
try "mkdir src/.git" "a .git directory in a directory that was there"
try "echo 'gitdir: /tmp/elsewhere' > src/.git" "a .git file in a directory that was there"
try "ln -s /tmp src/.git" "a .git link in a directory that was there"
try "mkdir -p newdir/x && git init -q newdir/x && mv newdir/x/.git src/.git" "a .git moved into a directory that was there"
try "echo 'gitdir: /tmp/elsewhere' > lib/.git" "rewrite a submodule's .git file"
try "rm lib/.git" "remove a submodule's .git file"
try "echo x > lib/other && python3 -c 'import ctypes,sys; l=ctypes.CDLL(None, use_errno=True); sys.exit(l.renameat2(-100, b\"lib/other\", -100, b\"lib/.git\", 2) != 0)'" "exchange a submodule's .git file"
try "mkdir -p build/objects build/refs && echo 'ref: refs/heads/main' > build/HEAD" "a bare-looking repository inside the workspace's repository"
try "mkdir evil && git init -q evil" "a repository inside the workspace's repository (a gitlink in the index would have the person's git status enter it)"
try "mkdir -p n2/objects n2/refs && echo 'ref: refs/heads/main' > n2/HEAD && rm -rf docs && mv n2 docs" "a bare-looking repository moved where a directory was"
try "mkdir -p n3/objects n3/refs && echo 'ref: refs/heads/main' > n3/HEAD && python3 -c 'import ctypes,sys; l=ctypes.CDLL(None, use_errno=True); sys.exit(l.renameat2(-100, b\"n3\", -100, b\"src\", 2) != 0)'" "a bare-looking repository exchanged with a directory that was there"
echo more >> a.txt
git -c user.email=t@t -c user.name=t commit -qam two && echo committed
"#
    );
    let o = ws.sh(&["-q"], &script);
    let out = text(&o.stdout);
    assert!(out.contains("refused: append to config"), "{}", show(&o));
    assert!(!out.contains("ATTACK-WORKED"), "{}", show(&o));
    assert!(out.contains("committed"), "{}", show(&o));
    assert!(
        out.contains("refused: git init in a directory that was there"),
        "{}",
        show(&o)
    );
    assert!(
        out.contains("refused: a repository inside the workspace's repository"),
        "{}",
        show(&o)
    );
    assert!(!ws.dir.join("evil/.git").exists(), "{}", show(&o));
    assert!(!ws.dir.join("build/HEAD").exists(), "{}", show(&o));
    assert_eq!(
        std::fs::read_to_string(ws.dir.join("lib/.git")).unwrap(),
        "gitdir: ../.git/modules/sub\n"
    );
    assert!(!ws.dir.join("docs/HEAD").exists(), "{}", show(&o));
    assert!(!ws.dir.join("src/HEAD").exists(), "{}", show(&o));
    assert!(!ws.dir.join("src/.git").exists(), "{}", show(&o));
    assert_eq!(std::fs::read(ws.dir.join(".git/config")).unwrap(), config);
    // The person's own git, outside: nothing planted runs.
    git(&["status", "--short"]);
    git(&["checkout", "-q", "-b", "other"]);
    let in_src = Command::new("git")
        .args(["status", "--short"])
        .current_dir(ws.dir.join("src"))
        .output()
        .unwrap();
    assert!(in_src.status.success(), "{}", show(&in_src));
    assert!(!pwned.exists(), "planted code ran: {}", show(&o));

    // A `.git` file (a linked worktree's): read-only, it names the repository.
    let wt = ws.outside("wt");
    git(&["worktree", "add", "-q", wt.to_str().unwrap()]);
    let gitfile = std::fs::read(wt.join(".git")).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["run", "-q", "--", "sh", "-c"])
        .arg("echo 'gitdir: /tmp' > .git && echo ATTACK-WORKED")
        .current_dir(&wt)
        .output()
        .unwrap();
    assert!(!text(&o.stdout).contains("ATTACK-WORKED"), "{}", show(&o));
    assert_eq!(std::fs::read(wt.join(".git")).unwrap(), gitfile);

    // Without a repository at start, `git init` inside works (the guard is off).
    std::fs::remove_dir_all(&wt).unwrap();
    let fresh = ws.outside("fresh");
    std::fs::create_dir(&fresh).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args([
            "run",
            "-q",
            "--",
            "sh",
            "-c",
            "git init -q . && git config user.name t && echo ok",
        ])
        .current_dir(&fresh)
        .output()
        .unwrap();
    assert!(text(&o.stdout).contains("ok"), "{}", show(&o));
}

/// The confined command cannot write into an editor's temporary file and have it
/// loaded once the person renames it over the policy (attacker finding: `sed -i`
/// writes `sedXXXX` beside the policy; the command held it open for writing and
/// rewrote it after the rename). A file opened for writing through the mount is
/// never loaded as policy.
#[test]
fn an_editors_temporary_file_written_through_the_mount_is_not_loaded() {
    use std::io::{BufRead, BufReader};
    let ws = Ws::new();
    std::fs::write(ws.dir.join(".veilfs.toml"), DENY_ENV).unwrap();
    let rt = ws.outside("rt");
    let attacker = r#"
import os, sys, time
while not os.path.exists("tmp.toml"): time.sleep(0.02)
fd = os.open("tmp.toml", os.O_WRONLY)
print("held", flush=True)
def policy():
    try:
        return open(".veilfs.toml").read()
    except OSError:
        return ""
while "a.txt" not in policy(): time.sleep(0.01)
try:
    os.ftruncate(fd, 0)
    os.write(fd, b'default = "allow"\n')
    print("wrote", flush=True)
except OSError as e:
    print("wrote", "(refused:", e, ")", flush=True)
os.close(fd)
while not os.path.exists("done"):
    try:
        print("LEAK", open(".env").read(), flush=True)
        break
    except OSError:
        time.sleep(0.02)
"#;
    let mut child = ws
        .run(&ws.dir, &["-q", "--", "python3", "-c", attacker])
        .env("VEILFS_RUNTIME_DIR", &rt)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut armed = Armed(Some(child.id()));
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // The person edits the policy as `sed -i` does: a new file beside it, renamed over.
    std::fs::write(ws.dir.join("tmp.toml"), DENY_ENV_AND_A).unwrap();
    let held = lines.next().map(|l| l.unwrap());
    if held.as_deref() != Some("held") {
        let o = finish(child, Duration::from_secs(20));
        panic!("{held:?}: {}", show(&o));
    }
    std::fs::rename(ws.dir.join("tmp.toml"), ws.dir.join(".veilfs.toml")).unwrap();
    let wrote = lines.next().map(|l| l.unwrap()).unwrap_or_default();
    assert!(wrote.starts_with("wrote"), "{wrote:?}");
    // An explicit reload says why the file is not taken.
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .arg("reload")
        .arg(&ws.dir)
        .env("VEILFS_RUNTIME_DIR", &rt)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        text(&o.stderr).contains("opened for writing through the mount"),
        "{}",
        show(&o)
    );
    std::fs::write(ws.dir.join("done"), "").unwrap();
    let o = finish(child, Duration::from_secs(20));
    armed.disarm();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(
        !rest.iter().any(|l| l.contains("LEAK")),
        "{rest:?} {}",
        show(&o)
    );
}

/// Names the command chooses reach the person's terminal escaped: a refusal notice
/// for a name holding an escape sequence or a newline prints `\x1b`, never the byte
/// (attacker finding: `ESC[6n` made the terminal answer into the invoking shell).
#[test]
fn names_in_notices_are_escaped() {
    let ws = Ws::new();
    let o = ws.sh(
        &[],
        "cat \"$(printf 'q\\033[6n\\nveilfs: reloaded.key')\" 2>/dev/null; echo done",
    );
    assert!(text(&o.stdout).contains("done"), "{}", show(&o));
    let err = text(&o.stderr);
    assert!(
        err.contains("q\\x1b[6n\\x0aveilfs: reloaded.key"),
        "{}",
        show(&o)
    );
    assert!(!o.stderr.contains(&0x1b), "{}", show(&o));
    assert!(
        !err.lines().any(|l| l.starts_with("veilfs: reloaded")),
        "{}",
        show(&o)
    );
}

/// The audit log is never written through a symbolic link, nor inside the workspace
/// (attacker finding: a link planted as `audit.log` had the daemon append to a
/// root-owned file of the attacker's choosing).
#[test]
fn the_audit_log_is_not_written_through_a_link_or_inside_the_workspace() {
    let ws = Ws::new();
    let victim = ws.outside("victim.sh");
    std::fs::write(&victim, "echo hi\n").unwrap();
    let inside = ws.dir.join("audit.log");
    std::os::unix::fs::symlink(&victim, &inside).unwrap();
    let link = ws.outside("audit-link.log");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    for log in [&inside, &link] {
        let o = ws.sh(
            &["-q", "--audit", log.to_str().unwrap()],
            "cat .env; echo ran",
        );
        assert_eq!(o.status.code(), Some(2), "{}: {}", log.display(), show(&o));
        assert!(!text(&o.stdout).contains("ran"), "{}", show(&o));
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "echo hi\n");
    // A plain file outside is fine.
    let log = ws.outside("audit.log");
    let o = ws.sh(
        &["-q", "--audit", log.to_str().unwrap()],
        "cat .env; echo ran",
    );
    assert!(text(&o.stdout).contains("ran"), "{}", show(&o));
    assert!(std::fs::read_to_string(&log).unwrap().contains(".env"));
}

/// A `.git` another user made in a shared parent does not move the workspace
/// (attacker finding: `git init --bare ../.git` from a `--user nobody` command made
/// the parent the next run's workspace, and anchored rules stopped matching).
#[test]
fn another_users_git_directory_is_passed_over() {
    let ws = Ws::new();
    std::fs::create_dir(ws.dir.join(".git")).unwrap();
    let planted = ws.tmp.path().join(".git");
    std::fs::create_dir(&planted).unwrap();
    std::os::unix::fs::chown(&planted, Some(65534), Some(65534)).unwrap();
    // Passed over, it would leave the workspace smaller than the project it
    // marks: refused, never the parent.
    let o = ws.run(&ws.dir, &["--", "true"]).output().unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(err.contains("owned by uid 65534"), "{}", show(&o));
    assert!(
        err.contains("name the workspace (--workspace"),
        "{}",
        show(&o)
    );
    let dir = ws.dir.display().to_string();
    let o = ws
        .run(&ws.dir, &["--workspace", &dir, "--", "true"])
        .output()
        .unwrap();
    assert!(
        text(&o.stderr).contains(&format!("in {} (given with --workspace)", ws.dir.display())),
        "{}",
        show(&o)
    );
}
