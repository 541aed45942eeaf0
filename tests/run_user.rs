//! `--user` is the stronger mode: the command, run as another user, sees of the
//! person's home directory only the way to the workspace (or nothing, when the
//! workspace lies elsewhere), and the README's `--user` recipe (`chown -R agent:
//! project`) does not narrow the workspace. Each door is first shown open to that
//! user outside `veilfs run`.

mod common;

use common::run::{show, test_user, text};

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::require_fuse;

const SECRET: &str = "run-user-secret-4411";

/// The person's home, outside every private place (`/tmp` would hide it anyway)
/// and every repository (`/var/cache`):
/// `other/.env` and `.pypirc` readable by anyone (0644, as people leave them), and
/// a project with a `.env`.
struct Person {
    _dir: tempfile::TempDir,
    home: PathBuf,
}

impl Person {
    fn new() -> Person {
        require_fuse();
        test_user();
        let dir = tempfile::Builder::new()
            .prefix("veilfs-user")
            .tempdir_in("/var/cache")
            .unwrap();
        let home = dir.path().join("alice");
        for (rel, body) in [
            ("other/.env", SECRET),
            (".pypirc", SECRET),
            ("notes.txt", SECRET),
            ("project/.env", SECRET),
            ("project/a.txt", "hello\n"),
            ("project/sub/b.txt", "b\n"),
        ] {
            let p = home.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, body).unwrap();
        }
        let st = Command::new("chmod")
            .args(["-R", "a+rX"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(st.success());
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        Person { _dir: dir, home }
    }

    /// `sh -c script` as the test user, outside veilfs.
    fn as_user_outside(&self, script: &str) -> Output {
        Command::new("setpriv")
            .args([
                "--reuid",
                test_user(),
                "--regid",
                test_user(),
                "--clear-groups",
            ])
            .args(["sh", "-c", script])
            .current_dir(&self.home)
            .output()
            .unwrap()
    }

    /// `veilfs run --user TEST-USER --workspace WS -- sh -c script` in `cwd`, with
    /// the person's `HOME`.
    fn run(&self, ws: &Path, cwd: &Path, script: &str) -> Output {
        let ws = ws.to_string_lossy();
        self.run_found(&["--user", test_user(), "--workspace", &ws], cwd, script)
    }

    /// `veilfs run ARGS -- sh -c script` in `cwd`, the workspace found from there,
    /// with the person's `HOME`.
    fn run_found(&self, args: &[&str], cwd: &Path, script: &str) -> Output {
        Command::new(env!("CARGO_BIN_EXE_veilfs"))
            .arg("run")
            .args(args)
            .args(["--", "sh", "-c", script])
            .current_dir(cwd)
            .env("HOME", &self.home)
            .output()
            .unwrap()
    }
}

fn files_unchanged(p: &Person) {
    for rel in ["other/.env", ".pypirc", "notes.txt", "project/.env"] {
        assert_eq!(
            std::fs::read_to_string(p.home.join(rel)).unwrap(),
            SECRET,
            "{rel}"
        );
    }
    assert!(!p.home.join("planted").exists());
}

const ATTACK: &str = "for f in \"$H/other/.env\" \"$H/.pypirc\" \"$H/notes.txt\"; do \
     cat \"$f\" 2>/dev/null && echo \"READ $f\"; done; \
     ls -a \"$H\"; echo planted > \"$H/planted\" 2>/dev/null && echo PLANTED; echo done";

#[test]
fn the_persons_home_shows_only_the_way_to_the_workspace() {
    let p = Person::new();
    let ws = p.home.join("project");
    // Outside, the other user reads them.
    let script = format!("H={}; {ATTACK}", p.home.display());
    let o = p.as_user_outside(&script);
    assert!(text(&o.stdout).contains("READ"), "{}", show(&o));

    let o = p.run(&ws, &ws.join("sub"), &script);
    let out = text(&o.stdout);
    assert!(o.status.success() && out.contains("done"), "{}", show(&o));
    assert!(
        !out.contains(SECRET) && !out.contains("READ"),
        "{}",
        show(&o)
    );
    assert!(!out.contains("PLANTED"), "{}", show(&o));
    let listed: Vec<&str> = out.lines().filter(|l| *l != "done").collect();
    assert_eq!(listed, [".", "..", "project"], "{}", show(&o));
    assert!(
        text(&o.stderr).contains(&format!(
            "{}: only the way to the workspace",
            p.home.display()
        )),
        "{}",
        show(&o)
    );
    // The workspace itself is there, through its policy.
    let o = p.run(
        &ws,
        &ws.join("sub"),
        "cat ../a.txt b.txt; cat ../.env; echo done",
    );
    assert_eq!(text(&o.stdout), "hello\nb\ndone\n", "{}", show(&o));
    files_unchanged(&p);
}

#[test]
fn the_persons_home_is_hidden_when_the_workspace_lies_elsewhere() {
    let p = Person::new();
    let elsewhere = tempfile::Builder::new()
        .prefix("veilfs-user-ws")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(elsewhere.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let script = format!("H={}; {ATTACK}", p.home.display());
    let o = p.run(elsewhere.path(), elsewhere.path(), &script);
    let out = text(&o.stdout);
    assert!(o.status.success() && out.contains("done"), "{}", show(&o));
    assert!(
        !out.contains("READ") && !out.contains("PLANTED"),
        "{}",
        show(&o)
    );
    let listed: Vec<&str> = out.lines().filter(|l| *l != "done").collect();
    assert_eq!(listed, [".", ".."], "{}", show(&o));
    assert!(
        text(&o.stderr).contains(&format!("{} hidden", p.home.display())),
        "{}",
        show(&o)
    );
    files_unchanged(&p);
}

/// The README's recipe as written: `chown -R agent: project`, `.veilfs.toml` kept
/// the person's, then `veilfs run --user agent` from a subdirectory polices the
/// whole project (the agent's `.git` is trusted when root runs it as the agent).
#[test]
fn the_user_recipe_polices_the_whole_project() {
    let p = Person::new();
    let project = p.home.join("project");
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .args(args)
            .current_dir(&project)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
    };
    git(&["init", "-q"]);
    std::fs::write(project.join(".veilfs.toml"), "extends = \"default\"\n").unwrap();
    common::run::chown_r(test_user(), &project);
    std::os::unix::fs::chown(project.join(".veilfs.toml"), Some(0), Some(0)).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args([
            "run",
            "--user",
            test_user(),
            "--",
            "sh",
            "-c",
            "cat ../.env; cat ../a.txt",
        ])
        .current_dir(project.join("sub"))
        .env("HOME", &p.home)
        .output()
        .unwrap();
    assert!(!text(&o.stdout).contains(SECRET), "{}", show(&o));
    assert_eq!(text(&o.stdout), "hello\n", "{}", show(&o));
    assert!(
        text(&o.stderr).contains(&format!("in {} (nearest", project.display())),
        "{}",
        show(&o)
    );
    // Without `--user` (root's own session), the agent's `.git` is not trusted,
    // and passing over it would narrow the workspace to `sub`: refused, saying how.
    std::fs::remove_file(project.join(".veilfs.toml")).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["run", "--", "sh", "-c", "cat ../.env; echo ran"])
        .current_dir(project.join("sub"))
        .env("HOME", &p.home)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(!text(&o.stdout).contains("ran"), "{}", show(&o));
    assert!(
        text(&o.stderr).contains(&format!("--workspace {}", project.display())),
        "{}",
        show(&o)
    );
}

