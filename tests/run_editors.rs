//! `veilfs run` holds what editors run or obey later read-only by family (issue 28,
//! part 3): for every member of the VS Code family (Code, Code - OSS, Code -
//! Insiders, VSCodium, Cursor, Windsurf), in the user directory and every profile,
//! each extension home and each remote server, and for vim and neovim, emacs,
//! JetBrains IDEs, Zed, Sublime and helix, a write planted from inside the run
//! (made, overwritten, renamed into place, linked, moved away) is refused with
//! `EACCES` and the real home directory is unchanged. The directories on the way
//! cannot be replaced by links, a linked or XDG-moved `~/.config` is held the same,
//! and the editors' state stays writable.
//!
//! The rows are one table, [`family`]: one row per member and file, decided first
//! by the built-in home policy in-process (milliseconds), then planted for real.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::require_fuse;
use common::run::{show, text};
use veilfs::{Action, Policy};

/// The VS Code family's configuration directories, `~/.config/NAME`.
const CONFIG_DIRS: &[&str] = &[
    "Code",
    "Code - OSS",
    "Code - Insiders",
    "VSCodium",
    "Cursor",
    "Windsurf",
];

/// Their extension homes, `~/NAME` (extensions, argv.json, the tunnel CLI).
const EXTENSION_HOMES: &[&str] = &[
    ".vscode",
    ".vscode-oss",
    ".vscode-insiders",
    ".cursor",
    ".windsurf",
];

/// Their remote servers' directories, `~/NAME`.
const SERVERS: &[&str] = &[
    ".vscode-server",
    ".vscode-server-insiders",
    ".vscode-server-oss",
    ".vscodium-server",
    ".cursor-server",
    ".windsurf-server",
];

/// What a user directory (`User/` on the desktop, `data/User/` on a server) holds
/// that the editor runs or obeys: (member, file planted in it, "" for the member
/// itself).
const USER_DIR: &[(&str, &str)] = &[
    ("settings.json", ""),
    ("tasks.json", ""),
    ("keybindings.json", ""),
    ("mcp.json", ""),
    ("snippets", "python.json"),
    ("prompts", "review.prompt.md"),
    ("profiles", "1a2b3c4d/settings.json"),
    ("profiles", "1a2b3c4d/tasks.json"),
    ("profiles", "1a2b3c4d/keybindings.json"),
    ("profiles", "1a2b3c4d/mcp.json"),
    ("profiles", "1a2b3c4d/snippets/go.json"),
    ("profiles", "1a2b3c4d/extensions.json"),
];

/// An extension home's members.
const EXTENSION_HOME: &[(&str, &str)] = &[
    ("extensions", "evil.ext-1.0.0/out/extension.js"),
    ("extensions", "extensions.json"),
    ("argv.json", ""),
    ("cli", "servers/Stable-abc123/server/bin/code-server"),
    ("mcp.json", ""),
];

/// A remote server's members, besides its `data/User/`.
const SERVER: &[(&str, &str)] = &[
    ("extensions", "evil.ext-1.0.0/out/extension.js"),
    ("bin", "abc123/bin/code-server"),
    ("cli", "servers/Stable-abc123/server/node"),
    ("code-abc123", ""),
    ("server-env-setup", ""),
    ("data/Machine", "settings.json"),
    ("data/Machine", "mcp.json"),
];

/// The other editors the home policy names: (member, file).
const VIM: &[(&str, &str)] = &[
    (".vimrc", ""),
    (".gvimrc", ""),
    (".exrc", ""),
    (".vim", "plugin/evil.vim"),
    (".vim", "pack/x/start/evil/plugin/evil.vim"),
    (".config/vim", "vimrc"),
    (".config/nvim", "init.lua"),
    (".config/nvim", "lua/plugins/evil.lua"),
    (".config/nvim-kickstart", "init.lua"),
    (
        ".local/share/nvim",
        "site/pack/x/start/evil/plugin/evil.lua",
    ),
    (".local/share/nvim", "lazy/evil.nvim/plugin/evil.lua"),
    (".local/share/nvim", "plugged/evil/plugin/evil.vim"),
    (".local/share/nvim", "mason/bin/lua-language-server"),
    (".local/share/nvim", "sessions/work.vim"),
    (".local/share/nvim-kickstart", "lazy/evil.nvim/init.lua"),
    (".local/state/nvim/sessions", "work.vim"),
];

