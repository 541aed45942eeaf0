//! The built-in home policy hides credentials by class (issue 29, part 3): every
//! entry with its backup copies (`~`, `.bak`, `.old`, `.orig`, `.save`, `.swp`,
//! vim's `.NAME.swp` and emacs's `#NAME#` beside a file; the same suffixes on a
//! directory's name, `~/.aws.bak/credentials`), shell histories by each shell's own
//! rules (every `HISTFILE` default, XDG places, history databases), and the
//! credentials of cloud and hosting CLIs, package registries, databases, mail,
//! chat and browsers, password managers and the X session.
//!
//! The rows are one table, [`group`]: one row per place (realistic names), each
//! with its copies made here by the rule above (not by veilfs's own code). Each
//! group is decided in-process by the built-in home policy (milliseconds); then
//! every row and every copy is planted in a fake home and read through a real
//! `veilfs run`: `EACCES` when named, absent from its directory's listing, and the
//! real file unchanged. Rows that must stay readable (start-up files, an agent's
//! own login, toolchain caches) are checked both ways too, so nothing is
//! over-hidden; and every deny pattern of the built-in home file is planted by
//! some row, so a new entry cannot go untested.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::require_fuse;
use common::run::{show, text};
use veilfs::{Action, Policy};

/// One place planted in: the member a policy entry names (relative to the home
/// directory) and a file in it ("" when the member is the file).
#[derive(Clone, Debug)]
struct Row {
    member: String,
    file: String,
}

impl Row {
    fn new(member: &str, file: &str) -> Row {
        Row {
            member: member.to_string(),
            file: file.to_string(),
        }
    }

    /// The planted file, relative to the home directory.
    fn target(&self) -> String {
        if self.file.is_empty() {
            self.member.clone()
        } else {
            format!("{}/{}", self.member, self.file)
        }
    }

    /// The same place under the member's backup copies: its name with each of
    /// [`SUFFIXES`], and where the member is a file, vim's swap file and emacs's
    /// auto-save file beside it.
    fn copies(&self) -> Vec<Row> {
        let (dir, name) = match self.member.rfind('/') {
            Some(i) => self.member.split_at(i + 1),
            None => ("", self.member.as_str()),
        };
        let mut names: Vec<String> = SUFFIXES.iter().map(|s| format!("{name}{s}")).collect();
        if self.file.is_empty() {
            if !name.starts_with('.') {
                names.push(format!(".{name}.swp"));
            }
            names.push(format!("#{name}#"));
        }
        names
            .into_iter()
            .map(|n| Row {
                member: format!("{dir}{n}"),
                file: self.file.clone(),
            })
            .collect()
    }
}

/// What people and their editors append to a name when they copy it.
const SUFFIXES: &[&str] = &["~", ".bak", ".old", ".orig", ".save", ".swp"];

/// `(member, file)` pairs as rows.
fn rows(pairs: &[(&str, &str)]) -> Vec<Row> {
    pairs.iter().map(|&(m, f)| Row::new(m, f)).collect()
}

/// `file` in each of `names` under `prefix`.
fn each(prefix: &str, names: &[&str], file: &str) -> Vec<Row> {
    names
        .iter()
        .map(|n| Row::new(&format!("{prefix}{n}"), file))
        .collect()
}

const KEYS: &[(&str, &str)] = &[
    (".ssh", "id_ed25519"),
    (".ssh", "config"),
    (".gnupg", "private-keys-v1.d/3F2A.key"),
    (".local/share/gnupg", "pubring.kbx"),
    (".password-store", "email/work.gpg"),
    (".local/share/password-store", "bank.gpg"),
    (".local/share/gopass", "stores/root/site.gpg"),
    (".passage", "identities"),
    (".local/share/keyrings", "login.keyring"),
    (".local/share/kwalletd", "kdewallet.kwl"),
    (".kde/share/apps/kwallet", "kdewallet.kwl"),
    (".kde4/share/apps/kwallet", "kdewallet.kwl"),
    (".pki", "nssdb/key4.db"),
    (".local/share/python_keyring", "keyring_pass.cfg"),
];

const PASSWORD_MANAGERS: &[(&str, &str)] = &[
    (".config/op", "config"),
    (".config/1Password", "1password.sqlite"),
    (".config/Bitwarden CLI", "data.json"),
    (".config/Bitwarden", "data.json"),
    (".local/share/rbw", "device_id"),
    (".cache/rbw", "default.json"),
    (".local/share/lpass", "blob"),
    (".config/lpass", "session_privatekey"),
    (".lpass", "blob"),
];

