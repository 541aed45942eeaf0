//! Everyday toolchains under `veilfs run` with the built-in default policy (no policy
//! file): a Python virtual environment with a package that ships a CA bundle, a
//! `git clone` of a repository with test-fixture keys, an `npm install` of a package
//! that ships a `.pem`. And the other side: the secrets a person keeps in their own
//! tree stay refused and unlisted, and a refused create names its rule on stderr.
//!
//! Needs python3 with venv, git, npm (scripts/test installs them) and, for pip, the
//! Python package index.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::require_fuse;

const SECRET: &str = "TOPSECRET-toolchains";

/// A temporary directory with an empty workspace `ws` in it (no policy file), and
/// room beside it for fixtures that live outside the workspace.
struct Ws {
    tmp: tempfile::TempDir,
    dir: PathBuf,
}

impl Ws {
    fn new() -> Ws {
        require_fuse();
        let tmp = tempfile::Builder::new()
            .prefix("veilfs-tools")
            .tempdir()
            .unwrap();
        let dir = tmp.path().join("ws");
        std::fs::create_dir(&dir).unwrap();
        Ws { tmp, dir }
    }

    /// The refusal notices of the runs so far (they never go to the terminal).
    fn notices(&self) -> String {
        std::fs::read_to_string(self.outside("notices.log")).unwrap_or_default()
    }

