//! The built-in default policy as a table: what tools create or download stays
//! usable (dependency trees, caches, CA bundles, test fixtures), and what a person
//! keeps in their own tree stays denied, inside those trees too when it is more than
//! a key file. One named test per row; a failure prints the decision's reason.

use veilfs::{Action, Policy};

fn check(path: &str, is_dir: bool, want: Action) {
    let p = Policy::builtin();
    let d = p.decide(path.as_bytes(), is_dir);
    assert_eq!(
        d.action,
        want,
        "{path} ({}) decided {} because {}",
        if is_dir { "dir" } else { "file" },
        d.action,
        d.why()
    );
}

macro_rules! table {
    ($($name:ident: $path:expr, $kind:ident => $action:ident;)*) => {
        $(
            #[test]
            fn $name() {
                check($path, stringify!($kind) == "dir", Action::$action);
            }
        )*
    };
}

table! {
    // Tools' trees: key and certificate files in them are allowed.
    pip_vendored_ca_bundle: ".venv/lib/python3.11/site-packages/pip/_vendor/certifi/cacert.pem", file => Allow;
    certifi_ca_bundle: "venv/lib/python3.12/site-packages/certifi/cacert.pem", file => Allow;
    any_venv_site_packages_key: "env/lib/python3/site-packages/tornado/test/test.key", file => Allow;
    debian_dist_packages: "usr/lib/python3/dist-packages/certifi/cacert.pem", file => Allow;
    tox_env_key: ".tox/py311/lib/x/server.pem", file => Allow;
    node_module_pem: "node_modules/pkg/certs/server.pem", file => Allow;
    nested_node_module_key: "web/node_modules/@scope/pkg/keys/agent.key", file => Allow;
    node_module_ssh_fixture: "node_modules/ssh2/test/fixtures/id_rsa", file => Allow;
    vendored_crate_pem: "vendor/rustls/tests/data/ca.pem", file => Allow;
    cargo_registry_key: ".cargo/registry/src/index.crates.io-1/x-1.0/tests/key.pem", file => Allow;
    go_module_cache_key: "go/pkg/mod/golang.org/x/crypto@v0/testdata/id_ed25519", file => Allow;
    ca_bundle_anywhere: "certs/cacert.pem", file => Allow;
    ca_bundle_named: "ca-bundle.pem", file => Allow;
    // Test fixtures of a (cloned) repository.
    fixture_pem: "tests/fixtures/server.pem", file => Allow;
    fixture_key: "tests/fixtures/client.key", file => Allow;
    test_dir_key: "test/keys/agent1-key.pem", file => Allow;
    go_testdata_key: "pkg/tls/testdata/id_ed25519", file => Allow;
    jest_fixture: "src/__fixtures__/cert.p12", file => Allow;
    clone_fixture: "clone/tests/fixtures/server.pem", file => Allow;
    public_key: "id_ed25519.pub", file => Allow;
    env_template: ".env.example", file => Allow;

    // The person's own tree: still denied.
    own_env: ".env", file => Deny;
    own_env_local: ".env.local", file => Deny;
    own_envrc: ".envrc", file => Deny;
    own_ssh_key: "id_ed25519", file => Deny;
    own_rsa_key: "keys/id_rsa", file => Deny;
    own_prod_key: "deploy/prod.key", file => Deny;
    own_pem: "server.pem", file => Deny;
    own_certs_dir_key: "certs/site.key", file => Deny;
    own_secrets_dir: "secrets", dir => Deny;
    own_secret_file: "secrets/token", file => Deny;
    own_ssh_dir: ".ssh", dir => Deny;
    own_aws_credentials: ".aws/credentials", file => Deny;
    own_npmrc: ".npmrc", file => Deny;
    own_netrc: ".netrc", file => Deny;
    own_tfstate: "infra/terraform.tfstate", file => Deny;
    own_tfvars: "infra/terraform.tfvars", file => Deny;
    own_tfvars_json: "infra/prod.auto.tfvars.json", file => Deny;
    env_backup_tilde: ".env~", file => Deny;
    env_backup_emacs: "#.env#", file => Deny;
    env_lock_emacs: ".#.env", file => Deny;
    envrc_backup: ".envrc.bak", file => Deny;
    key_backup_tilde: "server.key~", file => Deny;
    key_backup_bak: "deploy/prod.key.bak", file => Deny;
    credentials_backup: ".git-credentials~", file => Deny;
    netrc_backup: ".netrc.old", file => Deny;
    own_keystore: "android/release.keystore", file => Deny;
    // Build output is made from your files: not exempt.
    build_output_key: "target/debug/prod.key", file => Deny;

    // Inside tools' trees and fixtures, what is more than a key file stays denied.
    env_in_node_modules: "node_modules/pkg/.env", file => Deny;
    env_in_venv: ".venv/.env", file => Deny;
    env_in_fixtures: "tests/fixtures/.env", file => Deny;
    npmrc_in_node_modules: "node_modules/pkg/.npmrc", file => Deny;
    netrc_in_vendor: "vendor/x/.netrc", file => Deny;
    secrets_dir_in_node_modules: "node_modules/pkg/secrets", dir => Deny;
    key_in_secrets_under_tests: "tests/secrets/a.pem", file => Deny;
    key_in_ssh_under_vendor: "vendor/.ssh/id_rsa", file => Deny;
    tfstate_in_fixtures: "tests/fixtures/x.tfstate", file => Deny;
    kdbx_in_node_modules: "node_modules/x/db.kdbx", file => Deny;
    // A name that only looks like a tools' tree.
    vendor_like_name: "vendors/prod.key", file => Deny;
    tests_like_name: "latest/prod.key", file => Deny;
}

/// Every exemption from a deny says why it is there, in words `explain` prints.
#[test]
fn each_exemption_says_why() {
    let p = Policy::builtin();
    for (path, says) in [
        ("node_modules/a/x.pem", "dependency tree"),
        (
            ".venv/lib/python3.11/site-packages/pip/_vendor/certifi/cacert.pem",
            "dependency tree",
        ),
        ("cacert.pem", "CA certificate bundle"),
        ("tests/fixtures/server.pem", "test fixture"),
        (".env.example", "template"),
    ] {
        let why = p.decide(path.as_bytes(), false).why();
        assert!(why.contains(says), "{path}: {why}");
    }
    let why = p.decide(b"deploy/prod.key", false).why();
    assert!(why.contains("rule 1 \"*.key\""), "{why}");
    assert!(why.contains("secrets and credentials"), "{why}");
}