const SESSION_COOKIES: &[(&str, &str)] = &[
    (".Xauthority", ""),
    (".ICEauthority", ""),
    (".config/pulse/cookie", ""),
    (".pulse-cookie", ""),
];

const CLOUD: &[(&str, &str)] = &[
    (".aws", "credentials"),
    (".aws", "sso/cache/abc.json"),
    (".config/aws", "credentials"),
    (".awsvault", "keys/default"),
    (".azure", "msal_token_cache.json"),
    (".config/azure", "msal_token_cache.json"),
    (".config/gcloud", "application_default_credentials.json"),
    (".oci", "config"),
    (".config/doctl", "config.yaml"),
    (".config/linode-cli", ""),
    (".linode-cli", ""),
    (".config/hcloud", "cli.toml"),
    (".config/scw", "config.yaml"),
    (".bluemix", "config.json"),
    (".aliyun", "config.json"),
    (".config/exoscale", "exoscale.toml"),
    (".config/openstack", "clouds.yaml"),
    (".talos", "config"),
    (".rancher", "cli2.json"),
    (".config/argocd", "config"),
];

const CLUSTERS: &[(&str, &str)] = &[
    (".kube", "config"),
    (".config/kube", "config"),
    (".config/helm", "registry/config.json"),
    (".docker", "config.json"),
    (".config/docker", "config.json"),
    (".dockercfg", ""),
    (".config/containers/auth.json", ""),
    (".terraform.d/credentials.tfrc.json", ""),
    (".terraformrc", ""),
    (".pulumi/credentials.json", ""),
    (".vault-token", ""),
    (".chef/credentials", ""),
];

const HOSTING: &[(&str, &str)] = &[
    (".fly", "config.yml"),
    (".local/share/com.vercel.cli", "auth.json"),
    (".vercel", "auth.json"),
    (".now", "auth.json"),
    (".config/netlify", "config.json"),
    (".netlify", "config.json"),
    (".railway", "config.json"),
    (".render", "cli.yaml"),
    (".config/.wrangler", "config/default.toml"),
    (".wrangler", "config/default.toml"),
    (".supabase", "access-token"),
    (".config/configstore", "firebase-tools.json"),
    (".config/configstore", "snyk.json"),
    (".doppler", ".doppler.yaml"),
    (".config/stripe", "config.toml"),
    (".config/ngrok", "ngrok.yml"),
    (".ngrok2", "ngrok.yml"),
    (".circleci", "cli.yml"),
    (".travis", "config.yml"),
    (".sentryclirc", ""),
    (".wakatime.cfg", ""),
];

const FORGES: &[(&str, &str)] = &[
    (".netrc", ""),
    (".git-credentials", ""),
    (".config/git/credentials", ""),
    (".git-credential-cache", "socket"),
    (".cache/git/credential", "socket"),
    (".gcm", "store/git/https/github.com/me.credential"),
    (".config/gh/hosts.yml", ""),
    (".config/glab-cli", "config.yml"),
    (".config/tea", "config.yml"),
    (".config/hub", ""),
    (".gist", ""),
    (
        ".subversion/auth",
        "svn.simple/5671adf2865e267db74f09ba6f872c28",
    ),
];

const REGISTRIES: &[(&str, &str)] = &[
    (".npmrc", ""),
    (".config/npm/npmrc", ""),
    (".yarnrc", ""),
    (".yarnrc.yml", ""),
    (".config/pnpm/rc", ""),
    (".bunfig.toml", ""),
    (".pypirc", ""),
    (".pip/pip.conf", ""),
    (".config/pip/pip.conf", ""),
    (".config/pypoetry/auth.toml", ""),
    (".local/share/uv/credentials", "credentials.toml"),
    (".condarc", ""),
    (".conda/.condarc", ""),
    (".conda/condarc", ""),
    (".config/conda/condarc", ""),
    (
        ".continuum",
        "anaconda-client/tokens/api.anaconda.org.token",
    ),
    (".cargo/credentials.toml", ""),
    (".cargo/credentials", ""),
    (".local/share/cargo/credentials.toml", ""),
    (".gem/credentials", ""),
    (".local/share/gem/credentials", ""),
    (".bundle/config", ""),
    (".composer/auth.json", ""),
    (".config/composer/auth.json", ""),
    (".nuget/NuGet/NuGet.Config", ""),
    (".config/NuGet/NuGet.Config", ""),
    (".m2/settings.xml", ""),
    (".m2/settings-security.xml", ""),
    (".gradle/gradle.properties", ""),
    (".local/share/gradle/gradle.properties", ""),
    (".config/dart/pub-credentials.json", ""),
    (".config/dart/pub-tokens.json", ""),
    (".pub-cache/credentials.json", ""),
    (".hex/hex.config", ""),
    (".config/hex/hex.config", ""),
    (".julia/servers", "pkg.julialang.org/auth.toml"),
    (".jfrog", "jfrog-cli.conf.v6"),
];