/// The reproducer: after `chown -R agent: project` (no `.veilfs.toml`),
/// `veilfs run --user agent` from `sub/` polices the whole project, not `sub/`.
#[test]
fn the_agents_git_does_not_narrow_the_workspace() {
    let p = Person::new();
    let project = p.home.join("project");
    let o = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&project)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    common::run::chown_r(test_user(), &project);
    let o = p.run_found(
        &["--user", test_user()],
        &project.join("sub"),
        "cat ../.env; echo ran",
    );
    assert!(text(&o.stdout).contains("ran"), "{}", show(&o));
    assert!(!text(&o.stdout).contains(SECRET), "{}", show(&o));
    let top = format!("in {} (top of the git work tree)", project.display());
    assert!(text(&o.stderr).contains(&top), "{}", show(&o));
}

/// Discovery as a table, in-process: a passed-over marker never leaves a smaller
/// workspace than the project it marks.
#[test]
fn discovery_never_narrows() {
    let p = Person::new();
    let root = p.home.join("project");
    let sub = root.join("sub");
    let find = |owner: Option<u32>| veilfs::workspace::load::find_workspace(&sub, owner);
    // Nothing marks anything: the current directory.
    assert_eq!(find(None).unwrap().0, sub);
    // The person's own `.git` at the top: the top.
    std::fs::create_dir(root.join(".git")).unwrap();
    assert_eq!(find(None).unwrap().0, root);
    // Another user's: refused, unless that user is the one trusted.
    std::os::unix::fs::chown(root.join(".git"), Some(65534), Some(65534)).unwrap();
    let e = find(None).unwrap_err().to_string();
    assert!(
        e.contains("--workspace") && e.contains(&root.display().to_string()),
        "{e}"
    );
    assert_eq!(find(Some(65534)).unwrap().0, root);
    assert!(find(Some(4242)).is_err());
    // A trusted `.git` below an untrusted one does not hide the narrowing.
    std::fs::create_dir(sub.join(".git")).unwrap();
    assert!(find(None).is_err());
    // An untrusted marker below the workspace found does not matter.
    std::fs::remove_dir(sub.join(".git")).unwrap();
    std::fs::remove_dir(root.join(".git")).unwrap();
    std::fs::create_dir(sub.join(".git")).unwrap();
    std::os::unix::fs::chown(sub.join(".git"), Some(65534), Some(65534)).unwrap();
    std::fs::write(root.join(".veilfs.toml"), "").unwrap();
    let deeper = sub.join("d");
    std::fs::create_dir(&deeper).unwrap();
    assert_eq!(
        veilfs::workspace::load::find_workspace(&deeper, None)
            .unwrap()
            .0,
        root
    );
    // A `.veilfs.toml` of the trusted `--user` is never trusted: it would choose
    // the policy.
    std::os::unix::fs::chown(root.join(".veilfs.toml"), Some(65534), Some(65534)).unwrap();
    assert!(veilfs::workspace::load::find_workspace(&deeper, Some(65534)).is_err());
}