const EMACS: &[(&str, &str)] = &[
    (".emacs", ""),
    (".emacs.el", ""),
    (".emacs.elc", ""),
    (".emacs.d", "init.el"),
    (".emacs.d", "early-init.el"),
    (".emacs.d", "custom.el"),
    (".emacs.d", "recentf"),
    (".emacs.d", "elpa/evil-1.0/evil-autoloads.el"),
    (".emacs.d", "straight/repos/evil/evil.el"),
    (".emacs.d", "lisp/evil.el"),
    (".config/emacs", "init.el"),
    (".doom.d", "config.el"),
    (".config/doom", "init.el"),
    (".spacemacs", ""),
    (".spacemacs.d", "init.el"),
];

const JETBRAINS: &[(&str, &str)] = &[
    (
        ".config/JetBrains",
        "IntelliJIdea2025.1/options/terminal.xml",
    ),
    (".config/JetBrains", "PyCharm2025.1/pycharm64.vmoptions"),
    (".config/JetBrains", "GoLand2024.3/tools/External Tools.xml"),
    (
        ".config/JetBrains",
        "IdeaIC2023.2/plugins/evil/lib/evil.jar",
    ),
    (
        ".local/share/JetBrains",
        "IntelliJIdea2025.1/evil/lib/evil.jar",
    ),
    (".local/share/JetBrains", "Toolbox/scripts/idea"),
    (
        ".config/Google/AndroidStudio2024.2",
        "options/jdk.table.xml",
    ),
    (
        ".local/share/Google/AndroidStudio2024.2",
        "evil/lib/evil.jar",
    ),
];

const ZED: &[(&str, &str)] = &[
    (".config/zed", "settings.json"),
    (".config/zed", "tasks.json"),
    (".config/zed", "keymap.json"),
    (".config/zed", "debug.json"),
    (
        ".local/share/zed/extensions",
        "installed/evil/extension.toml",
    ),
    (".local/share/zed/languages", "rust-analyzer/rust-analyzer"),
    (".local/share/zed/node", "node-v22.0.0-linux-x64/bin/node"),
    (
        ".local/share/zed/external_agents",
        "claude-code-acp/index.js",
    ),
    (".zed_server", "zed-remote-server-stable-0.200.0"),
];

const SUBLIME: &[(&str, &str)] = &[
    (".config/sublime-text/Packages", "User/evil.py"),
    (
        ".config/sublime-text/Installed Packages",
        "Evil.sublime-package",
    ),
    (".config/sublime-text/Lib", "python38/evil.py"),
    (".config/sublime-text-3/Packages", "User/evil.py"),
    (".config/sublime-merge/Packages", "User/evil.py"),
];

const HELIX: &[(&str, &str)] = &[
    (".config/helix", "config.toml"),
    (".config/helix", "languages.toml"),
    (".config/helix", "runtime/grammars/rust.so"),
];

/// The families, by name.
const FAMILIES: &[&str] = &[
    "vscode_desktop",
    "vscode_extension_homes",
    "vscode_servers",
    "vim_and_neovim",
    "emacs",
    "jetbrains",
    "zed",
    "sublime",
    "helix",
];

/// One place planted in: the member the policy names (relative to the home
/// directory) and a file in it ("" when the member is the file).
#[derive(Clone, Debug)]
struct Row {
    member: String,
    file: &'static str,
}

impl Row {
    /// The planted file, relative to the home directory.
    fn target(&self) -> String {
        if self.file.is_empty() {
            self.member.clone()
        } else {
            format!("{}/{}", self.member, self.file)
        }
    }
}