const DATABASES: &[(&str, &str)] = &[
    (".pgpass", ""),
    (".pg_service.conf", ""),
    (".my.cnf", ""),
    (".mylogin.cnf", ""),
    (".mongodb", "mongosh/mongosh_repl_history"),
    (".dbshell", ""),
    (".cassandra", "cqlshrc"),
    (".influxdbv2/configs", ""),
    (
        ".local/share/DBeaverData/workspace6/General/.dbeaver/credentials-config.json",
        "",
    ),
    (".3T", "robo-3t/1.4.4/robo3t.json"),
    (".config/MongoDB Compass", "Connections/local.json"),
    (".dbvis", "config70/dbvis.xml"),
    (".squirrel-sql", "SQLAliases23.xml"),
    (
        ".sqldeveloper",
        "system19.2/o.jdeveloper.db.connection/connections.xml",
    ),
];

const STORAGE: &[(&str, &str)] = &[
    (".s3cfg", ""),
    (".boto", ""),
    (".passwd-s3fs", ""),
    (".mc/config.json", ""),
    (".config/rclone", "rclone.conf"),
    (".b2_account_info", ""),
    (".config/b2", "account_info"),
    (".config/borg/keys", "home_me_backup"),
];

const MAIL: &[(&str, &str)] = &[
    (".msmtprc", ""),
    (".config/msmtp/config", ""),
    (".fetchmailrc", ""),
    (".offlineimaprc", ""),
    (".config/offlineimap/config", ""),
    (".mbsyncrc", ""),
    (".config/isyncrc", ""),
    (".getmail", "getmailrc"),
    (".config/getmail", "getmailrc"),
    (".esmtprc", ""),
    (".config/aerc/accounts.conf", ""),
    (".config/himalaya", "config.toml"),
    (".muttrc", ""),
    (".mutt", "muttrc"),
    (".config/mutt", "muttrc"),
    (".neomuttrc", ""),
    (".config/neomutt", "neomuttrc"),
    (".claws-mail", "passwordstorerc"),
    (".authinfo", ""),
    (".authinfo.gpg", ""),
];

const REMOTE: &[(&str, &str)] = &[
    (".vnc/passwd", ""),
    (".config/filezilla", "sitemanager.xml"),
    (".filezilla", "recentservers.xml"),
    (".gftp", "bookmarks"),
    (
        ".ApacheDirectoryStudio",
        ".metadata/.plugins/org.apache.directory.studio.connection.core/connections.xml",
    ),
    (".config/remmina", "remmina.pref"),
    (".local/share/remmina", "group_rdp_work.remmina"),
];

const CHAT_CLIENTS: &[(&str, &str)] = &[
    (".purple", "accounts.xml"),
    (".xchat2", "servlist_.conf"),
    (".config/hexchat", "servlist.conf"),
    (".irssi/config", ""),
    (".config/psi/profiles", "default/accounts.xml"),
    (".local/psi+/profiles", "default/accounts.xml"),
    (".weechat/sec.conf", ""),
    (".config/weechat/irc.conf", ""),
    (".recon-ng/keys.db", ""),
    (".trc", ""),
    (".tugboat", ""),
];

const TOOL_TOKENS: &[(&str, &str)] = &[
    (".config/sops", "age/keys.txt"),
    (".config/github-copilot", "apps.json"),
    (".kaggle", "kaggle.json"),
    (".databrickscfg", ""),
    (".cache/huggingface/token", ""),
    (".cache/huggingface/stored_tokens", ""),
    (".huggingface/token", ""),
    (".config/io.datasette.llm/keys.json", ""),
    (".config/keybase", "config.json"),
    (".local/share/keybase", "device_eks/1.ek"),
];

