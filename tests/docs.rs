//! Every example in `README.md` and `doc/*.md` runs here and must print what the page
//! says it prints, and every relative link of those pages leads somewhere.
//!
//! The convention, for whoever writes a page:
//!
//! * A fenced block tagged `console` is run. Each line starting with `$ ` is a
//!   command (a line ending in `\` continues on the next); the lines after it, up
//!   to the next `$ `, are what it prints (a here-document, `<<'EOF'`, belongs to
//!   its command), stdout and stderr together as a terminal
//!   shows them. In the expected text `...` matches any text, across lines too (as
//!   Python doctest's ELLIPSIS): a line of `...` alone stands for any lines, none
//!   included. Trailing spaces and blank lines at the end do not count.
//! * Every other fenced block says what it is: `toml`, `json` or `text` (no
//!   command in it), or `sh`, commands that are not run here, followed on the next
//!   line by `<!-- not run: WHY -->` (an agent, an interactive editor, `cargo
//!   install`, a loop forever). A block of another tag, without a tag, or an `sh`
//!   block without its reason fails the test, so no example goes untested unsaid.
//! * The `console` blocks of one page run in order, as one person at one terminal
//!   would type them: each in a fresh `bash`, started where the previous block
//!   left off (the first in the scratch home directory, `HOME`, shown as `~`, which
//!   starts empty); the steps of one block share their shell (a `cd` holds).
//!   `veilfs` on `PATH` is the binary under test; the environment is a clean one
//!   (`PATH`, `HOME`, `USER`, `SHELL`, `LANG`, `TERM=dumb`, a git identity), stdin
//!   is empty, so `veilfs run` has no terminal.
//! * `VEILFS_DOCS_SHOW=1 cargo test --test docs -- --nocapture` prints what every
//!   command printed, to write the expected output from.
//! * Output is compared after the scratch home is replaced by `~` and the numbers
//!   of run ids (`notices-run-123.log`) and pids (`pid 4242`) by `N`.
//!
//! The scratch home lies in the system's temporary directory, as for the other
//! tests of `veilfs run`: under the crate's `target` directory it would lie inside
//! veilfs's own git work tree, which `veilfs run` would take for the workspace.
//! `veilfs run` keeps the workspace and the home directory at their own paths in its
//! private `/tmp`.

mod common;

use std::collections::HashSet;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The pages whose examples run; `every_page_is_listed` keeps it complete.
const PAGES: &[&str] = &[
    "README.md",
    "doc/policy.md",
    "doc/run.md",
    "doc/home.md",
    "doc/commands.md",
    "doc/guarantees.md",
    "doc/conformance.md",
    "doc/performance.md",
    "doc/development.md",
];

/// How long one block may take before it is killed and fails.
const BLOCK_LIMIT: Duration = Duration::from_secs(120);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read_page(page: &str) -> String {
    std::fs::read_to_string(root().join(page)).unwrap_or_else(|e| panic!("{page}: {e}"))
}

/// A fenced block of a page.
struct Block {
    /// The line of the opening fence (1-based).
    line: usize,
    tag: String,
    body: Vec<String>,
    /// The line after the closing fence, if any.
    after: Option<String>,
}

fn blocks(text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        // A fence may be indented (in a list item); its body then is too.
        let indent = lines[i].len() - lines[i].trim_start().len();
        let Some(tag) = lines[i].trim_start().strip_prefix("```") else {
            i += 1;
            continue;
        };
        let start = i;
        let mut body = Vec::new();
        i += 1;
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            let l = lines[i];
            let strip = l.len() - l.trim_start().len();
            body.push(l[strip.min(indent)..].to_string());
            i += 1;
        }
        assert!(
            i < lines.len(),
            "line {}: a block is never closed",
            start + 1
        );
        out.push(Block {
            line: start + 1,
            tag: tag.trim().to_string(),
            body,
            after: lines.get(i + 1).map(|l| l.trim().to_string()),
        });
        i += 1;
    }
    out
}

/// One command of a `console` block and what it should print.
struct Step {
    command: String,
    expected: String,
}