/// `members` under each of `dirs` (each `prefix` + a name).
fn under<M: AsRef<str>>(dirs: &[&str], prefix: &str, members: &[(M, &'static str)]) -> Vec<Row> {
    let mut rows = Vec::new();
    for d in dirs {
        for (m, file) in members {
            let member = format!("{prefix}{d}/{}", m.as_ref());
            rows.push(Row { member, file });
        }
    }
    rows
}

/// `members` as they are, relative to the home directory.
fn at_home(members: &[(&str, &'static str)]) -> Vec<Row> {
    members
        .iter()
        .map(|&(m, file)| Row {
            member: m.to_string(),
            file,
        })
        .collect()
}

/// [`USER_DIR`] under `dir`.
fn user_dir(dir: &str) -> Vec<(String, &'static str)> {
    USER_DIR
        .iter()
        .map(|&(m, f)| (format!("{dir}/{m}"), f))
        .collect()
}

/// The rows of the family `name` (one of [`FAMILIES`]).
fn family(name: &str) -> Vec<Row> {
    match name {
        "vscode_desktop" => under(CONFIG_DIRS, ".config/", &user_dir("User")),
        "vscode_extension_homes" => under(EXTENSION_HOMES, "", EXTENSION_HOME),
        "vscode_servers" => {
            let mut rows = under(SERVERS, "", SERVER);
            rows.extend(under(SERVERS, "", &user_dir("data/User")));
            rows
        }
        "vim_and_neovim" => at_home(VIM),
        "emacs" => at_home(EMACS),
        "jetbrains" => at_home(JETBRAINS),
        "zed" => at_home(ZED),
        "sublime" => at_home(SUBLIME),
        "helix" => at_home(HELIX),
        _ => panic!("no family {name}"),
    }
}

/// Every row of every family.
fn all_rows() -> Vec<Row> {
    FAMILIES.iter().flat_map(|f| family(f)).collect()
}

// ---------------------------------------------------------------------------
// In-process: the built-in home policy decides each row read-only.

/// Every path from the member down to the planted file is read-only (the member
/// as a directory where a file is planted in it).
fn decides_read_only(family_name: &str) {
    let p = Policy::builtin_home();
    let mut wrong = Vec::new();
    for row in family(family_name) {
        let mut path = row.member.clone();
        let mut checks = vec![(path.clone(), !row.file.is_empty())];
        let segs: Vec<&str> = row.file.split('/').filter(|s| !s.is_empty()).collect();
        for (i, seg) in segs.iter().enumerate() {
            path = format!("{path}/{seg}");
            checks.push((path.clone(), i + 1 < segs.len()));
        }
        for (path, is_dir) in checks {
            let d = p.decide(path.as_bytes(), is_dir);
            if d.action != Action::ReadOnly {
                wrong.push(format!("~/{path}: {} ({})", d.action, d.why()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{family_name}: not read-only:\n{}",
        wrong.join("\n")
    );
}

macro_rules! read_only_family {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                decides_read_only(stringify!($name));
            }
        )*
        #[test]
        fn every_family_has_a_test() {
            assert_eq!(FAMILIES, [$(stringify!($name)),*]);
        }
    };
}

read_only_family!(
    vscode_desktop,
    vscode_extension_homes,
    vscode_servers,
    vim_and_neovim,
    emacs,
    jetbrains,
    zed,
    sublime,
    helix,
);

/// State the editors write as they work, and other tools' directories that look
/// alike: writable.
macro_rules! stays_writable {
    ($($name:ident: $path:expr;)*) => {
        $(
            #[test]
            fn $name() {
                let d = Policy::builtin_home().decide($path.as_bytes(), false);
                assert_eq!(d.action, Action::Allow, "~/{}: {}", $path, d.why());
            }
        )*
        /// The same paths, for the mount test.
        const STATE: &[&str] = &[$($path),*];
    };
}

stays_writable! {
    code_global_storage: ".config/Code/User/globalStorage/state.vscdb";
    cursor_workspace_storage: ".config/Cursor/User/workspaceStorage/abc/state.vscdb";
    vscodium_history: ".config/VSCodium/User/History/x/entries.json";
    code_logs: ".config/Code/logs/20260101/main.log";
    code_cached_data: ".config/Code/CachedData/abc/x.code";
    server_logs: ".vscode-server/data/logs/20260101/remoteagent.log";
    server_global_storage: ".cursor-server/data/User/globalStorage/x/state.json";
    server_workspace_storage: ".vscode-server/data/User/workspaceStorage/abc/state.vscdb";
    nvim_swap: ".local/state/nvim/swap/%proj%a.txt.swp";
    nvim_undo: ".local/state/nvim/undo/%proj%a.txt";
    nvim_log: ".local/state/nvim/log";
    zed_db: ".local/share/zed/db/0-stable/db.sqlite";
    zed_logs: ".local/share/zed/logs/Zed.log";
    sublime_session: ".config/sublime-text/Local/Session.sublime_session";
    sublime_cache: ".config/sublime-text/Cache/x";
    jetbrains_caches: ".cache/JetBrains/IntelliJIdea2025.1/log/idea.log";
    gemini_extensions: ".gemini/extensions/x/gemini-extension.json";
    other_app_config: ".config/SomeApp/User/settings.json";
}

// ---------------------------------------------------------------------------
// Real runs.

/// A home directory (`tmp/home`) with the workspace `home/proj`.
struct Home {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
}

const ORIGINAL: &str = "# original\n";

impl Home {
    fn new() -> Home {
        require_fuse();
        let tmp = tempfile::Builder::new()
            .prefix("veilfs-editors")
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

    /// Writes [`ORIGINAL`] at `rel`, making its directories.
    fn plant(&self, rel: &str) {
        let p = self.home.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, ORIGINAL).unwrap();
    }

    /// `veilfs run --quiet -- python3 -c PROBE MODE ROWS` from the workspace, the
    /// rows (`member\tfile` lines) in a file of the workspace; its output lines are
    /// `member | file | op: OK` or `…: ERRNO`.
    fn probe(&self, mode: &str, rows: &[Row], env: &[(&str, &Path)]) -> Output {
        let list: String = rows
            .iter()
            .map(|r| format!("{}\t{}\n", r.member, r.file))
            .collect();
        std::fs::write(self.ws.join("rows.tsv"), list).unwrap();
        let mut c = Command::new(env!("CARGO_BIN_EXE_veilfs"));
        c.args([
            "run", "--quiet", "--", "python3", "-c", PROBE, mode, "rows.tsv",
        ])
        .current_dir(&self.ws)
        .env("HOME", &self.home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME");
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        common::run::assert_not_mounted_outside(&[&self.home, &self.ws]);
        assert!(o.status.success(), "the probe failed:\n{}", show(&o));
        o
    }
}

/// Plants, under `$HOME`, for each row (`member\tfile` lines in the file `argv[2]`),
/// by the mode `argv[1]`, and prints one line per attempt.
/// * `absent` (the member is not there, its directory is): make the file, rename a
///   prepared copy of the member into place, make a symbolic link at the member.
/// * `present` (the file is there): overwrite it, rename a file onto it, remove
///   it, move the member away, and make a new file beside it.
/// * `ways` (each row is a directory on the way, absent): a link there, a file
///   there, then a directory (allowed).
/// * `moves` (each row is a directory on the way, present): move it away.
/// * `write` (each row a file): write it, making its directories.
const PROBE: &str = r#"
import errno, os, sys
home = os.environ["HOME"]
mode = sys.argv[1]
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[2]) if l.strip()]
scratch = os.path.join(home, ".cache", "veilfs-plant")
os.makedirs(scratch, exist_ok=True)

def attempt(label, f):
    try:
        f()
        print(label + ": OK")
    except OSError as e:
        print(label + ": " + errno.errorcode.get(e.errno, str(e.errno)))

def write_new(p):
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, b"planted\n")
    os.close(fd)

def staged(i, rel):
    p = os.path.join(scratch, str(i), rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write("planted\n")
    return p

def make(target):
    os.makedirs(os.path.dirname(target), exist_ok=True)
    write_new(target)

def rename_into(i, m, file):
    name = os.path.basename(m)
    staged(i, os.path.join(name, file) if file else name)
    os.rename(os.path.join(scratch, str(i), name), m)

def overwrite(target):
    fd = os.open(target, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, b"planted\n")
    os.close(fd)

def write(target):
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "w") as f:
        f.write("changed\n")

for i, (member, file) in enumerate(rows):
    m = os.path.join(home, member)
    target = os.path.join(m, file) if file else m
    row = member + " | " + file + " | "
    if mode == "absent":
        attempt(row + "create", lambda: make(target))
        attempt(row + "rename-into", lambda: rename_into(i, m, file))
        attempt(row + "symlink", lambda: os.symlink("/tmp/veilfs-elsewhere", m))
    elif mode == "present":
        attempt(row + "overwrite", lambda: overwrite(target))
        attempt(row + "rename-onto", lambda: os.rename(staged(i, "x"), target))
        attempt(row + "unlink", lambda: os.unlink(target))
        attempt(row + "move-away", lambda: os.rename(m, m + ".old"))
        if file:
            beside = os.path.join(os.path.dirname(target), "planted-new")
            attempt(row + "create-beside", lambda: write_new(beside))
    elif mode == "ways":
        attempt(row + "symlink", lambda: os.symlink("/tmp/veilfs-elsewhere", m))
        attempt(row + "file", lambda: write_new(m))
        attempt(row + "mkdir", lambda: os.mkdir(m))
    elif mode == "moves":
        attempt(row + "move-away", lambda: os.rename(m, m + ".old"))
    elif mode == "write":
        attempt(row + "write", lambda: write(target))
"#;

/// The attempts of `o` that did not end with `want`, and attempts missing.
fn unexpected(o: &Output, rows: &[Row], ops: &[&str], want: &str) -> Vec<String> {
    let out = text(&o.stdout);
    let mut wrong = Vec::new();
    for row in rows {
        for op in ops {
            if *op == "create-beside" && row.file.is_empty() {
                continue;
            }
            let label = format!("{} | {} | {op}: ", row.member, row.file);
            match out.lines().find_map(|l| l.strip_prefix(&label)) {
                Some(got) if got == want => {}
                Some(got) => wrong.push(format!("~/{} {op}: {got}", row.target())),
                None => wrong.push(format!("~/{} {op}: not attempted", row.target())),
            }
        }
    }
    wrong
}

/// Fails with every wrong attempt and the probe's whole output.
fn assert_all(wrong: Vec<String>, o: &Output, what: &str) {
    assert!(
        wrong.is_empty(),
        "{what}:\n{}\n\n{}",
        wrong.join("\n"),
        show(o)
    );
}

/// Where a row's member is missing: made, renamed into place or linked, it is
/// refused, and nothing of it appears in the real home directory.
#[test]
fn planting_a_missing_member_is_refused() {
    let h = Home::new();
    let rows = all_rows();
    for row in &rows {
        let parent = h.home.join(&row.member);
        std::fs::create_dir_all(parent.parent().unwrap()).unwrap();
    }
    let o = h.probe("absent", &rows, &[]);
    let wrong = unexpected(&o, &rows, &["create", "rename-into", "symlink"], "EACCES");
    assert_all(wrong, &o, "not refused with EACCES");
    let made: Vec<String> = rows
        .iter()
        .filter(|r| h.home.join(&r.member).symlink_metadata().is_ok())
        .map(|r| format!("~/{}", r.member))
        .collect();
    assert!(
        made.is_empty(),
        "made in the real home: {made:?}\n{}",
        show(&o)
    );
}

/// Where a row's file is there: overwritten, replaced by a rename, removed, moved
/// away with its member, or given a new file beside it, it is refused, and the
/// real file is unchanged.
#[test]
fn planting_in_a_present_member_is_refused() {
    let h = Home::new();
    let rows = all_rows();
    for row in &rows {
        h.plant(&row.target());
    }
    let o = h.probe("present", &rows, &[]);
    let ops = [
        "overwrite",
        "rename-onto",
        "unlink",
        "move-away",
        "create-beside",
    ];
    assert_all(
        unexpected(&o, &rows, &ops, "EACCES"),
        &o,
        "not refused with EACCES",
    );
    let mut changed = Vec::new();
    for row in &rows {
        let t = h.home.join(row.target());
        if std::fs::read_to_string(&t).ok().as_deref() != Some(ORIGINAL) {
            changed.push(format!("~/{} changed", row.target()));
        }
        let old = h.home.join(format!("{}.old", row.member));
        if old.symlink_metadata().is_ok() {
            changed.push(format!("~/{}.old made", row.member));
        }
        let beside = t.parent().unwrap().join("planted-new");
        if beside.exists() {
            changed.push(format!("{} made", beside.display()));
        }
    }
    assert!(changed.is_empty(), "{}\n{}", changed.join("\n"), show(&o));
}

/// The directories on the way to the VS Code family's members (a product's
/// directory before the product is installed, its `User/`, a server's `data/`):
/// no link or file can be made there (a link would send the person's editor to a
/// directory the command filled), a directory can, and none can be moved away.
#[test]
fn the_way_to_a_member_cannot_be_replaced_by_a_link() {
    let h = Home::new();
    for dir in [".config", ".codeium", ".local/share", ".local/state"] {
        std::fs::create_dir_all(h.home.join(dir)).unwrap();
    }
    let mut ways: Vec<String> = Vec::new();
    for p in CONFIG_DIRS {
        ways.extend([format!(".config/{p}"), format!(".config/{p}/User")]);
    }
    ways.extend(EXTENSION_HOMES.iter().map(|h| h.to_string()));
    for s in SERVERS {
        ways.extend([s.to_string(), format!("{s}/data"), format!("{s}/data/User")]);
    }
    ways.extend([".codeium/windsurf", ".local/share/zed", ".local/state/nvim"].map(String::from));
    ways.extend(
        ["sublime-text", "sublime-text-3", "sublime-merge"].map(|s| format!(".config/{s}")),
    );
    let rows: Vec<Row> = ways
        .iter()
        .map(|w| Row {
            member: w.clone(),
            file: "",
        })
        .collect();
    let o = h.probe("ways", &rows, &[]);
    let mut wrong = unexpected(&o, &rows, &["symlink", "file"], "EACCES");
    wrong.extend(unexpected(&o, &rows, &["mkdir"], "OK"));
    assert_all(wrong, &o, "a way not kept");
    let o = h.probe("moves", &rows, &[]);
    assert_all(
        unexpected(&o, &rows, &["move-away"], "EACCES"),
        &o,
        "a way moved",
    );
    for w in &ways {
        let md = h.home.join(w).symlink_metadata().unwrap();
        assert!(md.is_dir(), "~/{w} is not a directory");
    }
}

/// Members matched by a wildcard alone (an NVIM_APPNAME variant, an Android Studio
/// version): not held at a link's target (only a named path is, see the README).
const WILDCARD_ONLY: &[&str] = &[
    ".config/nvim-kickstart",
    ".local/share/nvim-kickstart",
    ".config/Google/AndroidStudio2024.2",
    ".local/share/Google/AndroidStudio2024.2",
];

/// The rows under `~/.config` and `~/.local/share` (but [`WILDCARD_ONLY`]), with
/// those two directories replaced by `config` and `share`.
fn moved_rows(config: &str, share: &str) -> Vec<Row> {
    all_rows()
        .into_iter()
        .filter(|r| !WILDCARD_ONLY.contains(&r.member.as_str()))
        .filter_map(|r| {
            let moved = if let Some(rest) = r.member.strip_prefix(".config/") {
                format!("{config}/{rest}")
            } else {
                format!("{share}/{}", r.member.strip_prefix(".local/share/")?)
            };
            Some(Row { member: moved, ..r })
        })
        .collect()
}

/// With `~/.config` a link into a dotfiles repository, each member is held the
/// same at the link's target; with `XDG_CONFIG_HOME` and `XDG_DATA_HOME` moving
/// them inside the home directory, there.
#[test]
fn a_linked_or_moved_configuration_directory_holds_the_family_there() {
    let h = Home::new();
    let rows = moved_rows("dotfiles/config", "dotfiles/share");
    for row in &rows {
        h.plant(&row.target());
    }
    std::fs::create_dir_all(h.home.join(".local")).unwrap();
    std::os::unix::fs::symlink("dotfiles/config", h.home.join(".config")).unwrap();
    std::os::unix::fs::symlink("../dotfiles/share", h.home.join(".local/share")).unwrap();
    let o = h.probe("present", &rows, &[]);
    let ops = ["overwrite", "rename-onto", "unlink", "create-beside"];
    assert_all(
        unexpected(&o, &rows, &ops, "EACCES"),
        &o,
        "a linked member not held",
    );

    let h = Home::new();
    let rows = moved_rows("xdg/config", "xdg/data");
    for row in &rows {
        h.plant(&row.target());
    }
    let (config, data) = (h.home.join("xdg/config"), h.home.join("xdg/data"));
    let env = [
        ("XDG_CONFIG_HOME", config.as_path()),
        ("XDG_DATA_HOME", data.as_path()),
    ];
    let o = h.probe("present", &rows, &env);
    assert_all(
        unexpected(&o, &rows, &ops, "EACCES"),
        &o,
        "a member moved by an XDG variable not held",
    );
    for row in &rows {
        let got = std::fs::read_to_string(h.home.join(row.target())).unwrap();
        assert_eq!(got, ORIGINAL, "~/{}", row.target());
    }
}

/// The editors' state, and look-alike directories of other tools, stay writable
/// through the run.
#[test]
fn editor_state_stays_writable() {
    let h = Home::new();
    let rows: Vec<Row> = STATE
        .iter()
        .map(|s| Row {
            member: s.to_string(),
            file: "",
        })
        .collect();
    let o = h.probe("write", &rows, &[]);
    assert_all(unexpected(&o, &rows, &["write"], "OK"), &o, "not writable");
    for s in STATE {
        let got = std::fs::read_to_string(h.home.join(s)).unwrap();
        assert_eq!(got, "changed\n", "~/{s}");
    }
}