const SHELL_HISTORIES: &[(&str, &str)] = &[
    (".bash_history", ""),
    (".bash_eternal_history", ""),
    (".zsh_history", ""),
    (".zhistory", ""),
    (".histfile", ""),
    (".config/zsh/.zsh_history", ""),
    (".config/zsh/.zhistory", ""),
    (".config/zsh/.histfile", ""),
    (".zsh_history.new", ""),
    (".sh_history", ""),
    (".mksh_history", ""),
    (".history", ""),
    (".zsh_sessions", "A1B2C3.history"),
    (".local/share/fish/fish_history", ""),
    (".local/share/fish/work_history", ""),
    (".config/fish/fish_history", ""),
    (".config/nushell/history.txt", ""),
    (".config/nushell/history.sqlite3", ""),
    (".local/share/xonsh", "xonsh-1f2e.json"),
    (
        ".local/share/powershell/PSReadLine",
        "ConsoleHost_history.txt",
    ),
    (".local/share/atuin", "history.db"),
    (".local/share/atuin", "key"),
    (".local/share/mcfly", "history.db"),
    (".mcfly", "history.db"),
    (".local/share/mc/history", ""),
];

const XDG_HISTORIES: &[(&str, &str)] = &[
    (".local/state/bash/history", ""),
    (".local/state/zsh/history", ""),
    (".cache/zsh/history", ""),
    (".local/share/zsh/history", ""),
    (".local/state/python_history", ""),
    (".local/state/node_repl_history", ""),
    (".local/state/psql_history", ""),
    (".local/share/mysql_history", ""),
    (".local/state/sqlite_history", ""),
    (".local/share/redis/rediscli_history", ""),
    (".local/state/R/history", ""),
    (".local/state/gdb/history", ""),
    (".local/state/lesshst", ""),
    (".local/share/lesshst", ""),
    (".local/state/vim/viminfo", ""),
];

const REPL_HISTORIES: &[(&str, &str)] = &[
    (".python_history", ""),
    (".node_repl_history", ""),
    (".psql_history", ""),
    (".psql_history-orders", ""),
    (".mysql_history", ""),
    (".sqlite_history", ""),
    (".rediscli_history", ""),
    (".irb_history", ""),
    (".pry_history", ""),
    (".gdb_history", ""),
    (".config/irb/irb_history", ""),
    (".local/share/pry/pry_history", ""),
    (".ipython/profile_default/history.sqlite", ""),
    (".ipython/profile_work/history.sqlite", ""),
    (".julia/logs/repl_history.jl", ""),
    (".Rhistory", ""),
    ("projects/analysis/.Rhistory", ""),
    (".ghc/ghci_history", ""),
    (".local/share/ghc/ghci_history", ""),
    (".octave_hist", ""),
    (".mysqlsh/history", ""),
    (".config/pgcli/history", ""),
    (".mycli-history", ""),
    (".lesshst", ""),
    (".viminfo", ""),
    (".local/state/nvim/shada", "main.shada"),
    (".local/share/nvim/shada", "main.shada"),
];

/// The Chromium family's profile directories, `~/.config/NAME`.
const CHROMIUM_FAMILY: &[&str] = &[
    "google-chrome",
    "google-chrome-beta",
    "google-chrome-unstable",
    "chromium",
    "BraveSoftware",
    "microsoft-edge",
    "microsoft-edge-beta",
    "microsoft-edge-dev",
    "vivaldi",
    "vivaldi-snapshot",
    "opera",
    "opera-beta",
    "opera-developer",
    "yandex-browser",
    "slimjet",
];

const OTHER_BROWSERS: &[(&str, &str)] = &[
    (".mozilla", "firefox/x1y2.default-release/logins.json"),
    (".mozilla", "firefox/x1y2.default-release/cookies.sqlite"),
    (".librewolf", "x1y2.default/cookies.sqlite"),
    (".waterfox", "x1y2.default/key4.db"),
    (".floorp", "x1y2.default/logins.json"),
    (".zen", "x1y2.Default (release)/cookies.sqlite"),
    (".config/epiphany", "cookies.sqlite"),
    (".local/share/epiphany", "cookies.sqlite"),
    (".local/share/qutebrowser", "webengine/Cookies"),
    (".config/falkon", "profiles/default/browsedata.db"),
    (".opera", "wand.dat"),
    (".thunderbird", "x1y2.default/logins.json"),
];

const CHAT_APPS: &[(&str, &str)] = &[
    (".config/Slack", "Cookies"),
    (".config/discord", "Local Storage/leveldb/000003.log"),
    (".config/discordcanary", "Local Storage/leveldb/000003.log"),
    (".config/discordptb", "Local Storage/leveldb/000003.log"),
    (".config/Microsoft/Microsoft Teams", "Cookies"),
    (".config/teams-for-linux", "Cookies"),
    (".config/Signal", "config.json"),
    (".config/Signal Beta", "config.json"),
    (".local/share/TelegramDesktop", "tdata/key_datas"),
    (".config/Element", "Local Storage/leveldb/000003.log"),
    (
        ".config/Element-Nightly",
        "Local Storage/leveldb/000003.log",
    ),
    (".config/Riot", "Local Storage/leveldb/000003.log"),
    (".config/Mattermost", "Cookies"),
];

