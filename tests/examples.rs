//! Every shipped example policy loads without warnings and decides a small tree the
//! way its comments promise; the built-in default is the shipped `default.toml`.

use std::path::Path;
use std::process::Command;

use veilfs::{Action, Policy};

fn load(name: &str) -> Policy {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("policy-examples")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let p = Policy::parse(name, &text).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        p.lint().is_empty(),
        "{name} has lint warnings: {:?}",
        p.lint()
    );
    p
}

/// (path, is a directory, expected action)
type Tree<'a> = &'a [(&'a str, bool, Action)];

fn expect(policy: &Policy, tree: Tree) {
    let mut wrong = Vec::new();
    for &(path, dir, want) in tree {
        let d = policy.decide(path.as_bytes(), dir);
        if d.action != want {
            wrong.push(format!(
                "{path}: want {want}, got {} ({})",
                d.action,
                d.why()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}:\n{}", policy.name(), wrong.join("\n"));
}

use Action::{Allow, Deny, ReadOnly};

#[test]
fn every_example_is_covered() {
    let mut names: Vec<String> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("policy-examples"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
    names.sort();
    assert_eq!(
        names,
        [
            // The agents' profiles: tests/run_agents.rs and `policy::agents`.
            "agents",
            "allow-list.toml",
            "default.toml",
            "git-read-only.toml",
            "home-default.toml",
            "monorepo.toml"
        ],
        "a new example needs a test in tests/examples.rs"
    );
}

#[test]
fn home_default_policy() {
    let p = load("home-default.toml");
    assert_eq!(
        veilfs::policy::HOME_DEFAULT_POLICY,
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("policy-examples/home-default.toml")
        )
        .unwrap()
    );
    expect(
        &p,
        &[
            (".ssh", true, Deny),
            (".ssh/id_ed25519.pub", false, Deny),
            (".aws/credentials", false, Deny),
            (".config/gcloud", true, Deny),
            (".config/gh/hosts.yml", false, Deny),
            (".config/gh/config.yml", false, ReadOnly),
            (".docker/config.json", false, Deny),
            (".bash_history", false, Deny),
            (".python_history", false, Deny),
            (".mozilla", true, Deny),
            (".bashrc", false, ReadOnly),
            (".gitconfig", false, ReadOnly),
            (".config/git/config", false, ReadOnly),
            (".config/git/credentials", false, Deny),
            (".local/share/systemd/user/x.service", false, ReadOnly),
            (".cargo/config.toml", false, ReadOnly),
            (
                ".local/lib/python3.11/site-packages/usercustomize.py",
                false,
                ReadOnly,
            ),
            (".cargo/env", false, ReadOnly),
            (
                ".local/lib/python3.12/site-packages/zz.pth",
                false,
                ReadOnly,
            ),
            (
                ".local/lib/python3.12/site-packages/_distutils_hack.py",
                false,
                ReadOnly,
            ),
            (".oh-my-zsh/plugins/git/git.plugin.zsh", false, ReadOnly),
            (".zcompdump-host-5.9", false, ReadOnly),
            (".emacs.d/elpa/x-1/x-autoloads.el", false, ReadOnly),
            (".vscode-server/data/Machine/settings.json", false, ReadOnly),
            (".curlrc", false, ReadOnly),
            (".nvm/nvm.sh", false, ReadOnly),
            (".nvm/versions/node/v20/bin/node", false, Allow),
            (".less", false, ReadOnly),
            (".zshrc.zwc", false, ReadOnly),
            (".emacs.d/init.elc", false, ReadOnly),
            (".ipython/profile_work/startup/a.py", false, ReadOnly),
            (".local/share/direnv/allow/abc", false, ReadOnly),
            (".config/user-tmpfiles.d/x.conf", false, ReadOnly),
            (
                ".local/share/jupyter/kernels/py/kernel.json",
                false,
                ReadOnly,
            ),
            (".lesskey", false, ReadOnly),
            (".hgrc", false, ReadOnly),
            (".sqliterc", false, ReadOnly),
            (".jupyter/jupyter_server_config.py", false, ReadOnly),
            (".lldbinit", false, ReadOnly),
            (".config/Code/User/settings.json", false, ReadOnly),
            ("projects/app/.env", false, Deny),
            ("projects/app/src/main.rs", false, Allow),
            (".cache/pip/x", false, Allow),
            (".cargo/registry/src/x/lib.rs", false, Allow),
            (".claude/settings.json", false, Allow),
            (".codex/auth.json", false, Allow),
            (".local/bin/tool", false, Allow),
            (".bash_aliases", false, ReadOnly),
            (".bashrc.d/a.sh", false, ReadOnly),
            (".login", false, ReadOnly),
            (".gvimrc", false, ReadOnly),
            ("bin/tool", false, ReadOnly),
            (".config/sops/age/keys.txt", false, Deny),
            (".cache/huggingface/token", false, Deny),
            (".cache/huggingface/hub/model.bin", false, Allow),
            (".Rhistory", false, Deny),
            ("projects/r/.Rhistory", false, Deny),
        ],
    );
}

#[test]
fn default_policy() {
    let p = load("default.toml");
    expect(
        &p,
        &[
            ("src/main.rs", false, Allow),
            (".env", false, Deny),
            ("app/.env.production", false, Deny),
            (".env.example", false, Allow),
            ("web/.env.sample", false, Allow),
            (".env.template", false, Allow),
            ("certs/server.pem", false, Deny),
            ("tls/server.key", false, Deny),
            ("client.p12", false, Deny),
            ("client.pfx", false, Deny),
            ("id_rsa", false, Deny),
            ("keys/id_ed25519", false, Deny),
            ("id_ecdsa", false, Deny),
            ("id_rsa.pub", false, Allow),
            ("keys/id_ed25519.pub", false, Allow),
            (".ssh", true, Deny),
            (".ssh/config", false, Deny),
            (".ssh/id_rsa.pub", false, Deny),
            (".aws/credentials", false, Deny),
            (".gnupg/pubring.kbx", false, Deny),
            (".netrc", false, Deny),
            (".npmrc", false, Deny),
            (".pypirc", false, Deny),
            ("secrets/db.txt", false, Deny),
            ("secrets", false, Allow),
            ("secrets-backup/db.txt", false, Allow),
            (".git/config", false, Allow),
            ("README.md", false, Allow),
        ],
    );
}

#[test]
fn allow_list_policy() {
    let p = load("allow-list.toml");
    expect(
        &p,
        &[
            ("src", true, Allow),
            ("src/main.rs", false, Allow),
            ("src/a/b/c.rs", false, Allow),
            ("src/.env", false, Deny),
            ("src/keys/dev.pem", false, Deny),
            ("tests/it.rs", false, Allow),
            ("Cargo.toml", false, Allow),
            ("Cargo.lock", false, Allow),
            ("README.md", false, Allow),
            ("target", true, Deny),
            ("target/debug/veilfs", false, Deny),
            (".git", true, Deny),
            (".env", false, Deny),
            ("docs/index.md", false, Deny),
            ("sub/Cargo.toml", false, Deny),
        ],
    );
}

#[test]
fn git_read_only_policy() {
    let p = load("git-read-only.toml");
    expect(
        &p,
        &[
            (".git", true, ReadOnly),
            (".git/config", false, ReadOnly),
            (".git/hooks/pre-commit", false, ReadOnly),
            (".gitmodules", false, ReadOnly),
            (".gitignore", false, Allow),
            ("src/lib.rs", false, Allow),
            (".env", false, Deny),
            (".env.example", false, Allow),
            ("secrets/x", false, Deny),
        ],
    );
}

#[test]
fn monorepo_policy() {
    let p = load("monorepo.toml");
    expect(
        &p,
        &[
            ("services/web/src/app.ts", false, Allow),
            ("services/web/migrations/001.sql", false, ReadOnly),
            ("services/payments", true, Deny),
            ("services/payments/README.md", false, Deny),
            ("services/payments-ui/app.ts", false, Allow),
            ("vendor/lib/x.go", false, ReadOnly),
            ("third_party/zlib/zlib.h", false, ReadOnly),
            ("api/generated/client.ts", false, ReadOnly),
            ("infra/prod/eu/vars.tfvars", false, Deny),
            ("infra/prod/main.tf", false, Allow),
            ("infra/state/prod.tfstate", false, Deny),
            ("services/web/.env", false, Deny),
            ("services/web/.env.example", false, Allow),
            ("vendor/x/.env", false, Deny),
        ],
    );
}

#[test]
fn print_default_is_the_shipped_default_toml() {
    let out = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["check", "--print-default"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let shipped =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("policy-examples/default.toml"))
            .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&shipped)
    );
}
