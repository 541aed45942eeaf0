//! `veilfs run`: variables whose names look like credentials never reach the
//! command, by any route it can read (`env`, `/proc/self/environ`, init's
//! `/proc/1/environ`, every `/proc/*/environ`), as root, as `--user`, and through a
//! user namespace; `--keep-env`, `--drop-env`, the start-up line and
//! `check --print-default-env`.

mod common;

use common::run::{show, text};

use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::{Command, Output};

use common::require_fuse;

/// Exported secrets, several spellings and cases; each value is unique and appears
/// nowhere else.
const SECRETS: &[(&str, &str)] = &[
    ("DB_PASSWORD", "zq-val-db-password-71"),
    ("db_password", "zq-val-db-password-lower-72"),
    ("GITHUB_TOKEN", "zq-val-github-token-73"),
    ("Aws_Secret_Access_Key", "zq-val-aws-secret-74"),
    ("AWS_SESSION_TOKEN", "zq-val-aws-session-75"),
    ("MY_API_KEY", "zq-val-api-key-76"),
    ("SSH_AUTH_SOCK", "/tmp/zq-val-ssh-agent-77"),
    ("DATABASE_URL", "postgres://u:zq-val-dburl-78@db/x"),
    ("vault_token", "zq-val-vault-79"),
];

/// Harmless variables and the values they must arrive with.
const HARMLESS: &[(&str, &str)] = &[
    ("EDITOR", "zq-editor"),
    ("TERM", "xterm-zq"),
    ("LANG", "C.UTF-8"),
    ("FOO", "zq-foo-value"),
    ("AWS_REGION", "eu-zq-1"),
];

/// What the command prints: every environment it can find, each section marked.
const SHOW_ALL: &str = "echo ==env; env; \
     echo ==self; tr '\\0' '\\n' < /proc/self/environ; \
     echo ==one; tr '\\0' '\\n' < /proc/1/environ; \
     echo ==mem; /usr/bin/python3 -c 'import sys\n\
f = open(\"/proc/1/stat\").read().rsplit(\")\", 1)[1].split()\n\
start, end = int(f[-3]), int(f[-2])\n\
m = open(\"/proc/1/mem\", \"rb\"); m.seek(start); sys.stdout.write(m.read(end - start).decode(\"latin-1\"))\n'; \
     echo ==all; cat /proc/*/environ | tr '\\0' '\\n'; \
     echo ==end";

struct Ws {
    tmp: tempfile::TempDir,
    dir: PathBuf,
}

impl Ws {
    fn new() -> Ws {
        require_fuse();
        let tmp = tempfile::Builder::new()
            .prefix("veilfs-run-env")
            .tempdir()
            .unwrap();
        let dir = tmp.path().join("ws");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.txt"), "hello\n").unwrap();
        Ws { tmp, dir }
    }

    /// `veilfs run ARGS` from the workspace, with the secrets and harmless
    /// variables exported.
    fn veilfs(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_veilfs"));
        c.arg("run").args(args).current_dir(&self.dir);
        c.envs(SECRETS.iter().copied())
            .envs(HARMLESS.iter().copied());
        c
    }

    fn output(&self, mut c: Command) -> Output {
        let o = c.output().unwrap();
        assert!(
            !veilfs::session::mount::is_mount_point(&self.dir.canonicalize().unwrap()),
            "{} is a mount point outside the run",
            self.dir.display()
        );
        o
    }
}

/// The lines of section `name` of [`SHOW_ALL`]'s output.
fn section<'a>(out: &'a str, name: &str) -> Vec<&'a str> {
    let start = format!("=={name}\n");
    let Some(i) = out.find(&start) else {
        panic!("no section {name} in:\n{out}")
    };
    out[i + start.len()..]
        .lines()
        .take_while(|l| !l.starts_with("=="))
        .collect()
}

/// No secret's name nor value anywhere in the output; the harmless ones arrive in
/// the command's own environment; init's environment is unreadable.
#[track_caller]
fn assert_secrets_absent(o: &Output) {
    let out = text(&o.stdout);
    let err = text(&o.stderr);
    assert!(out.contains("==end"), "{}", show(o));
    for (name, value) in SECRETS {
        assert!(
            !out.contains(value),
            "the value of {name} reached the command:\n{}",
            show(o)
        );
        assert!(
            !err.contains(value),
            "the value of {name} was printed:\n{}",
            show(o)
        );
        let set = format!("{name}=");
        assert!(
            !out.lines().any(|l| l.starts_with(&set)),
            "{name} reached the command:\n{}",
            show(o)
        );
    }
    for part in ["env", "self"] {
        let lines = section(&out, part);
        for (name, value) in HARMLESS {
            let want = format!("{name}={value}");
            assert!(
                lines.contains(&want.as_str()),
                "{want} missing from {part}:\n{}",
                show(o)
            );
        }
        assert!(
            lines.iter().any(|l| l.starts_with("PATH=/")),
            "PATH missing from {part}:\n{}",
            show(o)
        );
    }
    assert!(section(&out, "one").is_empty(), "{}", show(o));
    assert!(section(&out, "mem").is_empty(), "{}", show(o));
    assert!(
        err.contains("/proc/1/environ: Permission denied"),
        "{}",
        show(o)
    );
    assert!(err.contains("PermissionError"), "/proc/1/mem: {}", show(o));
}