/// The snaps whose data directory (`~/snap/NAME`) holds a profile.
const SNAPS: &[&str] = &[
    "firefox",
    "chromium",
    "brave",
    "thunderbird",
    "slack",
    "discord",
    "signal-desktop",
    "telegram-desktop",
    "element-desktop",
    "bitwarden",
    "mattermost-desktop",
];

/// The flatpaks whose data directory (`~/.var/app/ID`) holds a profile.
const FLATPAKS: &[&str] = &[
    "org.mozilla.firefox",
    "org.mozilla.Thunderbird",
    "io.gitlab.librewolf-community",
    "com.google.Chrome",
    "org.chromium.Chromium",
    "com.brave.Browser",
    "com.microsoft.Edge",
    "com.vivaldi.Vivaldi",
    "com.opera.Opera",
    "com.slack.Slack",
    "com.discordapp.Discord",
    "org.signal.Signal",
    "org.telegram.desktop",
    "im.riot.Riot",
    "com.bitwarden.desktop",
    "com.mattermost.Desktop",
];

/// The groups, by name.
const GROUPS: &[&str] = &[
    "keys",
    "password_managers",
    "session_cookies",
    "cloud",
    "clusters",
    "hosting",
    "forges",
    "registries",
    "databases",
    "storage",
    "mail",
    "remote",
    "chat_clients",
    "tool_tokens",
    "shell_histories",
    "xdg_histories",
    "repl_histories",
    "browsers",
    "chat_apps",
    "snaps_and_flatpaks",
];

/// The rows of the group `name` (one of [`GROUPS`]), without their copies.
fn group(name: &str) -> Vec<Row> {
    match name {
        "keys" => rows(KEYS),
        "password_managers" => rows(PASSWORD_MANAGERS),
        "session_cookies" => rows(SESSION_COOKIES),
        "cloud" => rows(CLOUD),
        "clusters" => rows(CLUSTERS),
        "hosting" => rows(HOSTING),
        "forges" => rows(FORGES),
        "registries" => rows(REGISTRIES),
        "databases" => rows(DATABASES),
        "storage" => rows(STORAGE),
        "mail" => rows(MAIL),
        "remote" => rows(REMOTE),
        "chat_clients" => rows(CHAT_CLIENTS),
        "tool_tokens" => rows(TOOL_TOKENS),
        "shell_histories" => rows(SHELL_HISTORIES),
        "xdg_histories" => rows(XDG_HISTORIES),
        "repl_histories" => rows(REPL_HISTORIES),
        "browsers" => {
            let mut r = each(".config/", CHROMIUM_FAMILY, "Default/Login Data");
            r.extend(rows(OTHER_BROWSERS));
            r
        }
        "chat_apps" => rows(CHAT_APPS),
        "snaps_and_flatpaks" => {
            let mut r = each("snap/", SNAPS, "common/profile/cookies.sqlite");
            r.extend(each(".var/app/", FLATPAKS, "config/profile/Cookies"));
            r
        }
        _ => panic!("no group {name}"),
    }
}

/// Every row of `name` and each row's copies.
fn with_copies(name: &str) -> Vec<Row> {
    group(name)
        .into_iter()
        .flat_map(|r| {
            let copies = r.copies();
            std::iter::once(r).chain(copies)
        })
        .collect()
}

/// Every row of every group, with the copies.
fn all_rows() -> Vec<Row> {
    GROUPS.iter().flat_map(|g| with_copies(g)).collect()
}

// ---------------------------------------------------------------------------
// In-process: the built-in home policy decides each row, and each copy, denied.

/// The built-in home policy, compiled once for every in-process test.
fn home_policy() -> &'static Policy {
    static P: OnceLock<Policy> = OnceLock::new();
    P.get_or_init(Policy::builtin_home)
}

