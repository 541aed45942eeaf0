//! `veilfs run` polices the home directory too: the credential stores of the
//! built-in default home policy are refused and unlisted, the files the shell and git
//! run from are read-only, tools keep their caches, veilfs's own configuration cannot
//! be changed or planted, and every layout of workspace and home works.

mod common;

use common::run::{show, text};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::{require_fuse, wait_until};

const SECRET: &str = "TOPSECRET-home";

/// Credential files of the default home list, relative to the home directory.
const CREDENTIALS: &[&str] = &[
    ".ssh/id_ed25519",
    ".ssh/id_ed25519.pub",
    ".ssh/config",
    ".aws/credentials",
    ".azure/accessTokens.json",
    ".config/gcloud/credentials.db",
    ".kube/config",
    ".docker/config.json",
    ".gnupg/private-keys-v1.d/key.key",
    ".password-store/site.gpg",
    ".local/share/keyrings/login.keyring",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials.toml",
    ".cargo/credentials",
    ".config/gh/hosts.yml",
    ".vault-token",
    ".terraform.d/credentials.tfrc.json",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".node_repl_history",
    ".mozilla/firefox/abc.default/logins.json",
    ".config/google-chrome/Default/Cookies",
    ".config/chromium/Default/Login Data",
    "other-project/.env",
    "other-project/deploy/prod.key",
];

/// Files that run as the user later: read-only.
const STARTUP: &[&str] = &[
    ".bashrc",
    ".profile",
    ".zshrc",
    ".gitconfig",
    ".config/git/config",
    ".config/systemd/user/x.service",
    ".config/autostart/x.desktop",
];

/// Tools' and agents' own directories: writable.
const TOOLS: &[&str] = &[
    ".cache/pip/x",
    ".cargo/registry/x",
    ".npm/_cacache/x",
    ".claude/settings.json",
    ".codex/auth.json",
    ".config/some-agent/state.json",
    ".local/bin/tool",
];

struct Home {
    tmp: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
}

impl Home {
    /// A home directory full of credentials, with the workspace `home/proj`.
    fn new() -> Home {
        Home::with_ws("home/proj")
    }

    /// Same, with the workspace at `ws` (relative to the temporary directory).
    fn with_ws(ws: &str) -> Home {
        require_fuse();
        let tmp = tempfile::Builder::new()
            .prefix("veilfs-home")
            .tempdir()
            .unwrap();
        let home = tmp.path().join("home");
        for rel in CREDENTIALS {
            write(&home.join(rel), &format!("{SECRET} {rel}\n"));
        }
        for rel in STARTUP.iter().chain(TOOLS) {
            write(&home.join(rel), "# original\n");
        }
        let ws = tmp.path().join(ws);
        std::fs::create_dir_all(&ws).unwrap();
        write(&ws.join(".env"), &format!("{SECRET} ws/.env\n"));
        write(&ws.join("a.txt"), "hello\n");
        Home { tmp, home, ws }
    }

    fn veilfs(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_veilfs"));
        c.arg("run")
            .args(args)
            .current_dir(&self.ws)
            .env("HOME", &self.home)
            .env_remove("XDG_CONFIG_HOME");
        c
    }

    /// `veilfs run [ARGS] -- sh -c SCRIPT` from the workspace.
    fn sh_with(&self, args: &[&str], script: &str) -> Output {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--", "sh", "-c", script]);
        let o = self.veilfs(&all).output().unwrap();
        for root in [&self.home, &self.ws] {
            assert!(
                !veilfs::session::mount::is_mount_point(&root.canonicalize().unwrap()),
                "{} is a mount point outside the run",
                root.display()
            );
        }
        o
    }

    fn sh(&self, script: &str) -> Output {
        self.sh_with(&["--quiet"], script)
    }

    /// `veilfs explain ARGS` from `cwd`, with this home directory.
    fn explain<S: AsRef<std::ffi::OsStr>>(&self, cwd: &Path, args: &[S]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_veilfs"))
            .arg("explain")
            .args(args)
            .current_dir(cwd)
            .env("HOME", &self.home)
            .env_remove("XDG_CONFIG_HOME")
            .output()
            .unwrap()
    }
}

fn write(p: &Path, body: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, body).unwrap();
}

/// A script that reads each of `rels` under `$HOME` and prints `OK rel` or
/// `REFUSED rel errno-text`, then lists every directory on the way.
fn probe_script(rels: &[&str]) -> String {
    let mut s = String::from("OLDPWD=$(pwd); cd \"$HOME\"\n");
    for rel in rels {
        s.push_str(&format!(
            "if out=$(cat '{rel}' 2>&1); then echo \"OK {rel}: $out\"; else echo \"REFUSED {rel}: $out\"; fi\n"
        ));
    }
    s.push_str("echo LISTING; find . 2>/dev/null; echo END; cd \"$OLDPWD\"\n");
    s
}

#[test]
fn every_default_credential_store_is_refused_and_unlisted() {
    let h = Home::new();
    let o = h.sh(&probe_script(CREDENTIALS));
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", show(&o));
    assert!(!out.contains(SECRET), "a secret leaked:\n{}", show(&o));
    for rel in CREDENTIALS {
        assert!(
            out.lines()
                .any(|l| l.starts_with(&format!("REFUSED {rel}:"))
                    && l.contains("Permission denied")),
            "{rel} not refused with EACCES:\n{}",
            show(&o)
        );
    }
    let listing = out.split("LISTING").nth(1).unwrap();
    for rel in CREDENTIALS {
        // The top hidden name of each: the directory for a store, else the file.
        let shown = format!("./{rel}");
        assert!(!listing.contains(&shown), "{rel} listed:\n{listing}");
    }
    for hidden in [
        "./.ssh",
        "./.aws",
        "./.gnupg",
        "./.mozilla",
        "./.config/gcloud",
    ] {
        assert!(
            !listing.lines().any(|l| l == hidden),
            "{hidden} listed:\n{listing}"
        );
    }
    // `grep -r` over the whole home directory finds nothing.
    let o = h.sh(&format!("grep -rs {SECRET} \"$HOME\"; echo done"));
    assert!(!text(&o.stdout).contains(SECRET), "{}", show(&o));
    // The backing files are untouched.
    for rel in CREDENTIALS {
        assert_eq!(
            std::fs::read_to_string(h.home.join(rel)).unwrap(),
            format!("{SECRET} {rel}\n")
        );
    }
}

#[test]
fn credential_stores_cannot_be_reached_by_other_spellings_or_replaced() {
    let h = Home::new();
    let o = h.sh(
        "cd \"$HOME\"/proj && cat ../.aws/credentials; cat $HOME/./.aws/../.aws/credentials; \
         ln -s .aws/credentials \"$HOME\"/link 2>&1; cat \"$HOME\"/link; \
         cp -r \"$HOME\"/.ssh /tmp/x 2>&1; mv \"$HOME\"/.aws \"$HOME\"/aws 2>&1; \
         rm -rf \"$HOME\"/.gnupg 2>&1; echo new > \"$HOME\"/.netrc; \
         python3 -c 'import os; os.open(os.path.expanduser(\"~/.kube/config\"), os.O_RDONLY)' 2>&1 | tail -1; \
         echo done",
    );
    let out = text(&o.stdout) + &text(&o.stderr);
    assert!(!out.contains(SECRET), "{}", show(&o));
    assert!(out.contains("done"), "{}", show(&o));
    assert!(out.contains("PermissionError"), "{}", show(&o));
    for rel in [
        ".aws/credentials",
        ".gnupg/private-keys-v1.d/key.key",
        ".netrc",
    ] {
        assert_eq!(
            std::fs::read_to_string(h.home.join(rel)).unwrap(),
            format!("{SECRET} {rel}\n"),
            "{rel} changed:\n{}",
            show(&o)
        );
    }
    assert!(!h.home.join("aws").exists());
}