fn steps(b: &Block) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::new();
    let mut continued = false;
    // The word that ends a here-document the command is still reading.
    let mut here_end: Option<String> = None;
    for l in &b.body {
        if let Some(end) = &here_end {
            let s = out.last_mut().unwrap();
            s.command.push('\n');
            s.command.push_str(l);
            if l == end {
                here_end = None;
            }
        } else if continued {
            let s = out.last_mut().unwrap();
            s.command.push('\n');
            s.command.push_str(l);
            continued = l.ends_with('\\');
            here_end = here_doc_end(l);
        } else if let Some(c) = l.strip_prefix("$ ") {
            out.push(Step {
                command: c.to_string(),
                expected: String::new(),
            });
            continued = c.ends_with('\\');
            here_end = here_doc_end(c);
        } else {
            let s = out
                .last_mut()
                .unwrap_or_else(|| panic!("line {}: a console block starts with output", b.line));
            s.expected.push_str(l);
            s.expected.push('\n');
        }
    }
    assert!(
        here_end.is_none(),
        "line {}: a here-document is never ended",
        b.line
    );
    out
}

/// The word ending the here-document a command line starts (`<<'EOF'`, `<<EOF`).
fn here_doc_end(line: &str) -> Option<String> {
    let at = line.find("<<")?;
    let word: String = line[at + 2..]
        .trim_start_matches('-')
        .trim_start()
        .trim_matches(|c| c == '\'' || c == '"')
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!word.is_empty()).then_some(word)
}

/// The text as compared: no trailing spaces, no trailing blank lines.
fn tidy(s: &str) -> String {
    let lines: Vec<&str> = s.lines().map(str::trim_end).collect();
    let mut s = lines.join("\n");
    while s.ends_with('\n') {
        s.pop();
    }
    s
}