#[test]
fn secrets_do_not_reach_the_command_run_as_root() {
    let ws = Ws::new();
    let o = ws.output(ws.veilfs(&["-q", "--", "sh", "-c", SHOW_ALL]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_secrets_absent(&o);
}

#[test]
fn secrets_do_not_reach_the_command_run_as_another_user() {
    let ws = Ws::new();
    // The user must be able to enter the workspace.
    std::fs::set_permissions(
        ws.tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let o = ws.output(ws.veilfs(&["-q", "--user", "65534", "--", "sh", "-c", SHOW_ALL]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_secrets_absent(&o);
}

#[test]
fn secrets_do_not_reach_the_command_run_through_a_user_namespace() {
    let ws = Ws::new();
    let user = common::run::test_user();
    common::run::fuse_for_everyone();
    common::run::chown_r(user, ws.tmp.path());
    let mut c = Command::new("setpriv");
    c.args(["--reuid", user, "--regid", user, "--init-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_veilfs"))
        .args(["run", "-q", "--", "sh", "-c"])
        .arg(format!("echo uid=$(id -u); {SHOW_ALL}"))
        .current_dir(&ws.dir)
        .envs(SECRETS.iter().copied())
        .envs(HARMLESS.iter().copied());
    let o = ws.output(c);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    // Root of a user namespace, not the real root.
    assert!(text(&o.stdout).starts_with("uid=0\n"), "{}", show(&o));
    assert_secrets_absent(&o);
}

#[test]
fn keep_env_passes_a_name_or_a_glob_and_drop_env_drops_more() {
    let ws = Ws::new();
    let o = ws.output({
        let mut c = ws.veilfs(&[
            "-q",
            "--keep-env",
            "github_token",
            "--keep-env",
            "aws_*",
            "--drop-env",
            "FOO",
            "--drop-env",
            "MY_CUSTOM_*",
            "--",
            "env",
        ]);
        c.env("MY_CUSTOM_THING", "zq-custom")
            .env("MY_OTHER", "zq-other");
        c
    });
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let out = text(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    for want in [
        "GITHUB_TOKEN=zq-val-github-token-73",
        "Aws_Secret_Access_Key=zq-val-aws-secret-74",
        "AWS_SESSION_TOKEN=zq-val-aws-session-75",
        "AWS_REGION=eu-zq-1",
        "MY_OTHER=zq-other",
        "TERM=xterm-zq",
    ] {
        assert!(lines.contains(&want), "{want} missing:\n{}", show(&o));
    }
    for gone in [
        "DB_PASSWORD=",
        "db_password=",
        "MY_API_KEY=",
        "FOO=",
        "MY_CUSTOM_THING=",
    ] {
        assert!(
            !lines.iter().any(|l| l.starts_with(gone)),
            "{gone} passed:\n{}",
            show(&o)
        );
    }

    let o = ws.output(ws.veilfs(&["-q", "--keep-env", "*", "--", "env"]));
    let out = text(&o.stdout);
    for (name, value) in SECRETS {
        assert!(
            out.contains(&format!("{name}={value}\n")),
            "{name}:\n{}",
            show(&o)
        );
    }
}

/// The policy is by name: a harmless name carrying a secret's value passes.
#[test]
fn a_secret_value_under_a_harmless_name_passes() {
    let ws = Ws::new();
    let o = ws.output({
        let mut c = ws.veilfs(&["-q", "--", "env"]);
        c.env("NOTES", "the password is zq-val-db-password-71");
        c
    });
    let out = text(&o.stdout);
    assert!(
        out.contains("NOTES=the password is zq-val-db-password-71\n"),
        "{}",
        show(&o)
    );
    assert!(!out.contains("DB_PASSWORD="), "{}", show(&o));
}

#[test]
fn the_start_up_line_names_what_was_dropped_and_never_a_value() {
    let ws = Ws::new();
    let run = |flags: &[&str]| {
        ws.output({
            let mut args = flags.to_vec();
            args.extend(["--", "true"]);
            let mut c = ws.veilfs(&args);
            c.env(
                std::ffi::OsStr::from_bytes(b"EVIL\x1b]0;x\x07_TOKEN"),
                "zq-evil-value",
            );
            c
        })
    };
    // In short: a few names, never a value.
    let o = run(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let err = text(&o.stderr);
    assert_eq!(err.lines().count(), 3, "{err}");
    assert!(err.contains("; dropped "), "{err}");
    for (_, value) in SECRETS {
        assert!(!err.contains(value), "a value printed: {err}");
    }
    assert!(
        !err.contains('\x1b') && !err.contains("zq-evil-value"),
        "{err:?}"
    );
    // In full (-v): every name.
    let o = run(&["-v"]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let err = text(&o.stderr);
    assert!(
        err.contains("variables that look like credentials ("),
        "{err}"
    );
    assert!(err.contains("--keep-env NAME passes one)"), "{err}");
    for (name, value) in SECRETS {
        assert!(err.contains(name), "{name} not named: {err}");
        assert!(!err.contains(value), "the value of {name} printed: {err}");
    }
    assert!(err.contains("EVIL\\x1b]0;x\\x07_TOKEN"), "{err}");
    assert!(
        !err.contains('\x1b') && !err.contains("zq-evil-value"),
        "{err:?}"
    );

    // The person's own `--drop-env` is no credential guess.
    let o = ws.output({
        let mut c = Command::new(env!("CARGO_BIN_EXE_veilfs"));
        c.args(["run", "--drop-env", "FOO", "--", "true"])
            .current_dir(&ws.dir)
            .env("FOO", "zq-foo");
        c
    });
    let err = text(&o.stderr);
    assert!(err.contains("; dropped "), "{err}");
    assert!(err.contains("FOO"), "{err}");
    assert!(!err.contains("zq-foo"), "{err}");

    // Nothing dropped, nothing said.
    let o = ws.output({
        let mut c = Command::new(env!("CARGO_BIN_EXE_veilfs"));
        c.args(["run", "--keep-env", "*", "--", "true"])
            .current_dir(&ws.dir);
        c
    });
    assert!(!text(&o.stderr).contains("dropped"), "{}", show(&o));
}

/// The command is looked up in the filtered `PATH`, not in `run`'s own.
#[test]
fn the_command_is_found_in_the_filtered_path() {
    let ws = Ws::new();
    let bin = ws.tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let tool = bin.join("zq-tool");
    std::fs::write(&tool, "#!/bin/sh\necho tool-ran\n").unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let run = |extra: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_veilfs"));
        c.arg("run")
            .arg("-q")
            .args(extra)
            .args(["--", "zq-tool"])
            .current_dir(&ws.dir)
            .env("PATH", &path);
        ws.output(c)
    };
    let o = run(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(text(&o.stdout), "tool-ran\n", "{}", show(&o));
    let o = run(&["--drop-env", "PATH"]);
    assert_eq!(o.status.code(), Some(127), "{}", show(&o));
    assert!(text(&o.stderr).contains("zq-tool"), "{}", show(&o));
}

#[test]
fn bad_flags_are_refused_before_anything_runs() {
    let ws = Ws::new();
    for bad in ["", "A=B", "[A"] {
        let o = ws.output(ws.veilfs(&["--keep-env", bad, "--", "touch", "ran"]));
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", show(&o));
        assert!(text(&o.stderr).contains("--keep-env"), "{}", show(&o));
        assert!(!ws.dir.join("ran").exists());
    }
}

#[test]
fn print_default_env_parses_back() {
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["check", "--print-default-env"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let out = text(&o.stdout);
    let rules = veilfs::run::env::parse_env_section("<stdout>", &out)
        .unwrap_or_else(|e| panic!("{e}\n{out}"));
    let globs: Vec<&str> = rules.drop.iter().map(|p| p.glob.as_str()).collect();
    let want: Vec<&str> = veilfs::run::env::DEFAULT_DROP
        .iter()
        .chain(veilfs::run::env::SOCKET_DROP)
        .map(|p| p.0)
        .collect();
    assert_eq!(globs, want);
    for g in [
        "*TOKEN*",
        "*SECRET*",
        "*PASSWORD*",
        "AWS_*",
        "SSH_AUTH_SOCK",
    ] {
        assert!(globs.contains(&g), "{g}");
    }
    let keep: Vec<&str> = rules.keep.iter().map(|p| p.glob.as_str()).collect();
    assert!(keep.contains(&"AWS_REGION"), "{keep:?}");
    // The same file is a valid path policy too (the `[env]` table is ignored there).
    veilfs::Policy::parse("<stdout>", &out).unwrap_or_else(|e| panic!("{e}"));
}

/// The strings init's `/proc/1/environ` shows are zeroed, whoever could read them:
/// a child process (this test binary, running [`wipe_helper`]) wipes its own and
/// reads its `/proc/self/environ` back.
#[test]
fn the_environment_strings_of_init_are_wiped() {
    let o = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "wipe_helper", "--nocapture", "--test-threads=1"])
        .env("ZQ_WIPE_HELPER", "1")
        .envs(SECRETS.iter().copied())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    assert!(text(&o.stdout).contains("wiped:"), "{}", show(&o));
}

/// Does nothing unless started by [`the_environment_strings_of_init_are_wiped`].
#[test]
fn wipe_helper() {
    if std::env::var_os("ZQ_WIPE_HELPER").is_none() {
        return;
    }
    let before = std::fs::read("/proc/self/environ").unwrap();
    for (_, value) in SECRETS {
        assert!(
            text(&before).contains(value),
            "{value} not in the environment to begin with"
        );
    }
    veilfs::run::env::wipe_initial_environment().unwrap();
    let after = std::fs::read("/proc/self/environ").unwrap();
    assert_eq!(after.len(), before.len());
    assert!(after.iter().all(|&b| b == 0), "{}", text(&after));
    println!("wiped: {} bytes", after.len());
}