#[test]
fn startup_files_are_read_only_and_tool_directories_writable() {
    let h = Home::new();
    let mut script = String::from("cd \"$HOME\"\n");
    for rel in STARTUP {
        script.push_str(&format!(
            "cat '{rel}' >/dev/null || echo UNREADABLE {rel}\n\
             if echo planted >> '{rel}' 2>/dev/null; then echo WROTE {rel}; fi\n\
             if mv '{rel}' '{rel}.moved' 2>/dev/null; then echo MOVED {rel}; fi\n"
        ));
    }
    for rel in TOOLS {
        script.push_str(&format!("echo changed > '{rel}' || echo FAILED {rel}\n"));
    }
    script.push_str(
        "mkdir -p .cache/new/deeper && echo x > .cache/new/deeper/f || echo FAILED new\n",
    );
    let o = h.sh(&script);
    let out = text(&o.stdout);
    for bad in ["UNREADABLE", "WROTE", "MOVED", "FAILED"] {
        assert!(!out.contains(bad), "{}", show(&o));
    }
    for rel in STARTUP {
        assert_eq!(
            std::fs::read_to_string(h.home.join(rel)).unwrap(),
            "# original\n",
            "{rel}"
        );
    }
    for rel in TOOLS {
        assert_eq!(
            std::fs::read_to_string(h.home.join(rel)).unwrap(),
            "changed\n",
            "{rel}: {}",
            show(&o)
        );
    }
    assert!(h.home.join(".cache/new/deeper/f").exists());
}

#[test]
fn veilfs_configuration_cannot_be_changed_or_planted() {
    // Absent: it cannot be made, nor can the way to it be redirected.
    let h = Home::new();
    std::fs::remove_dir_all(h.home.join(".config")).unwrap();
    let o = h.sh("cd \"$HOME\"; mkdir -p /tmp/elsewhere/veilfs; \
         ln -s /tmp/elsewhere .config 2>/dev/null && echo LINKED; \
         mkdir .config && echo DIR-OK; \
         mkdir -p .config/veilfs 2>/dev/null && echo MADE; \
         echo 'default = \"allow\"' > .config/veilfs/home.toml 2>/dev/null && echo PLANTED; \
         echo done");
    let out = text(&o.stdout);
    assert!(
        out.contains("done") && out.contains("DIR-OK"),
        "{}",
        show(&o)
    );
    for bad in ["LINKED", "MADE", "PLANTED"] {
        assert!(!out.contains(bad), "{bad}: {}", show(&o));
    }
    assert!(!h.home.join(".config/veilfs").exists());

    // Present: honoured, read-only by every route, and edits outside take effect.
    let cfg = h.home.join(".config/veilfs");
    std::fs::create_dir_all(&cfg).unwrap();
    write(
        &cfg.join("home.toml"),
        "extends = \"home-default\"\n[[rules]]\naction = \"deny\"\npaths = [\"/notes.txt\"]\n",
    );
    write(&h.home.join("notes.txt"), &format!("{SECRET} notes\n"));
    let o = h.sh("cd \"$HOME\"; cat notes.txt; cat .aws/credentials; \
         echo 'default = \"allow\"' > .config/veilfs/home.toml || echo REFUSED-WRITE; \
         mv .config/veilfs .config/v2 || echo REFUSED-MOVE; mv .config c2 || echo REFUSED-MOVE2; \
         rm .config/veilfs/home.toml || echo REFUSED-RM; \
         echo x > .config/veilfs/other.toml || echo REFUSED-NEW; echo done");
    let out = text(&o.stdout);
    assert!(!out.contains(SECRET), "{}", show(&o));
    for want in [
        "REFUSED-WRITE",
        "REFUSED-MOVE",
        "REFUSED-MOVE2",
        "REFUSED-RM",
        "REFUSED-NEW",
        "done",
    ] {
        assert!(out.contains(want), "{want}: {}", show(&o));
    }
    assert!(
        std::fs::read_to_string(cfg.join("home.toml"))
            .unwrap()
            .contains("notes.txt")
    );
    let o = h.sh_with(&[], "true");
    assert!(
        text(&o.stderr).contains(&cfg.join("home.toml").display().to_string()),
        "the start-up line names the home policy: {}",
        show(&o)
    );
}

#[test]
fn home_policy_edits_outside_take_effect_while_running() {
    let h = Home::new();
    let cfg = h.home.join(".config/veilfs");
    std::fs::create_dir_all(&cfg).unwrap();
    write(&cfg.join("home.toml"), "extends = \"home-default\"\n");
    write(&h.home.join("notes.txt"), "notes\n");
    let flag = h.tmp.path().join("denied");
    let ready = h.tmp.path().join("ready");
    // The flags are files beside the home, in the shared /tmp.
    let signals = h.tmp.path().display().to_string();
    let mut child = h
        .veilfs(&[
            "--quiet",
            "--writable",
            &signals,
            "--",
            "sh",
            "-c",
            &format!(
                "cat \"$HOME\"/notes.txt > {r}; i=0; while [ $i -lt 600 ]; do \
                 cat \"$HOME\"/notes.txt >/dev/null 2>&1 || {{ touch {f}; exit 0; }}; \
                 sleep 0.05; i=$((i+1)); done; exit 1",
                r = ready.display(),
                f = flag.display()
            ),
        ])
        .spawn()
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(20), || std::fs::read(&ready)
            .is_ok_and(|b| b == b"notes\n")),
        "the command never read notes.txt"
    );
    write(
        &cfg.join("home.toml"),
        "extends = \"home-default\"\n[[rules]]\naction = \"deny\"\npaths = [\"/notes.txt\"]\n",
    );
    let ok = wait_until(Duration::from_secs(20), || flag.exists());
    let status = child.wait().unwrap();
    assert!(
        ok && status.success(),
        "the edit was not picked up: {status}"
    );
}

/// In the layout `h` was made with: the workspace's `.env` and the home's
/// credentials refused, a tool's cache readable, a workspace edit landing; the
/// start-up line returned.
fn check_layout(h: &Home, extra: &str) -> String {
    let o = h.sh_with(
        &[],
        &format!(
            "{}cat .env; {extra}echo ws > a.txt",
            probe_script(&[".aws/credentials", ".cache/pip/x"])
        ),
    );
    let out = text(&o.stdout);
    assert!(!out.contains(SECRET), "{}", show(&o));
    assert!(out.contains("REFUSED .aws/credentials"), "{}", show(&o));
    assert!(out.contains("OK .cache/pip/x"), "{}", show(&o));
    assert_eq!(std::fs::read_to_string(h.ws.join("a.txt")).unwrap(), "ws\n");
    text(&o.stderr)
}

#[test]
fn workspace_outside_the_home_directory() {
    check_layout(&Home::with_ws("ws"), "");
}

#[test]
fn workspace_equal_to_the_home_directory() {
    let h = Home::with_ws("home");
    let start = check_layout(&h, "");
    assert!(
        start.contains("the workspace is home: stacked on built-in default home policy"),
        "{start}"
    );
    // The configuration directory is guarded in the one mount as well.
    let o = h.sh("mkdir -p \"$HOME\"/.config/veilfs || echo REFUSED");
    assert!(text(&o.stdout).contains("REFUSED"), "{}", show(&o));
}

#[test]
fn home_directory_inside_the_workspace() {
    // The workspace is the temporary directory, the home directory below it.
    check_layout(&Home::with_ws("."), "cat home/.aws/credentials; ");
}