/// `expected` with `...` matching any text (across lines), the rest literally; a
/// line of `...` alone stands for any lines, none included.
fn matches(expected: &str, actual: &str) -> bool {
    let mut pattern = String::new();
    for l in tidy(expected).lines() {
        if l == "..." {
            pattern.push_str("...");
        } else {
            pattern.push_str(l);
            pattern.push('\n');
        }
    }
    let mut actual = tidy(actual);
    if !actual.is_empty() {
        actual.push('\n');
    }
    let pieces: Vec<&str> = pattern.split("...").collect();
    if pieces.len() == 1 {
        return pattern == actual;
    }
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if !actual.starts_with(first) || actual.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &actual[first.len()..];
    for piece in &pieces[1..pieces.len() - 1] {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// Replaces every run of digits after `prefix` by `N`.
fn number_to_n(s: &str, prefix: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(at) = rest.find(prefix) {
        let after = at + prefix.len();
        out.push_str(&rest[..after]);
        let digits = rest[after..].bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 {
            out.push('N');
        }
        rest = &rest[after + digits..];
    }
    out.push_str(rest);
    out
}

fn normalise(s: &str, home: &Path) -> String {
    let s = s.replace(&home.display().to_string(), "~");
    let s = number_to_n(&s, "notices-run-");
    number_to_n(&s, "pid ")
}

const MARK: &str = "@@veilfs-doc-step@@";

/// The scratch home of one page: unmounts whatever an example left mounted in it
/// and ends what it left running, on drop.
struct Scratch {
    tmp: tempfile::TempDir,
    home: PathBuf,
    groups: Vec<i32>,
}

impl Scratch {
    fn new() -> Scratch {
        common::require_fuse();
        let tmp = tempfile::Builder::new()
            .prefix("veilfs-docs")
            .tempdir()
            .unwrap();
        let home = tmp.path().canonicalize().unwrap().join("home");
        std::fs::create_dir(&home).unwrap();
        Scratch {
            tmp,
            home,
            groups: Vec::new(),
        }
    }

    /// Runs the steps in one bash; the output of each step, or why the block failed.
    fn run(&mut self, steps: &[Step]) -> Result<Vec<String>, String> {
        // The directory the previous block ended in, kept beside the home directory.
        let cwd_file = self.tmp.path().join("cwd");
        let mut script = format!(
            "exec 2>&1\ncd \"$(cat '{0}' 2>/dev/null || echo ~)\"\ntrap 'pwd > {0}' EXIT\n",
            cwd_file.display()
        );
        for s in steps {
            script.push_str(&format!("printf '%s\\n' '{MARK}'\n{}\n", s.command));
        }
        let bin = Path::new(env!("CARGO_BIN_EXE_veilfs")).parent().unwrap();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
        );
        let mut child = Command::new("bash")
            .arg("--norc")
            .arg("-c")
            .arg(&script)
            .env_clear()
            .env("PATH", path)
            .env("HOME", &self.home)
            .env(
                "USER",
                std::env::var("USER").unwrap_or_else(|_| "root".into()),
            )
            .env("SHELL", "/bin/bash")
            .env("LANG", "C.UTF-8")
            .env("TERM", "dumb")
            .env("GIT_AUTHOR_NAME", "You")
            .env("GIT_AUTHOR_EMAIL", "you@example.com")
            .env("GIT_COMMITTER_NAME", "You")
            .env("GIT_COMMITTER_EMAIL", "you@example.com")
            .env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", "init.defaultBranch")
            .env("GIT_CONFIG_VALUE_0", "main")
            .current_dir(&self.home)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        self.groups.push(child.id() as i32);
        let mut stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = stdout.read_to_end(&mut v);
            v
        });
        let deadline = Instant::now() + BLOCK_LIMIT;
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                self.end_groups();
                let _ = child.wait();
                return Err(format!("killed after {BLOCK_LIMIT:?}"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // Whatever a step left running in the background ends with the block.
        self.end_groups();
        let out = String::from_utf8_lossy(&reader.join().unwrap()).into_owned();
        let out = normalise(&out, &self.home);
        let mark = format!("{MARK}\n");
        let mut parts = out.split(&mark);
        let before = parts.next().unwrap_or_default();
        if !before.trim().is_empty() {
            return Err(format!("output before the first step:\n{before}"));
        }
        Ok(parts.map(str::to_string).collect())
    }

    fn end_groups(&mut self) {
        for g in self.groups.drain(..) {
            // SAFETY: signalling the process group of a bash this test started.
            unsafe { libc::kill(-g, libc::SIGTERM) };
        }
    }

    /// Mount points at or under the scratch directory.
    fn mounts(&self) -> Vec<String> {
        let prefix = self.tmp.path().canonicalize().unwrap();
        let prefix = prefix.to_string_lossy();
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .filter(|m| m.starts_with(prefix.as_ref()))
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        self.end_groups();
        common::wait_until(Duration::from_secs(5), || self.mounts().is_empty());
        for m in self.mounts().iter().rev() {
            let _ = Command::new("umount").arg("-l").arg(m).status();
        }
    }
}

/// Runs every `console` block of `page`; checks that every other block says what
/// it is. Panics with every failing block, each with its command, the output
/// expected and the output seen.
fn check_page(page: &str) {
    let text = read_page(page);
    let mut scratch = Scratch::new();
    let mut failures = Vec::new();
    let mut ran = 0;
    for b in blocks(&text) {
        match b.tag.as_str() {
            "console" => {
                let steps = steps(&b);
                ran += 1;
                match scratch.run(&steps) {
                    Err(why) => failures.push(format!("{page}:{}: {why}", b.line)),
                    Ok(outputs) => {
                        for (i, s) in steps.iter().enumerate() {
                            let actual = outputs.get(i).map(String::as_str).unwrap_or_default();
                            if std::env::var_os("VEILFS_DOCS_SHOW").is_some() {
                                eprintln!("{page}:{}: $ {}\n{actual}", b.line, s.command);
                            }
                            if !matches(&s.expected, actual) {
                                failures.push(format!(
                                    "{page}:{}: $ {}\n--- expected:\n{}\n--- actual:\n{}",
                                    b.line,
                                    s.command,
                                    tidy(&s.expected),
                                    tidy(actual)
                                ));
                                break;
                            }
                        }
                    }
                }
            }
            "sh" => {
                let reason = b
                    .after
                    .as_deref()
                    .and_then(|l| l.trim().strip_prefix("<!-- not run:"))
                    .and_then(|r| r.strip_suffix("-->"))
                    .map(str::trim)
                    .unwrap_or_default();
                if reason.is_empty() {
                    failures.push(format!(
                        "{page}:{}: an `sh` block not followed by `<!-- not run: WHY -->`: \
                         make it a `console` block with its output, or say why it cannot run",
                        b.line
                    ));
                }
            }
            "toml" | "json" | "text" => {
                if b.body.iter().any(|l| l.starts_with("$ ")) {
                    failures.push(format!(
                        "{page}:{}: a `{}` block holds a `$ ` command: make it `console`",
                        b.line, b.tag
                    ));
                }
            }
            other => failures.push(format!(
                "{page}:{}: a block tagged {other:?}: tag it console, sh (with a reason), toml, json or text",
                b.line
            )),
        }
    }
    drop(scratch);
    assert!(
        failures.is_empty(),
        "{} of the examples of {page} ({ran} run) failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

macro_rules! pages {
    ($($name:ident: $page:expr;)*) => {
        $(#[test] fn $name() { check_page($page); })*
    };
}

pages! {
    readme_examples: "README.md";
    policy_examples: "doc/policy.md";
    run_examples: "doc/run.md";
    home_examples: "doc/home.md";
    commands_examples: "doc/commands.md";
    guarantees_examples: "doc/guarantees.md";
    conformance_examples: "doc/conformance.md";
    performance_examples: "doc/performance.md";
    development_examples: "doc/development.md";
}

#[test]
fn every_page_is_listed() {
    let mut found = vec!["README.md".to_string()];
    for e in std::fs::read_dir(root().join("doc")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") {
            found.push(format!("doc/{name}"));
        }
    }
    for page in &found {
        assert!(
            PAGES.contains(&page.as_str()),
            "{page} is not in tests/docs.rs's PAGES, nor its examples run"
        );
    }
    for page in PAGES {
        assert!(
            found.iter().any(|f| f == page),
            "{page} is listed but missing"
        );
    }
}

/// The anchors GitHub gives a page's headings.
fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    let mut in_block = false;
    for l in text.lines() {
        if l.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block || !l.starts_with('#') {
            continue;
        }
        let title = l.trim_start_matches('#').trim();
        let mut a: String = title
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .flat_map(char::to_lowercase)
            .collect();
        if seen.contains(&a) {
            let mut n = 1;
            while seen.contains(&format!("{a}-{n}")) {
                n += 1;
            }
            a = format!("{a}-{n}");
        }
        seen.insert(a);
    }
    seen
}

/// The targets of a page's markdown links, outside code.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_block = false;
    for (n, l) in text.lines().enumerate() {
        if l.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        // Inline code spans hold no links.
        let plain: String = l
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            out.push((n + 1, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn relative_links_and_anchors_exist() {
    let mut broken = Vec::new();
    for page in PAGES {
        let text = read_page(page);
        let dir = root().join(page).parent().unwrap().to_path_buf();
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                root().join(page)
            } else {
                dir.join(file)
            };
            if !path.exists() {
                broken.push(format!("{page}:{line}: {target}: no {}", path.display()));
                continue;
            }
            if let Some(a) = anchor {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                if !anchors(&text).contains(a) {
                    broken.push(format!("{page}:{line}: {target}: no heading #{a}"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_ellipsis_matches_any_text_and_nothing_else_does() {
    assert!(matches("a\n...\nd\n", "a\nb\nc\nd\n"));
    assert!(matches("a\n...\nd", "a\nd"));
    assert_eq!(here_doc_end("cat > x <<'EOF'"), Some("EOF".into()));
    assert_eq!(here_doc_end("echo '<<' no"), None);
    assert!(matches("a\n...", "a"));
    assert!(matches("...\nd", "d"));
    assert!(matches("a ...\n...\nd", "a b\nd"));
    assert!(matches("x ... z", "x y y z"));
    assert!(!matches("a\n...\nd", "a\nb"));
    assert!(!matches("a", "b"));
    assert!(!matches("ab...ba", "aba"));
    assert!(matches("a  \n\n", "a"));
    assert_eq!(
        normalise("notices-run-4321.log (pid 77)", Path::new("/h")),
        "notices-run-N.log (pid N)"
    );
    assert_eq!(
        anchors("# Sockets and /tmp\n## `veilfs run`: a b\n## x\n## x\n"),
        ["sockets-and-tmp", "veilfs-run-a-b", "x", "x-1"]
            .into_iter()
            .map(String::from)
            .collect()
    );
}