    /// A path beside the workspace.
    fn outside(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// `veilfs run -- sh -c SCRIPT` from the workspace root, default policy (not
    /// `--quiet`, which sends refusal notices to the log).
    fn run(&self, script: &str) -> Output {
        assert!(!self.dir.join(".veilfs.toml").exists());
        let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
            // The fixtures beside the workspace (an origin, a tarball) lie in the
            // shared /tmp.
            .args(["run", "--share-tmp", "--notices"])
            .arg(self.outside("notices.log"))
            .args(["--", "sh", "-c", script])
            .current_dir(&self.dir)
            .env("HOME", self.outside("home"))
            .output()
            .unwrap();
        assert!(
            !veilfs::session::mount::is_mount_point(&self.dir.canonicalize().unwrap()),
            "the workspace is a mount point outside the run"
        );
        o
    }
}

fn show(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs a setup command outside any mount; it must succeed.
fn setup(cwd: &Path, argv: &[&str]) {
    let o = Command::new(argv[0])
        .args(&argv[1..])
        .current_dir(cwd)
        .output()
        .unwrap_or_else(|e| panic!("{argv:?}: {e} (scripts/test installs what is needed)"));
    assert!(o.status.success(), "{argv:?}\n{}", show(&o));
}

fn write(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
}

/// A git repository at `dir` with one commit holding `files`.
fn git_repo(dir: &Path, files: &[(&str, &str)]) {
    for (rel, body) in files {
        write(&dir.join(rel), body);
    }
    setup(dir, &["git", "init", "-q", "-b", "main"]);
    setup(dir, &["git", "add", "-A"]);
    setup(
        dir,
        &[
            "git",
            "-c",
            "user.name=fixture",
            "-c",
            "user.email=fixture@example.invalid",
            "commit",
            "-q",
            "-m",
            "fixture",
        ],
    );
}

const FIXTURE_KEY: &str =
    "-----BEGIN PRIVATE KEY-----\nfixture key for tests\n-----END PRIVATE KEY-----\n";

#[test]
fn python_venv_and_pip_install_certifi() {
    let ws = Ws::new();
    let o = ws.run(
        "python3 -m venv .venv \
         && .venv/bin/pip install -q --disable-pip-version-check --no-cache-dir --timeout 60 certifi \
         && .venv/bin/python -c 'import certifi; print(open(certifi.where()).read().count(\"BEGIN CERTIFICATE\") > 10)'",
    );
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "True",
        "{}",
        show(&o)
    );
    // pip's own vendored bundle (written by ensurepip) and certifi's are on disk.
    let site = std::fs::read_dir(ws.dir.join(".venv/lib"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("site-packages");
    assert!(site.join("certifi/cacert.pem").is_file());
    assert!(site.join("pip/_vendor/certifi/cacert.pem").is_file());
}

#[test]
fn git_clone_with_fixture_keys_is_checked_out_whole() {
    let ws = Ws::new();
    let origin = ws.outside("origin");
    git_repo(
        &origin,
        &[
            ("README.md", "fixture repository\n"),
            ("src/main.rs", "fn main() {}\n"),
            ("tests/fixtures/server.pem", FIXTURE_KEY),
            ("tests/fixtures/client.key", FIXTURE_KEY),
            ("tests/tls/ca.key", FIXTURE_KEY),
            ("testdata/id_ed25519", FIXTURE_KEY),
            ("testdata/id_ed25519.pub", "ssh-ed25519 AAAA fixture\n"),
        ],
    );
    let o = ws.run(&format!(
        "git clone -q {} clone && cd clone && git status --porcelain && cat tests/fixtures/server.pem",
        origin.display()
    ));
    assert!(o.status.success(), "{}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    // Nothing missing or modified: `git status --porcelain` printed nothing before
    // the key.
    assert!(
        out.starts_with("-----BEGIN PRIVATE KEY-----"),
        "{}",
        show(&o)
    );
    for rel in [
        "tests/fixtures/server.pem",
        "tests/fixtures/client.key",
        "tests/tls/ca.key",
        "testdata/id_ed25519",
    ] {
        let body = std::fs::read_to_string(ws.dir.join("clone").join(rel)).unwrap();
        assert_eq!(body, FIXTURE_KEY, "{rel}");
    }
}

#[test]
fn git_clone_of_a_denied_name_fails_naming_the_rule() {
    let ws = Ws::new();
    let origin = ws.outside("origin");
    git_repo(
        &origin,
        &[("README.md", "x\n"), (".env", &format!("TOKEN={SECRET}\n"))],
    );
    let o = ws.run(&format!("git clone -q {} clone", origin.display()));
    assert!(!o.status.success(), "{}", show(&o));
    assert!(
        ws.notices()
            .contains("veilfs: clone/.env: lookup refused: rule 1 \".env\" (<built-in>:"),
        "{}\n{}",
        show(&o),
        ws.notices()
    );
    // The terminal has the summary, naming the file.
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("veilfs: refused 1 name (clone/.env)"),
        "{}",
        show(&o)
    );
    assert!(!ws.dir.join("clone/.env").exists());
}

#[test]
fn npm_install_of_a_local_tarball_shipping_a_pem() {
    let ws = Ws::new();
    let pkg = ws.outside("pkg");
    write(
        &pkg.join("package.json"),
        r#"{"name": "veilfs-fixture-pem", "version": "1.0.0", "main": "index.js"}"#,
    );
    write(
        &pkg.join("index.js"),
        "module.exports = require('fs').readFileSync(__dirname + '/certs/server.pem', 'utf8');\n",
    );
    write(&pkg.join("certs/server.pem"), FIXTURE_KEY);
    write(&pkg.join("test/fixtures/client.key"), FIXTURE_KEY);
    std::fs::create_dir_all(ws.outside("home")).unwrap();
    let o = Command::new("npm")
        .args(["pack", "--silent"])
        .current_dir(&pkg)
        .env("HOME", ws.outside("home"))
        .output()
        .expect("npm (scripts/test installs it)");
    assert!(o.status.success(), "npm pack\n{}", show(&o));
    let tarball = pkg.join(String::from_utf8_lossy(&o.stdout).trim());
    assert!(tarball.is_file(), "{}", tarball.display());
    let o = ws.run(&format!(
        "npm install --offline --no-audit --no-fund --silent {} \
         && node -e \"process.stdout.write(require('veilfs-fixture-pem'))\"",
        tarball.display()
    ));
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        FIXTURE_KEY,
        "{}",
        show(&o)
    );
    let installed = ws.dir.join("node_modules/veilfs-fixture-pem");
    assert!(installed.join("certs/server.pem").is_file());
    assert!(installed.join("test/fixtures/client.key").is_file());
}

#[test]
fn own_secrets_stay_refused_and_unlisted() {
    let ws = Ws::new();
    let own = [".env", "id_ed25519", "deploy/prod.key", "secrets/token"];
    for rel in own {
        write(&ws.dir.join(rel), &format!("{SECRET}\n"));
    }
    write(&ws.dir.join("deploy/run.sh"), "echo deploy\n");
    let before = common::snapshot(&ws.dir);
    let o = ws.run(
        "for f in .env id_ed25519 deploy/prod.key secrets/token; do \
           cat $f; echo \"read $f=$?\"; \
           echo planted > $f; echo \"write $f=$?\"; \
         done; \
         ls -A . deploy; \
         for i in 1 2 3; do echo x > deploy/new.key; echo x > id_rsa; done; \
         mkdir .aws .ssh; echo \"mkdir=$?\"",
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.contains(SECRET), "{}", show(&o));
    for rel in own {
        assert!(
            out.contains(&format!("read {rel}=1")),
            "{rel}\n{}",
            show(&o)
        );
        assert!(
            out.contains(&format!("write {rel}=")),
            "{rel}\n{}",
            show(&o)
        );
        assert!(
            !out.contains(&format!("write {rel}=0")),
            "{rel}\n{}",
            show(&o)
        );
    }
    assert!(out.contains("mkdir=1"), "{}", show(&o));
    // Listed: only what is not a secret.
    let listed: Vec<&str> = out
        .lines()
        .filter(|l| !l.contains('=') && !l.is_empty())
        .collect();
    for name in [
        ".env",
        "id_ed25519",
        "prod.key",
        "secrets",
        "new.key",
        "id_rsa",
    ] {
        assert!(!listed.contains(&name), "{name} listed\n{}", show(&o));
    }
    assert!(listed.contains(&"run.sh"), "{}", show(&o));
    // A refused create is said once, naming the rule, in the notices file (never
    // in the middle of the command's own lines).
    let err = ws.notices();
    assert_eq!(
        err.matches("veilfs: deploy/new.key: ").count(),
        1,
        "{}",
        show(&o)
    );
    assert!(
        err.contains("veilfs: deploy/new.key: create refused: rule 1 \"*.key\" (<built-in>:"),
        "{}",
        show(&o)
    );
    assert_eq!(err.matches("veilfs: id_rsa: ").count(), 1, "{}", show(&o));
    // A read is said too, once, however often the path is refused after it.
    assert_eq!(
        err.matches("veilfs: .env: lookup refused: rule 1 \".env\"")
            .count(),
        1,
        "{}",
        show(&o)
    );
    assert!(
        err.contains("veilfs: .ssh: mkdir refused: rule 1 \".ssh/\""),
        "{}",
        show(&o)
    );
    // Nothing reached the disk.
    assert_eq!(common::snapshot(&ws.dir), before);
}