#[test]
fn a_missing_home_directory_or_no_home_leaves_it_uncovered() {
    let h = Home::new();
    let mut c = h.veilfs(&["--", "sh", "-c", "cat a.txt"]);
    c.env("HOME", h.tmp.path().join("nowhere"));
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(text(&o.stdout), "hello\n");
    assert!(text(&o.stderr).contains("home not covered"), "{}", show(&o));

    let o = h.sh_with(&["--no-home"], "cat \"$HOME\"/.cache/pip/x");
    assert!(
        text(&o.stderr).contains("home not covered: --no-home"),
        "{}",
        show(&o)
    );
    assert_eq!(text(&o.stdout), "# original\n", "{}", show(&o));
}

#[test]
fn the_audit_log_names_the_root() {
    let h = Home::new();
    let log = h.tmp.path().join("audit.log");
    let o = h.sh_with(
        &["--quiet", "--audit", log.to_str().unwrap()],
        "cat \"$HOME\"/.aws/credentials; cat .env; true",
    );
    assert!(o.status.success(), "{}", show(&o));
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let has = |root: &str, path: &str| {
        lines
            .iter()
            .any(|v| v["root"] == root && v["path"] == path && v["result"] == "refused")
    };
    assert!(has("home", ".aws"), "{lines:#?}");
    assert!(has("workspace", ".env"), "{lines:#?}");
}

#[test]
fn explain_decides_home_paths_with_the_home_policy() {
    let h = Home::new();
    let mut args: Vec<PathBuf> = [
        ".aws/credentials",
        ".bashrc",
        ".cache/x",
        ".config/veilfs/home.toml",
        "src/repo/.git/config",
    ]
    .iter()
    .map(|r| h.home.join(r))
    .collect();
    args.push(".env".into());
    let o = h.explain(&h.ws, &args);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", show(&o));
    for want in [
        "deny      ~/.aws/credentials",
        "read-only ~/.bashrc",
        "allow     ~/.cache/x",
        "read-only ~/.config/veilfs/home.toml",
        "read-only ~/src/repo/.git/config",
        "deny      .env",
    ] {
        assert!(out.contains(want), "{want}:\n{out}");
    }
    // The printed default home policy is the one in force, and checks clean.
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["check", "--print-default-home"])
        .output()
        .unwrap();
    assert_eq!(text(&o.stdout), veilfs::policy::HOME_DEFAULT_POLICY);
    let p = h.tmp.path().join("home-default.toml");
    std::fs::write(&p, &o.stdout).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .arg("check")
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
}

#[test]
fn a_home_policy_named_outside_the_home_directory_is_read_only_inside() {
    let h = Home::new();
    let file = h.tmp.path().join("policies/home.toml");
    write(
        &file,
        "extends = \"home-default\"\n[[rules]]\naction = \"deny\"\npaths = [\"/.cache/\"]\n",
    );
    let f = file.display();
    let o = h.sh_with(
        &["--quiet", "--home-policy", &file.to_string_lossy()],
        &format!(
            "cat \"$HOME\"/.cache/pip/x || echo DENIED; \
             echo 'default = \"allow\"' > {f} || echo REFUSED-WRITE; \
             mv {f} {f}.old || echo REFUSED-MOVE; \
             echo x > {f}.new && mv {f}.new {f} || echo REFUSED-REPLACE; \
             chmod 666 {f} || echo REFUSED-CHMOD; echo done"
        ),
    );
    let out = text(&o.stdout);
    for want in [
        "DENIED",
        "REFUSED-WRITE",
        "REFUSED-MOVE",
        "REFUSED-REPLACE",
        "REFUSED-CHMOD",
        "done",
    ] {
        assert!(out.contains(want), "{want}: {}", show(&o));
    }
    assert!(std::fs::read_to_string(&file).unwrap().contains("/.cache/"));
}

#[test]
fn the_home_policy_files_env_table_is_honoured() {
    let h = Home::new();
    write(
        &h.home.join(".config/veilfs/home.toml"),
        "extends = \"home-default\"\n[env]\nkeep = [\"MY_TOKEN\"]\ndrop = [\"PLAIN\"]\n",
    );
    let o = h
        .veilfs(&[
            "--quiet",
            "--",
            "sh",
            "-c",
            "echo \"my=$MY_TOKEN other=$OTHER_TOKEN plain=$PLAIN fine=$FINE\"",
        ])
        .env("MY_TOKEN", "kept")
        .env("OTHER_TOKEN", SECRET)
        .env("PLAIN", SECRET)
        .env("FINE", "yes")
        .output()
        .unwrap();
    assert_eq!(
        text(&o.stdout),
        "my=kept other= plain= fine=yes\n",
        "{}",
        show(&o)
    );
}

fn git(dir: &Path, args: &[&str]) {
    let o = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}: {}", show(&o));
}

#[test]
fn other_repositories_in_the_home_directory_are_guarded_but_new_ones_are_the_commands() {
    for ws in ["home/proj", "home"] {
        let h = Home::with_ws(ws);
        let other = h.home.join("src/other");
        std::fs::create_dir_all(&other).unwrap();
        git(&other, &["init", "-q"]);
        std::fs::write(other.join("f"), "x\n").unwrap();
        git(&other, &["add", "f"]);
        git(
            &other,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "one",
            ],
        );
        std::fs::create_dir_all(h.home.join("notes")).unwrap();
        let config = std::fs::read(other.join(".git/config")).unwrap();
        let o = h.sh(
            "cd \"$HOME\"; \
             git -C src/other status --short >/dev/null && echo STATUS-OK; \
             git init -q fresh && git -C fresh config user.name me && echo INIT-OK; \
             git clone -q src/other cloned && git -C cloned config user.name me && echo CLONE-OK; \
             git -C src/other config core.fsmonitor 'touch /tmp/pwned #' 2>/dev/null && echo CONFIGURED; \
             echo evil >> src/other/.git/config 2>/dev/null && echo APPENDED; \
             echo 'exit 0' > src/other/.git/hooks/post-checkout 2>/dev/null && echo HOOKED; \
             mv src/other/.git src/other/git-away 2>/dev/null && echo MOVED; \
             rm -rf src/other/.git 2>/dev/null; [ -d src/other/.git/hooks ] || echo REMOVED; \
             mkdir src/other/.git 2>/dev/null && echo REPLACED; \
             echo 'gitdir: /tmp/evil' > notes/.git 2>/dev/null && echo POINTED; \
             ln -s /tmp notes/.git 2>/dev/null && echo LINKED; \
             git init -q . 2>/dev/null && echo INIT-HOME; \
             git init -q notes 2>/dev/null && echo INIT-NOTES; \
             mv src/other src/other-old 2>/dev/null && echo MOVED-REPO; \
             mv src src-old 2>/dev/null && echo MOVED-ABOVE; \
             git clone -q src/other tmpx && \
               { mv tmpx src/other/tmpx 2>/dev/null && echo MOVED-IN; }; \
             echo done",
        );
        let out = text(&o.stdout);
        for bad in [
            "CONFIGURED",
            "APPENDED",
            "HOOKED",
            "MOVED",
            "REMOVED",
            "REPLACED",
            "POINTED",
            "LINKED",
            "INIT-HOME",
            "INIT-NOTES",
            "MOVED-REPO",
            "MOVED-ABOVE",
            "MOVED-IN",
        ] {
            assert!(!out.contains(bad), "{ws}: {bad}: {}", show(&o));
        }
        for good in ["STATUS-OK", "INIT-OK", "CLONE-OK", "done"] {
            assert!(out.contains(good), "{ws}: {good}: {}", show(&o));
        }
        assert_eq!(std::fs::read(other.join(".git/config")).unwrap(), config);
        assert!(!other.join(".git/hooks/post-checkout").exists());
        assert!(!h.home.join("notes/.git").exists());
        assert!(!h.home.join(".git").exists(), "{ws}: {}", show(&o));
        assert!(!h.home.join("src-old").exists(), "{ws}: {}", show(&o));
        assert!(h.home.join("cloned/.git/config").exists());
    }
}