/// Attacker pass 2: root reached by `doas` or `pkexec` (or `su`, which keeps the
/// login uid), with `HOME=/root`: the person's home is found all the same.
#[test]
fn the_persons_home_is_found_however_root_was_reached() {
    let p = Person::new();
    let name = "veilfs-person";
    let _ = Command::new("userdel").arg(name).output();
    let st = Command::new("useradd")
        .args(["-M", "-s", "/bin/sh", "-d"])
        .arg(&p.home)
        .arg(name)
        .status()
        .unwrap();
    assert!(st.success());
    struct Gone(&'static str);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = Command::new("userdel").arg(self.0).output();
        }
    }
    let _gone = Gone(name);
    let uid = nix::unistd::User::from_name(name)
        .unwrap()
        .unwrap()
        .uid
        .to_string();
    let elsewhere = tempfile::Builder::new()
        .prefix("veilfs-user-ws")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(elsewhere.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let script = format!("H={}; {ATTACK}", p.home.display());
    for (var, value) in [("DOAS_USER", name), ("PKEXEC_UID", uid.as_str())] {
        let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
            .args(["run", "--user", test_user(), "--workspace"])
            .arg(elsewhere.path())
            .args(["--", "sh", "-c", &script])
            .current_dir(elsewhere.path())
            .env("HOME", "/root")
            .env_remove("SUDO_USER")
            .env(var, value)
            .output()
            .unwrap();
        let out = text(&o.stdout);
        assert!(out.contains("done"), "{var}: {}", show(&o));
        assert!(!out.contains("READ"), "{var}: {}", show(&o));
        assert!(
            text(&o.stderr).contains(&format!("{} hidden", p.home.display())),
            "{var}: {}",
            show(&o)
        );
    }
    files_unchanged(&p);
}