/// The member (as a directory where a file is planted in it) and the planted file
/// are denied, for every row of the group and every copy.
fn decides_denied(group_name: &str) {
    let p = home_policy();
    let mut wrong = Vec::new();
    for row in with_copies(group_name) {
        let mut checks = vec![(row.member.clone(), !row.file.is_empty())];
        if !row.file.is_empty() {
            checks.push((row.target(), false));
        }
        for (path, is_dir) in checks {
            let d = p.decide(path.as_bytes(), is_dir);
            if d.action != Action::Deny {
                wrong.push(format!("~/{path}: {} ({})", d.action, d.why()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{group_name}: not denied ({} of {}):\n{}",
        wrong.len(),
        with_copies(group_name).len(),
        wrong.join("\n")
    );
}

macro_rules! denied_group {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                decides_denied(stringify!($name));
            }
        )*
        #[test]
        fn every_group_has_a_test() {
            assert_eq!(GROUPS, [$(stringify!($name)),*]);
        }
    };
}

denied_group!(
    keys,
    password_managers,
    session_cookies,
    cloud,
    clusters,
    hosting,
    forges,
    registries,
    databases,
    storage,
    mail,
    remote,
    chat_clients,
    tool_tokens,
    shell_histories,
    xdg_histories,
    repl_histories,
    browsers,
    chat_apps,
    snaps_and_flatpaks,
);

/// The copies that were readable on the old default (issue 29), by name.
macro_rules! copy_denied {
    ($($name:ident: $path:expr;)*) => {
        $(
            #[test]
            fn $name() {
                let d = home_policy().decide($path.as_bytes(), false);
                assert_eq!(d.action, Action::Deny, "~/{}: {}", $path, d.why());
            }
        )*
    };
}

copy_denied! {
    vault_token_tilde: ".vault-token~";
    aws_bak_credentials: ".aws.bak/credentials";
    kube_bak_config: ".kube.bak/config";
    kube_old_config: ".kube.old/config";
    ssh_tilde_key: ".ssh~/id_ed25519";
    ssh_orig_config: ".ssh.orig/config";
    bash_history_tilde: ".bash_history~";
    zsh_history_bak: ".zsh_history.bak";
    netrc_swap: ".netrc.swp";
    netrc_second_swap: ".netrc.swo";
    pgpass_emacs_auto_save: "#.pgpass#";
    git_credentials_save: ".git-credentials.save";
    gcloud_old_dir: ".config/gcloud.old/credentials.db";
    docker_config_swap_inside: ".docker/.config.json.swp";
    containers_auth_swap_beside: ".config/containers/.auth.json.swp";
    gh_hosts_auto_save: ".config/gh/#hosts.yml#";
    cargo_credentials_bak: ".cargo/credentials.toml.bak";
    npmrc_orig: ".npmrc.orig";
}

/// What tools and agents need: readable (start-up files read-only, the rest
/// writable), and listed. Near the hidden places on purpose.
macro_rules! stays_readable {
    ($($name:ident: $path:expr => $action:ident;)*) => {
        $(
            #[test]
            fn $name() {
                let d = home_policy().decide($path.as_bytes(), false);
                assert_eq!(d.action, Action::$action, "~/{}: {}", $path, d.why());
            }
        )*
        /// The same paths, for the real run.
        const READABLE: &[&str] = &[$($path),*];
    };
}

stays_readable! {
    bashrc: ".bashrc" => ReadOnly;
    profile: ".profile" => ReadOnly;
    gitconfig: ".gitconfig" => ReadOnly;
    git_config: ".config/git/config" => ReadOnly;
    zdotdir_zshrc: ".config/zsh/.zshrc" => ReadOnly;
    fish_config: ".config/fish/config.fish" => ReadOnly;
    gh_config_beside_hosts: ".config/gh/config.yml" => ReadOnly;
    cargo_config_beside_credentials: ".cargo/config.toml" => ReadOnly;
    claude_settings: ".claude/settings.json" => Allow;
    claude_login: ".claude/.credentials.json" => Allow;
    claude_json: ".claude.json" => Allow;
    claude_json_backup: ".claude.json.backup" => Allow;
    codex_login: ".codex/auth.json" => Allow;
    codex_history: ".codex/history.jsonl" => Allow;
    gemini_settings: ".gemini/settings.json" => Allow;
    cargo_registry: ".cargo/registry/cache/index.crates.io-1949cf8c6b5b557f/serde-1.0.200.crate" => Allow;
    cargo_bin: ".cargo/bin/cargo-nextest" => Allow;
    huggingface_model_cache: ".cache/huggingface/hub/models--gpt2/snapshots/abc/config.json" => Allow;
    pip_cache: ".cache/pip/http-v2/a/b/c" => Allow;
    npm_cache: ".npm/_cacache/index-v5/aa/bb" => Allow;
    uv_pythons: ".local/share/uv/python/cpython-3.12.8-linux-x86_64-gnu/bin/python3" => Allow;
    pnpm_store: ".local/share/pnpm/store/v3/files/00/abc" => Allow;
    maven_repository: ".m2/repository/org/slf4j/slf4j-api/2.0.0/slf4j-api-2.0.0.jar" => Allow;
    gradle_caches: ".gradle/caches/modules-2/files-2.1/x/y.jar" => Allow;
    pub_cache_packages: ".pub-cache/hosted/pub.dev/path-1.9.0/lib/path.dart" => Allow;
    julia_packages: ".julia/packages/JSON/abc/src/JSON.jl" => Allow;
    podman_registries: ".config/containers/registries.conf" => Allow;
    atuin_config: ".config/atuin/config.toml" => Allow;
    nushell_config: ".config/nushell/config.nu" => ReadOnly;
    // What start-up lines source or run: readable, never planted (attacker pass).
    pyenv_bin: ".pyenv/bin/pyenv" => ReadOnly;
    pyenv_versions: ".pyenv/versions/3.12.1/bin/python" => Allow;
    uv_env: ".local/bin/env" => ReadOnly;
    tmux_plugin_manager: ".tmux/plugins/tpm/tpm" => ReadOnly;
    p10k_instant_prompt: ".cache/p10k-instant-prompt-me.zsh" => ReadOnly;
    conda_hook: "miniconda3/etc/profile.d/conda.sh" => ReadOnly;
    conda_packages: "miniconda3/pkgs/numpy-1.0/info/index.json" => Allow;
    sdkman_init: ".sdkman/bin/sdkman-init.sh" => ReadOnly;
    jj_config: ".config/jj/config.toml" => ReadOnly;
    wezterm_config: ".wezterm.lua" => ReadOnly;
    kitty_config: ".config/kitty/kitty.conf" => ReadOnly;
    xonsh_rc: ".xonshrc" => ReadOnly;
    mise_config: ".config/mise/config.toml" => ReadOnly;
    lazygit_config: ".config/lazygit/config.yml" => ReadOnly;
    fish_completions: ".local/share/fish/generated_completions/git.fish" => Allow;
    fish_variables: ".local/share/fish/fish_variables" => Allow;
    zsh_completion_cache: ".cache/zsh/zcompcache/git" => Allow;
    nvim_swap_of_a_project_file: ".local/state/nvim/swap/%home%me%proj%a.txt.swp" => Allow;
    local_bin: ".local/bin/tool" => Allow;
    project_source: "projects/app/src/main.rs" => Allow;
    notes_about_aws: "notes/aws.md" => Allow;
}

/// Every deny pattern of the built-in home file, as written and its copies', is
/// matched by some row (a row's member, its file, or a copy): an entry added to
/// the file without a row here fails this test, not silently.
#[test]
fn every_deny_entry_of_the_home_default_is_planted_by_a_row() {
    let p = home_policy();
    let mut matched: BTreeSet<usize> = BTreeSet::new();
    for row in all_rows() {
        for path in [row.member.clone(), row.target()] {
            matched.extend(p.matching_patterns(path.as_bytes()));
        }
    }
    let missing: Vec<String> = p
        .patterns()
        .iter()
        .enumerate()
        .filter(|(i, q)| {
            q.action == Action::Deny
                && &*q.at.file == veilfs::policy::BUILTIN_HOME_NAME
                && !matched.contains(i)
        })
        .map(|(_, q)| q.to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "deny patterns no row plants:\n{}",
        missing.join("\n")
    );
}

// ---------------------------------------------------------------------------
// A real run.

/// A home directory (`tmp/home`) with the workspace `home/proj`.
struct Home {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
}

/// What a planted file holds: a marker and its own path.
fn content(rel: &str) -> String {
    format!("TOPSECRET-home-classes {rel}\n")
}

impl Home {
    fn new() -> Home {
        require_fuse();
        let tmp = tempfile::Builder::new()
            .prefix("veilfs-home-classes")
            .tempdir()
            .unwrap();
        let home = tmp.path().join("home");
        let ws = home.join("proj");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("a.txt"), "hello\n").unwrap();
        Home {
            _tmp: tmp,
            home,
            ws,
        }
    }

    /// Writes [`content`] at `rel`, making its directories.
    fn plant(&self, rel: &str) {
        let p = self.home.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content(rel)).unwrap();
    }

    /// `veilfs run --quiet -- python3 -c PROBE FILE` from the workspace, `FILE`
    /// holding `member\ttarget` lines; its output is one line per row.
    fn probe(&self, rows: &[(String, String)]) -> Output {
        let list: String = rows.iter().map(|(m, t)| format!("{m}\t{t}\n")).collect();
        std::fs::write(self.ws.join("rows.tsv"), list).unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
            .args(["run", "--quiet", "--", "python3", "-c", PROBE, "rows.tsv"])
            .current_dir(&self.ws)
            .env("HOME", &self.home)
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_STATE_HOME")
            .output()
            .unwrap();
        common::run::assert_not_mounted_outside(&[&self.home, &self.ws]);
        assert!(o.status.success(), "the probe failed:\n{}", show(&o));
        o
    }
}