/// Git runs nothing the command wrote in the person's other repositories either
/// (issue 28): a rebase left stopped at `break` with an `exec` line queued in
/// `~/src/other/.git`, planted by hand, by a rename or by `git rebase -i`, runs
/// nothing when the person continues it outside; everyday git there still works,
/// and in a clone of its own the command may rebase.
#[test]
fn no_rebase_is_planted_in_another_repository_of_the_home_directory() {
    let h = Home::new();
    let other = h.home.join("src/other");
    std::fs::create_dir_all(&other).unwrap();
    git(&other, &["init", "-q", "-b", "main"]);
    for n in ["1", "2"] {
        std::fs::write(other.join("f"), n).unwrap();
        git(&other, &["add", "f"]);
        git(
            &other,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                n,
            ],
        );
    }
    let marker = h.tmp.path().join("pwned");
    let editor = h.tmp.path().join("sequence-editor");
    write(
        &editor,
        &format!(
            "#!/bin/sh\nprintf 'break\\nexec touch {}\\npick %s x\\n' \"$(git rev-parse HEAD)\" > \"$1\"\n",
            marker.display()
        ),
    );
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let o = h.sh(&format!(
        "export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t; \
         cd \"$HOME\"/src/other; \
         plant() {{ mkdir -p \"$1\" && git symbolic-ref HEAD > \"$1/head-name\" && \
           git rev-parse HEAD~1 > \"$1/onto\" && git rev-parse HEAD > \"$1/orig-head\" && \
           : > \"$1/interactive\" && echo break > \"$1/done\" && \
           printf 'exec touch {m}\\n' > \"$1/git-rebase-todo\"; }}; \
         plant .git/rebase-merge 2>/dev/null && echo PLANTED; \
         plant \"$HOME\"/staged && mv \"$HOME\"/staged .git/rebase-merge 2>/dev/null && echo MOVED-IN; \
         GIT_SEQUENCE_EDITOR='{e}' git rebase -q -i HEAD~1 2>/dev/null && echo REBASED; \
         echo x >> f && git commit -qam three && git gc -q && echo EVERYDAY-OK; \
         cd \"$HOME\" && git clone -q src/other own && cd own && \
           GIT_SEQUENCE_EDITOR=true git rebase -q -i HEAD~1 && echo OWN-REBASE-OK; \
         echo done",
        m = marker.display(),
        e = editor.display(),
    ));
    let out = text(&o.stdout);
    for bad in ["PLANTED", "MOVED-IN", "REBASED"] {
        assert!(!out.contains(bad), "{bad}: {}", show(&o));
    }
    for good in ["EVERYDAY-OK", "OWN-REBASE-OK", "done"] {
        assert!(out.contains(good), "{good}: {}", show(&o));
    }
    // The person, outside: `git status`, then `git rebase --continue`.
    for args in [&["status"][..], &["rebase", "--continue"]] {
        let _ = Command::new("git")
            .arg("-C")
            .arg(&other)
            .args(args)
            .env("GIT_EDITOR", "true")
            .output()
            .unwrap();
    }
    assert!(
        !marker.exists(),
        "the planted exec ran outside: {}",
        show(&o)
    );
    assert!(!other.join(".git/rebase-merge").exists(), "{}", show(&o));
}

/// The suite's test user and its home directory from the password database.
fn test_user() -> (&'static str, PathBuf) {
    let user = common::run::test_user();
    let o = Command::new("getent")
        .args(["passwd", user])
        .output()
        .unwrap();
    let line = text(&o.stdout);
    let home = line
        .trim()
        .split(':')
        .nth(5)
        .expect("home field")
        .to_string();
    (user, PathBuf::from(home))
}

use common::run::chown_r;

#[test]
fn a_non_root_user_gets_the_home_policy_through_a_user_namespace() {
    let h = Home::new();
    let (user, _) = test_user();
    common::run::fuse_for_everyone();
    chown_r(user, h.tmp.path());
    let o = Command::new("setpriv")
        .args(["--reuid", user, "--regid", user, "--init-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_veilfs"))
        .args(["run", "--", "sh", "-c"])
        .arg(format!(
            "{}echo new > \"$HOME\"/.cache/pip/x",
            probe_script(&[".aws/credentials", ".ssh/id_ed25519", ".cache/pip/x"])
        ))
        .current_dir(&h.ws)
        .env("HOME", &h.home)
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", show(&o));
    assert!(!out.contains(SECRET), "{}", show(&o));
    assert!(out.contains("REFUSED .aws/credentials"), "{}", show(&o));
    assert!(out.contains("REFUSED .ssh/id_ed25519"), "{}", show(&o));
    assert!(out.contains("OK .cache/pip/x"), "{}", show(&o));
    assert!(
        text(&o.stderr).contains(&format!("home {}", h.home.display())),
        "{}",
        show(&o)
    );
    assert_eq!(
        std::fs::read_to_string(h.home.join(".cache/pip/x")).unwrap(),
        "new\n"
    );
}

/// Removes a directory made for the test when dropped.
struct Made(PathBuf);

impl Drop for Made {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn with_user_the_home_is_that_users_from_the_password_database() {
    let h = Home::new();
    let (user, home) = test_user();
    assert!(
        !home.exists(),
        "{} exists: this test makes it and removes it",
        home.display()
    );
    let _made = Made(home.clone());
    for rel in [".aws/credentials", ".netrc"] {
        write(&home.join(rel), &format!("{SECRET} {rel}\n"));
    }
    write(&home.join(".cache/x"), "cache\n");
    chown_r(user, &home);
    std::fs::set_permissions(
        h.tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    chown_r(user, &h.ws);
    // The caller's HOME (the credentials-filled one) is not the command's.
    let o = h.sh_with(
        &["--user", user],
        "echo \"HOME=$HOME\"; cat \"$HOME\"/.aws/credentials; cat \"$HOME\"/.netrc; \
         cat \"$HOME\"/.cache/x; echo more >> \"$HOME\"/.cache/x; echo done",
    );
    let out = text(&o.stdout);
    assert!(!out.contains(SECRET), "{}", show(&o));
    assert!(
        out.contains(&format!("HOME={}", home.display())),
        "{}",
        show(&o)
    );
    assert!(
        out.contains("cache\n") && out.contains("done"),
        "{}",
        show(&o)
    );
    assert!(
        text(&o.stderr).contains(&format!("home {}", home.display())),
        "{}",
        show(&o)
    );
    assert_eq!(
        std::fs::read_to_string(home.join(".cache/x")).unwrap(),
        "cache\nmore\n"
    );
}

#[test]
fn a_configuration_directory_in_a_scratch_place_is_not_used() {
    // Whoever can write `/tmp` could move it aside and plant another.
    let h = Home::new();
    let xdg = h.tmp.path().join("xdg");
    write(
        &xdg.join("veilfs/home.toml"),
        "default = \"allow\"\n[env]\nkeep = [\"*\"]\n",
    );
    let o = h
        .veilfs(&[
            "--",
            "sh",
            "-c",
            "cat \"$HOME\"/.aws/credentials; echo \"t=$GITHUB_TOKEN\"",
        ])
        .env("XDG_CONFIG_HOME", &xdg)
        .env("GITHUB_TOKEN", SECRET)
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert!(!out.contains(SECRET), "{}", show(&o));
    assert!(out.contains("t=\n"), "{}", show(&o));
    assert!(
        text(&o.stderr).contains("built-in default home policy"),
        "{}",
        show(&o)
    );
}

/// A configuration directory outside the home directory and the scratch places
/// (here in a `--writable` directory) that does not exist yet is not left for the
/// command to make, and one that exists is read-only.
#[test]
fn a_configuration_directory_outside_the_home_cannot_be_planted_either() {
    let h = Home::new();
    let base = PathBuf::from(format!("/var/cache/veilfs-test-xdg-{}", std::process::id()));
    let _made = Made(base.clone());
    std::fs::create_dir_all(&base).unwrap();
    let writable = base.to_string_lossy().into_owned();
    let xdg = base.join("xdg");
    let o = h
        .veilfs(&[
            "--quiet",
            "--writable",
            &writable,
            "--",
            "sh",
            "-c",
            "mkdir -p \"$XDG_CONFIG_HOME\"/veilfs 2>/dev/null; \
             echo '[env]' > \"$XDG_CONFIG_HOME\"/veilfs/home.toml 2>/dev/null && echo PLANTED; \
             rmdir \"$XDG_CONFIG_HOME\"/veilfs 2>/dev/null && echo REMOVED; echo done",
        ])
        .env("XDG_CONFIG_HOME", &xdg)
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert!(out.contains("done"), "{}", show(&o));
    for bad in ["PLANTED", "REMOVED"] {
        assert!(!out.contains(bad), "{bad}: {}", show(&o));
    }
    assert!(!xdg.join("veilfs/home.toml").exists());
    // Present, with a policy: honoured and read-only.
    write(
        &xdg.join("veilfs/home.toml"),
        "extends = \"home-default\"\n[env]\nkeep = [\"MY_TOKEN\"]\n",
    );
    let o = h
        .veilfs(&[
            "--quiet",
            "--writable",
            &writable,
            "--",
            "sh",
            "-c",
            "echo \"my=$MY_TOKEN\"; echo x >> \"$XDG_CONFIG_HOME\"/veilfs/home.toml || echo REFUSED",
        ])
        .env("XDG_CONFIG_HOME", &xdg)
        .env("MY_TOKEN", "kept")
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert!(
        out.contains("my=kept") && out.contains("REFUSED"),
        "{}",
        show(&o)
    );
}

#[test]
fn the_targets_of_linked_credential_stores_are_hidden_too() {
    // As dotfile managers lay them out: the stores live in a repository, linked.
    let h = Home::new();
    let dots = h.home.join("dotfiles");
    std::fs::create_dir_all(&dots).unwrap();
    std::fs::rename(h.home.join(".aws"), dots.join("aws")).unwrap();
    std::os::unix::fs::symlink("dotfiles/aws", h.home.join(".aws")).unwrap();
    std::fs::rename(h.home.join(".netrc"), dots.join("netrc")).unwrap();
    std::os::unix::fs::symlink("dotfiles/netrc", h.home.join(".netrc")).unwrap();
    std::fs::rename(h.home.join(".config"), dots.join("config")).unwrap();
    std::os::unix::fs::symlink("dotfiles/config", h.home.join(".config")).unwrap();
    std::fs::rename(h.home.join(".bashrc"), dots.join("bashrc")).unwrap();
    std::os::unix::fs::symlink("dotfiles/bashrc", h.home.join(".bashrc")).unwrap();
    std::fs::rename(h.home.join(".gitconfig"), dots.join("gitconfig")).unwrap();
    std::os::unix::fs::symlink(dots.join("gitconfig"), h.home.join(".gitconfig")).unwrap();
    std::fs::remove_dir_all(dots.join("config/systemd")).unwrap();
    write(&dots.join("README"), "dotfiles\n");
    let o = h.sh(
        "cd \"$HOME\"; cat dotfiles/aws/credentials; cat dotfiles/netrc; \
         cat dotfiles/config/gh/hosts.yml; cat .config/gh/hosts.yml; cat dotfiles/README; \
         echo LIST; ls -A dotfiles; echo END",
    );
    let out = text(&o.stdout);
    assert!(!out.contains(SECRET), "{}", show(&o));
    assert!(out.contains("dotfiles\n"), "{}", show(&o));
    let listing = out.split("LIST").nth(1).unwrap();
    assert!(
        !listing.contains("aws") && !listing.contains("netrc"),
        "{}",
        show(&o)
    );
    assert!(listing.contains("config"), "{}", show(&o));
    // Read-only files reached through links: neither name writes them, and no
    // unit can be made where the link leads.
    let o = h.sh(
        "cd \"$HOME\"; for f in .bashrc dotfiles/bashrc .gitconfig dotfiles/gitconfig \
           .config/git/config dotfiles/config/git/config; do \
           echo planted >> $f 2>/dev/null && echo WROTE $f; done; \
         mkdir -p dotfiles/config/systemd/user 2>/dev/null && echo MADE-UNITS; \
         mkdir -p .config/systemd/user 2>/dev/null && echo MADE-UNITS2; echo done",
    );
    let out = text(&o.stdout);
    assert!(out.contains("done"), "{}", show(&o));
    assert!(
        !out.contains("WROTE") && !out.contains("MADE-UNITS"),
        "{}",
        show(&o)
    );
    for f in ["bashrc", "gitconfig", "config/git/config"] {
        assert_eq!(
            std::fs::read_to_string(dots.join(f)).unwrap(),
            "# original\n",
            "{f}"
        );
    }
    assert!(!dots.join("config/systemd").exists());
    // explain agrees.
    let o = h.explain(&h.ws, &[dots.join("aws/credentials")]);
    let out = text(&o.stdout);
    assert!(
        out.contains("deny      ~/dotfiles/aws/credentials") && out.contains("symbolic link"),
        "{}",
        show(&o)
    );
}

/// Git takes any directory holding `HEAD`, `objects/` and `refs/` for a repository
/// and obeys its `config` (`core.worktree` reaches the directories below): none can
/// be made over a directory that was there, in the home directory or the
/// workspace, and a bare repository that was there is guarded like a `.git`.
#[test]
fn no_bare_repository_is_planted_and_found_ones_are_guarded() {
    let h = Home::new();
    std::fs::create_dir_all(h.ws.join("src/lib")).unwrap();
    git(&h.ws, &["init", "-q"]);
    let bare = h.home.join("repos/x.git");
    std::fs::create_dir_all(&bare).unwrap();
    git(&bare, &["init", "-q", "--bare"]);
    let nested = h.ws.join("vendor/lib");
    std::fs::create_dir_all(&nested).unwrap();
    git(&nested, &["init", "-q"]);
    let before = [
        std::fs::read(bare.join("config")).unwrap(),
        std::fs::read(nested.join(".git/config")).unwrap(),
    ];
    let o = h.sh(
        "plant() { (cd \"$1\" && mkdir -p objects refs && \
           { echo 'ref: refs/heads/main' > HEAD 2>/dev/null && echo \"HEAD-IN $1\"; }; \
           ln -s refs/heads/main HEAD 2>/dev/null && echo \"HEAD-LINK $1\"; \
           mkdir HEAD 2>/dev/null && echo \"HEAD-DIR $1\"; \
           echo x > /tmp/veilfs-head-$$ && mv /tmp/veilfs-head-$$ HEAD 2>/dev/null && echo \"HEAD-MV $1\"; \
           true); }; \
         plant \"$HOME\"; plant \"$HOME\"/proj/src; plant \"$HOME\"/notes-$$; \
         mkdir -p \"$HOME\"/fresh && plant \"$HOME\"/fresh >/dev/null; \
         echo '[core]' >> \"$HOME\"/repos/x.git/config 2>/dev/null && echo BARE-CONFIG; \
         echo x > \"$HOME\"/repos/x.git/hooks/post-update 2>/dev/null && echo BARE-HOOK; \
         echo '[core]' >> vendor/lib/.git/config 2>/dev/null && echo NESTED-CONFIG; \
         echo x > vendor/lib/.git/hooks/pre-commit 2>/dev/null && echo NESTED-HOOK; \
         git init -q --bare \"$HOME\"/new.git && git -C \"$HOME\"/new.git config a.b c && echo OWN-BARE; \
         echo done",
    );
    let out = text(&o.stdout);
    assert!(
        out.contains("done") && out.contains("OWN-BARE"),
        "{}",
        show(&o)
    );
    for bad in [
        "HEAD-IN",
        "HEAD-LINK",
        "HEAD-DIR",
        "HEAD-MV",
        "BARE-CONFIG",
        "BARE-HOOK",
        "NESTED-CONFIG",
        "NESTED-HOOK",
    ] {
        assert!(!out.contains(bad), "{bad}: {}", show(&o));
    }
    assert!(!h.home.join("HEAD").exists() && !h.ws.join("src/HEAD").exists());
    assert_eq!(std::fs::read(bare.join("config")).unwrap(), before[0]);
    assert_eq!(
        std::fs::read(nested.join(".git/config")).unwrap(),
        before[1]
    );
}

/// A workspace inside the home directory (`~/.config` kept as a dotfiles
/// repository, say) keeps the home policy: what it hides stays hidden, what it makes
/// read-only stays so, and veilfs's configuration cannot be planted there.
#[test]
fn a_workspace_inside_the_home_directory_keeps_the_home_policy() {
    let h = Home::new();
    let cfg = h.home.join(".config");
    let o = h
        .veilfs(&[
            "--quiet",
            "--workspace",
            &cfg.to_string_lossy(),
            "--",
            "sh",
            "-c",
            "cd \"$HOME\"/.config; cat gh/hosts.yml; \
             echo evil >> git/config 2>/dev/null && echo WROTE-GIT; \
             mkdir -p systemd/user 2>/dev/null; echo x > systemd/user/evil.service 2>/dev/null && echo UNIT; \
             mkdir -p veilfs 2>/dev/null && echo MADE-VEILFS; \
             echo 'default = \"allow\"' > veilfs/home.toml 2>/dev/null && echo PLANTED; \
             echo LIST; ls -A gh; echo done",
        ])
        .current_dir(&cfg)
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert!(out.contains("done"), "{}", show(&o));
    assert!(!out.contains(SECRET), "{}", show(&o));
    for bad in ["WROTE-GIT", "UNIT", "MADE-VEILFS", "PLANTED"] {
        assert!(!out.contains(bad), "{bad}: {}", show(&o));
    }
    assert!(
        !out.split("LIST").nth(1).unwrap().contains("hosts.yml"),
        "{}",
        show(&o)
    );
    assert_eq!(
        std::fs::read_to_string(cfg.join("git/config")).unwrap(),
        "# original\n"
    );
    assert!(!cfg.join("veilfs").exists());
    // explain agrees, from inside that workspace.
    let o = h.explain(&cfg, &["gh/hosts.yml", "git/config"]);
    let out = text(&o.stdout);
    assert!(
        out.contains("deny      gh/hosts.yml") && out.contains("read-only git/config"),
        "{}",
        show(&o)
    );
}

/// The directories on the way to a path the home policy names cannot be replaced
/// by a link leading elsewhere (where a read-only file would be written, or a
/// credential the person makes later would land).
#[test]
fn the_way_to_a_named_path_cannot_be_replaced_by_a_link() {
    let h = Home::new();
    std::fs::create_dir_all(h.home.join(".cargo")).unwrap();
    std::fs::create_dir_all(h.home.join(".gradle")).unwrap();
    std::fs::remove_dir_all(h.home.join(".config/gh")).unwrap();
    let o = h.sh("cd \"$HOME\"; mkdir -p /tmp/veilfs-way-$$; \
         mv .cargo .cargo.old 2>/dev/null && echo MOVED-CARGO; \
         ln -s /tmp/veilfs-way-$$ .huggingface 2>/dev/null && echo LINKED-HF; \
         ln -s /tmp/veilfs-way-$$ .config/gh 2>/dev/null && echo LINKED-GH; \
         rmdir .gradle; ln -s /tmp/veilfs-way-$$ .gradle 2>/dev/null && echo LINKED-GRADLE; \
         mkdir tmpd && mv tmpd .gradle 2>/dev/null && echo MOVED-ONTO; \
         mkdir .gradle && echo DIR-OK; \
         rm -rf /tmp/veilfs-way-$$; echo done");
    let out = text(&o.stdout);
    assert!(
        out.contains("done") && out.contains("DIR-OK"),
        "{}",
        show(&o)
    );
    for bad in [
        "MOVED-CARGO",
        "LINKED-HF",
        "LINKED-GH",
        "LINKED-GRADLE",
        "MOVED-ONTO",
    ] {
        assert!(!out.contains(bad), "{bad}: {}", show(&o));
    }
    assert!(h.home.join(".cargo").is_dir());
    assert!(!h.home.join(".huggingface").exists());
}

/// The workspace mount inside the home mount stays, whatever is renamed or
/// reloaded: the kernel would detach it if the home mount had an entry on the way
/// to it invalidated, and its paths would then be served under the home policy
/// alone.
#[test]
fn the_workspace_mount_inside_the_home_stays_put() {
    let h = Home::with_ws("home/code/p2");
    write(
        &h.ws.join(".veilfs.toml"),
        "extends = \"default\"\n[[rules]]\naction = \"deny\"\npaths = [\"private/\"]\n",
    );
    write(&h.ws.join("private/s.txt"), &format!("{SECRET} private\n"));
    let cfg = h.home.join(".config/veilfs");
    std::fs::create_dir_all(&cfg).unwrap();
    write(&cfg.join("home.toml"), "extends = \"home-default\"\n");
    let go = h.tmp.path().join("go");
    let ready = h.tmp.path().join("ready");
    // The flags are files beside the home, in the shared /tmp.
    let signals = h.tmp.path().display().to_string();
    let script = format!(
        "cd /; mv ~/code ~/code2 2>/dev/null && echo MOVED; \
         mkdir ~/zz && python3 -c 'import ctypes,os; l=ctypes.CDLL(None,use_errno=True); \
           r=l.renameat2(-100,os.path.expanduser(\"~/code\").encode(),-100,os.path.expanduser(\"~/zz\").encode(),2); \
           print(\"EXCHANGED\" if r==0 else \"refused\")'; \
         touch {ready}; i=0; while [ ! -e {go} ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; \
         sleep 1; grep -c ' {ws} ' /proc/self/mountinfo; cat {ws}/private/s.txt; \
         ls -A {ws}; echo done",
        ready = ready.display(),
        go = go.display(),
        ws = h.ws.display(),
    );
    let child = h
        .veilfs(&["--quiet", "--writable", &signals, "--", "sh", "-c", &script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(20), || ready.exists()),
        "the command never got ready"
    );
    // From outside: a home policy reload (every kernel cache of the home mount is
    // dropped) and changes to the directories on the way.
    write(
        &cfg.join("home.toml"),
        "extends = \"home-default\"\n[[rules]]\naction = \"deny\"\npaths = [\"/nothing\"]\n",
    );
    let code = h.home.join("code");
    std::fs::set_permissions(&code, std::os::unix::fs::PermissionsExt::from_mode(0o750)).unwrap();
    std::fs::write(code.join("beside"), "x").unwrap();
    std::fs::write(&go, "").unwrap();
    let o = child.wait_with_output().unwrap();
    let out = text(&o.stdout);
    assert!(out.contains("done"), "{}", show(&o));
    assert!(!out.contains(SECRET), "{}", show(&o));
    assert!(
        !out.contains("MOVED") && !out.contains("EXCHANGED"),
        "{}",
        show(&o)
    );
    assert!(!out.contains("private"), "private/ listed: {}", show(&o));
    assert!(
        out.lines()
            .any(|l| l.trim().parse::<u32>().is_ok_and(|n| n >= 1)),
        "the workspace mount is gone: {}",
        show(&o)
    );
}

/// A home policy that imports ignore files: those in the home directory are read
/// (they were silently not), under `run` and by `explain`, and cannot be changed.
#[test]
fn a_home_policy_importing_ignore_files_reads_them_in_the_home_directory() {
    let h = Home::new();
    let file = h.tmp.path().join("policies/home.toml");
    write(
        &file,
        "extends = \"home-default\"\n[[rules]]\naction = \"deny\"\nimport = \".cursorignore\"\n",
    );
    write(&h.home.join(".cursorignore"), "diary.txt\n");
    write(
        &h.home.join("notes/diary.txt"),
        &format!("{SECRET} diary\n"),
    );
    write(&h.home.join("notes/todo.txt"), "todo\n");
    let f = file.to_string_lossy().into_owned();
    let o = h.sh_with(
        &["--quiet", "--home-policy", &f],
        "cat \"$HOME\"/notes/diary.txt || echo DENIED; cat \"$HOME\"/notes/todo.txt; \
         echo '!diary.txt' >> \"$HOME\"/.cursorignore || echo REFUSED-WRITE",
    );
    let out = text(&o.stdout);
    assert!(
        out.contains("DENIED") && out.contains("todo"),
        "{}",
        show(&o)
    );
    assert!(out.contains("REFUSED-WRITE"), "{}", show(&o));
    assert!(!out.contains(SECRET), "{}", show(&o));
    assert_eq!(
        std::fs::read_to_string(h.home.join(".cursorignore")).unwrap(),
        "diary.txt\n"
    );
    let o = h.explain(
        &h.ws,
        &[
            "--home-policy",
            &f,
            &format!("{}/notes/diary.txt", h.home.display()),
        ],
    );
    let out = text(&o.stdout);
    assert!(
        out.contains("deny") && out.contains(".cursorignore:1"),
        "{}",
        show(&o)
    );
}

/// `--permissive` tunes what the workspace mount decides; the home mount beside it
/// enforces the home policy in full, so a tuning run leaves no code behind in the
/// files that run later as the user, and reads no credential of the home directory.
#[test]
fn a_permissive_run_waives_the_workspace_and_enforces_the_home_policy() {
    let h = Home::new();
    // Denied by the workspace's policy alone: waived. `.env` is denied by the home
    // policy too (it extends the default): enforced.
    write(
        &h.ws.join(".veilfs.toml"),
        "extends = \"default\"\n[[rules]]\naction = \"deny\"\npaths = [\"a.txt\"]\n",
    );
    let log = h.tmp.path().join("audit.log");
    let log_arg = log.to_str().unwrap();
    let mut script = String::from("cat a.txt; cat .env\n");
    for rel in STARTUP {
        script.push_str(&format!(
            "if echo PLANTED >> \"$HOME/{rel}\"; then echo \"CHANGED {rel}\"; fi\n"
        ));
    }
    script.push_str(&probe_script(&[".ssh/id_ed25519", ".aws/credentials"]));
    let o = h.sh_with(&["--quiet", "--permissive", "--audit", log_arg], &script);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", show(&o));
    assert!(out.starts_with("hello\n"), "{}", show(&o));
    assert!(!out.contains(&format!("{SECRET} ws/.env")), "{}", show(&o));
    // The home directory is not.
    assert!(!out.contains("CHANGED"), "{}", show(&o));
    for rel in STARTUP {
        assert_eq!(
            std::fs::read_to_string(h.home.join(rel)).unwrap(),
            "# original\n",
            "{rel} changed"
        );
    }
    assert!(!out.contains(&format!("{SECRET} .ssh")), "{}", show(&o));
    assert!(out.contains("REFUSED .ssh/id_ed25519:"), "{}", show(&o));
    let events: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        events.iter().any(|e| e["root"] == "workspace"
            && e["path"] == "a.txt"
            && e["result"] == "would-refuse"),
        "{events:#?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["root"] == "workspace" && e["path"] == ".env" && e["result"] == "refused"),
        "{events:#?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["root"] == "home" && e["path"] == ".bashrc" && e["result"] == "refused"),
        "{events:#?}"
    );
    assert!(
        events
            .iter()
            .all(|e| e["root"] != "home" || e["result"] == "refused"),
        "{events:#?}"
    );
    // The start-up line says so.
    let o = h.sh_with(&["--permissive", "--audit", log_arg], "true");
    assert!(
        text(&o.stderr).contains(&format!(
            "; PERMISSIVE: nothing in the workspace is refused, only logged to {log_arg}\n"
        )),
        "{}",
        show(&o)
    );
    // A workspace that is the home directory: the home policy would be waived too.
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["run", "--permissive", "--audit", log_arg, "--workspace"])
        .arg(&h.home)
        .args(["--", "true"])
        .current_dir(&h.home)
        .env("HOME", &h.home)
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        text(&o.stderr).contains("whose policy is always enforced"),
        "{}",
        show(&o)
    );
}