/// For each `member\ttarget` line of the file `argv[1]` (paths relative to
/// `$HOME`), prints `target | read: R | stat: S | write: W | listed: L | bytes: B`:
/// each an errno name or `OK`, `listed` whether the member's name is in its
/// directory's listing, `bytes` what was read (or `-`).
const PROBE: &str = r#"
import errno, os, sys
home = os.environ["HOME"]
listings = {}

def outcome(f):
    try:
        return "OK", f()
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno)), None

def read(p):
    with open(p, "rb") as f:
        return f.read()

def write(p):
    fd = os.open(p, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, b"planted\n")
    finally:
        os.close(fd)

for line in open(sys.argv[1]):
    member, target = line.rstrip("\n").split("\t")
    m, t = os.path.join(home, member), os.path.join(home, target)
    r, data = outcome(lambda: read(t))
    s, _ = outcome(lambda: os.lstat(t))
    w, _ = outcome(lambda: write(t))
    parent = os.path.dirname(m)
    if parent not in listings:
        listings[parent] = set(outcome(lambda: os.listdir(parent))[1] or [])
    listed = "yes" if os.path.basename(m) in listings[parent] else "no"
    got = "-" if data is None else data.decode(errors="replace").strip()
    print(f"{target} | read: {r} | stat: {s} | write: {w} | listed: {listed} | bytes: {got}")