/// A workspace inside a part of the home directory the home policy guards (a
/// dotfiles repository in `~/.config`): a permissive run there still reads none
/// of its credentials and changes none of what runs later.
#[test]
fn a_permissive_run_in_a_guarded_part_of_the_home_directory_keeps_the_home_policy() {
    let h = Home::with_ws("home/.config");
    write(&h.ws.join("gh/hosts.yml"), &format!("{SECRET} gh\n"));
    let log = h.tmp.path().join("audit.log");
    let o = h.sh_with(
        &["--quiet", "--permissive", "--audit", log.to_str().unwrap()],
        "cat gh/hosts.yml; cat gcloud/credentials.db; echo PLANTED >> git/config; \
         echo PLANTED > systemd/user/evil.service; echo PLANTED >> autostart/x.desktop; true",
    );
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", show(&o));
    assert!(!out.contains(SECRET), "{}", show(&o));
    for rel in [
        "git/config",
        "autostart/x.desktop",
        "systemd/user/x.service",
    ] {
        assert_eq!(
            std::fs::read_to_string(h.ws.join(rel)).unwrap(),
            "# original\n",
            "{rel} changed"
        );
    }
    assert!(!h.ws.join("systemd/user/evil.service").exists());
    // `explain --audit` says what the policies decide now: the home policy's deny
    // for gh's token, inside the workspace as at a home path.
    let o = h.explain(&h.ws, &["--audit".as_ref(), log.as_os_str()]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", show(&o));
    let line = out
        .lines()
        .find(|l| l.trim_start().split("  ").nth(1) == Some("gh/hosts.yml"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("; now deny ("), "{line}");
    let o = h.sh_with(
        &["--quiet", "--permissive", "--audit", log.to_str().unwrap()],
        "cat \"$HOME/.ssh/id_ed25519\" 2>/dev/null; true",
    );
    assert!(o.status.success(), "{}", show(&o));
    let o = h.explain(&h.ws, &["--audit".as_ref(), log.as_os_str()]);
    let out = text(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.trim_start().split("  ").nth(1) == Some("~/.ssh"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("; now deny ("), "{line}");
}

/// An audit log in the home directory: the command cannot rewrite, remove,
/// replace or link it, nor move the directories that hold it (a rename through the
/// home mount would drop a bind mount on it, and the log would be open to it).
#[test]
fn an_audit_log_in_the_home_directory_is_kept_from_the_command() {
    let h = Home::new();
    std::fs::create_dir_all(h.home.join("logs")).unwrap();
    let log = h.home.join("logs/a.log");
    let script = "cat .env 2>/dev/null; export L=\"$HOME/logs/a.log\"; \
         for how in ': > $L' 'echo {} >> $L' 'rm -f $L' 'mv $L $L.x' 'ln $L $L.l' \
                    'chmod 666 $L' 'mv $HOME/logs $HOME/logs.x' 'rmdir $HOME/logs' \
                    'echo x > $L.new && mv $L.new $L'; do \
           if sh -c \"$how\" 2>/dev/null; then echo \"DONE $how\"; fi; \
         done; true";
    let o = h.sh_with(&["--quiet", "--audit", log.to_str().unwrap()], script);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", show(&o));
    assert!(
        !out.contains("DONE"),
        "the command changed its log:\n{}",
        show(&o)
    );
    assert!(
        !text(&o.stderr).contains("is not the file this run wrote"),
        "{}",
        show(&o)
    );
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(
        log_text.contains("\"path\":\".env\"") && log_text.contains("\"result\":\"refused\""),
        "{log_text}"
    );
    assert!(log_text.contains("\"reason\":\"audit-log\""), "{log_text}");
}

/// With `XDG_CONFIG_HOME` set, a run still keeps `~/.config/veilfs` (where a later
/// run without it reads the home policy) from the command, as well as the one in
/// use. (The home lies outside `/tmp`: an `XDG_CONFIG_HOME` in a scratch place is
/// not used, and a plant there would be harmless.)
#[test]
fn both_configuration_directories_are_guarded_whatever_xdg_config_home_says() {
    require_fuse();
    // Outside every scratch place (`/tmp`, `/var/tmp`, `/dev/shm`), wherever the
    // checkout lies.
    let scratch = ["/tmp", "/var/tmp", "/dev/shm"].map(|s| Path::new(s).canonicalize().unwrap());
    let base = ["/run", env!("CARGO_TARGET_TMPDIR")]
        .into_iter()
        .map(PathBuf::from)
        .find(|b| {
            b.canonicalize()
                .is_ok_and(|c| !scratch.iter().any(|s| c.starts_with(s)))
        })
        .expect("no directory outside the scratch places to make a home directory in");
    let t = tempfile::Builder::new()
        .prefix("veilfs-xdg")
        .tempdir_in(base)
        .unwrap();
    let home = t.path().join("home");
    let ws = home.join("proj");
    std::fs::create_dir_all(&ws).unwrap();
    write(&home.join(".ssh/id_ed25519"), &format!("{SECRET} key\n"));
    let script = "for d in \"$HOME/.config/veilfs\" \"$HOME/.xdg/veilfs\"; do \
                    if mkdir -p \"$d\" 2>/dev/null && \
                       printf 'extends = \"none\"\\n' > \"$d/home.toml\" 2>/dev/null; then \
                      echo \"PLANTED $d\"; fi; done; true";
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["run", "--quiet", "--", "sh", "-c", script])
        .current_dir(&ws)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".xdg"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    assert!(!text(&o.stdout).contains("PLANTED"), "{}", show(&o));
    assert!(!home.join(".config/veilfs/home.toml").exists());
    assert!(!home.join(".xdg/veilfs/home.toml").exists());
    // And the next run, without the variable, keeps the built-in home policy.
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args([
            "run",
            "--",
            "sh",
            "-c",
            "cat \"$HOME/.ssh/id_ed25519\"; true",
        ])
        .current_dir(&ws)
        .env("HOME", &home)
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap();
    assert!(!text(&o.stdout).contains(SECRET), "{}", show(&o));
    assert!(
        text(&o.stderr).contains(&format!(
            "home {}: built-in default home policy",
            home.display()
        )),
        "{}",
        show(&o)
    );
}

/// With `XDG_CONFIG_HOME` (or `XDG_DATA_HOME`) moving `~/.config` (or
/// `~/.local/share`) elsewhere in the home directory, where git, systemd and the
/// others then read, the home policy holds the same paths there.
#[test]
fn the_home_policy_follows_the_xdg_variables() {
    let h = Home::new();
    let (xdg, data) = (h.home.join(".xdg"), h.home.join(".xdata"));
    write(&xdg.join("gh/hosts.yml"), &format!("{SECRET} xdg gh\n"));
    write(&xdg.join("git/config"), "# original\n");
    std::fs::create_dir_all(&data).unwrap();
    let script = "cat \"$XDG_CONFIG_HOME/gh/hosts.yml\" 2>/dev/null; \
         for f in \"$XDG_CONFIG_HOME/git/config\" \"$XDG_CONFIG_HOME/systemd/user/x.service\" \
                  \"$XDG_CONFIG_HOME/autostart/x.desktop\" \"$XDG_DATA_HOME/systemd/user/y.service\"; do \
           mkdir -p \"$(dirname \"$f\")\" 2>/dev/null; \
           if echo PLANTED >> \"$f\" 2>/dev/null; then echo \"PLANTED $f\"; fi; done; true";
    let o = h
        .veilfs(&["--quiet", "--", "sh", "-c", script])
        .env("XDG_CONFIG_HOME", &xdg)
        .env("XDG_DATA_HOME", &data)
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", show(&o));
    assert!(!out.contains(SECRET), "{}", show(&o));
    assert!(!out.contains("PLANTED"), "{}", show(&o));
    assert_eq!(
        std::fs::read_to_string(xdg.join("git/config")).unwrap(),
        "# original\n"
    );
}

/// A `--policy` file in the home directory, outside the workspace, stays where the
/// next run reads it (an attacker's finding): the command can neither move the
/// directories that hold it nor replace the link it is named by, so the next run
/// still loads the person's policy. And a repository in the home directory is not
/// moved with a directory above it (another finding), so none of the command's can
/// take its place in a later run.
#[test]
fn the_policy_file_and_repositories_in_the_home_directory_stay_where_they_are() {
    let h = Home::new();
    let pol = h.home.join("pol/inner/p.toml");
    write(
        &pol,
        "extends = \"default\"\n[[rules]]\naction = \"deny\"\npaths = [\"a.txt\"]\n",
    );
    std::os::unix::fs::symlink("pol/inner/p.toml", h.home.join("pl.toml")).unwrap();
    write(&h.home.join("d1/repo/.git/HEAD"), "ref: refs/heads/main\n");
    write(&h.home.join("d1/repo/.git/config"), "[core]\n");
    let before = common::snapshot(&h.home);
    let link = h.home.join("pl.toml");
    // The file named, then the link naming it (whose own path is then kept too).
    for (policy, link_refusals) in [(pol.to_str().unwrap(), 0), (link.to_str().unwrap(), 2)] {
        let relink = if link_refusals > 0 {
            "rm -f pl.toml; ln -sf /dev/null pl.toml;"
        } else {
            ""
        };
        let o = h.sh_with(
            &["--quiet", "--policy", policy],
            &format!(
                "exec 2>&1; cd \"$HOME\"; mv pol pol.moved; mv pol/inner pol/inner2; {relink} \
                 printf 'extends = \"none\"\\n' > pol/inner/p.toml; \
                 mv d1 d1.moved; mv d1/repo repo2; echo done"
            ),
        );
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.ends_with("done\n"), "{out}");
        assert_eq!(
            out.matches("Permission denied").count(),
            4 + link_refusals,
            "{out}"
        );
        assert_eq!(before, common::snapshot(&h.home), "{out}");
        let o = h.sh_with(
            &["--quiet", "--policy", policy],
            "cat a.txt 2>&1; echo done",
        );
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            !out.contains("hello"),
            "the next run lost its policy: {out}"
        );
    }
}