"#;

/// The probe's line for `target` (without the `target | ` in front), if any.
fn line_of<'a>(out: &'a str, target: &str) -> Option<&'a str> {
    let head = format!("{target} | ");
    out.lines().find_map(|l| l.strip_prefix(&head))
}

/// Every row of every group and every copy, planted: through the run, each is
/// refused with `EACCES` when read, stat'ed or opened for writing, its member is
/// absent from its directory's listing, and the real file is unchanged.
#[test]
fn planted_credentials_and_their_copies_are_refused_and_unlisted() {
    let h = Home::new();
    let rows = all_rows();
    for row in &rows {
        h.plant(&row.target());
    }
    let lines: Vec<(String, String)> = rows
        .iter()
        .map(|r| (r.member.clone(), r.target()))
        .collect();
    let o = h.probe(&lines);
    let out = text(&o.stdout);
    let want = "read: EACCES | stat: EACCES | write: EACCES | listed: no | bytes: -";
    let mut wrong = Vec::new();
    for row in &rows {
        let t = row.target();
        match line_of(&out, &t) {
            Some(got) if got == want => {}
            Some(got) => wrong.push(format!("~/{t}: {got}")),
            None => wrong.push(format!("~/{t}: not probed")),
        }
        let real = std::fs::read_to_string(h.home.join(&t)).unwrap_or_default();
        if real != content(&t) {
            wrong.push(format!("~/{t}: the real file changed: {real:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} not hidden:\n{}\n\n{}",
        wrong.len(),
        rows.len(),
        wrong.join("\n"),
        show(&o)
    );
}

/// What tools and agents need stays readable and listed through the run, beside
/// the hidden places.
#[test]
fn what_tools_need_stays_readable_and_listed() {
    let h = Home::new();
    for rel in READABLE {
        h.plant(rel);
    }
    let lines: Vec<(String, String)> = READABLE
        .iter()
        .map(|r| (r.to_string(), r.to_string()))
        .collect();
    let o = h.probe(&lines);
    let out = text(&o.stdout);
    let mut wrong = Vec::new();
    let want = "read: OK | stat: OK |";
    for rel in READABLE {
        let bytes = format!("| listed: yes | bytes: {}", content(rel).trim());
        match line_of(&out, rel) {
            Some(got) if got.starts_with(want) && got.ends_with(&bytes) => {}
            Some(got) => wrong.push(format!("~/{rel}: {got}")),
            None => wrong.push(format!("~/{rel}: not probed")),
        }
    }
    assert!(
        wrong.is_empty(),
        "not readable:\n{}\n\n{}",
        wrong.join("\n"),
        show(&o)
    );
}
