//! Ignore files that agents' tools already read (`.cursorignore`, `.aiexclude`, …),
//! parsed and matched exactly as git parses and matches a `.gitignore`.
//!
//! This module is pure: it reads a string, never the disk, and has no `unsafe`.
//! [`IgnoreFile::parse`] turns one file's text into rules (each with its 1-based line
//! number and its text, for messages like `.cursorignore:3`), and
//! [`IgnoreFile::decide`] says which line of *this file alone* decides a path, as
//! git decides it. Walking parent directories and combining several files is the
//! caller's job (see "Ancestors" below).
//!
//! # The files and their documented syntax
//!
//! | file             | syntax      | `!` | what its tool documents |
//! |------------------|-------------|-----|-------------------------|
//! | `.cursorignore`  | gitignore   | yes | "Create a .cursorignore file in your root directory using .gitignore syntax": `*`, `**`, `?`, `!`, `#`, trailing spaces unless escaped with `\` (<https://cursor.com/docs/context/ignore-files>) |
//! | `.geminiignore`  | gitignore   | yes | "follows the conventions of .gitignore files": `#`, `*` `?` `[]`, trailing `/`, leading `/` anchors to the file's directory, `!` negates (<https://geminicli.com/docs/cli/gemini-ignore/>) |
//! | `.codeiumignore` | gitignore   | yes | "the same syntax as .gitignore" (<https://docs.windsurf.com/context-awareness/windsurf-ignore>) |
//! | `.aiderignore`   | gitignore   | yes | aider documents only the option (`--aiderignore`, default `.aiderignore` in the git root, <https://aider.chat/docs/config/options.html>); aider reads it with Python `pathspec`'s `GitWildMatchPattern`, i.e. gitignore syntax (`aider/repo.py`) |
//! | `.agentignore`   | gitignore   | yes | no single owner: the tools that read it say gitignore syntax (the `agentignore` crate parses it with ripgrep's gitignore parser, <https://docs.rs/crate/agentignore/latest>; `codebase-vis` with the `ignore` npm package, <https://github.com/Arham-Qureshi/codebase-vis/wiki/agentignore-Reference>; `azd` with a Go gitignore parser, <https://github.com/Azure/azure-dev/pull/8223>) |
//! | `.claudeignore`  | gitignore   | yes | Claude Code does **not** read this file (<https://github.com/anthropics/claude-code/issues/56997>: "Claude Code doesn't use this file. Use permissions.deny"); people write it in gitignore syntax expecting it to work, and veilfs makes it do what they wrote |
//! | `.aiexclude`     | [`Syntax::AiExclude`] | no | see below |
//!
//! ## `.aiexclude`
//!
//! Google documents `.aiexclude` in three places, which disagree on negation:
//!
//! * Gemini Code Assist, "Create an .aiexclude file"
//!   (<https://cloud.google.com/gemini/docs/codeassist/create-aiexclude-file>, also
//!   <https://developers.google.com/gemini-code-assist/docs/create-aiexclude-file>) and
//!   Firebase Studio / IDX (<https://developers.google.com/idx/guides/aiexclude>):
//!   "the same syntax as a .gitignore file, with the following differences: An empty
//!   .aiexclude file blocks all files in its directory and all sub-directories. This
//!   result is the same as a file that contains `**/*`. An .aiexclude file doesn't
//!   support negation, where you prefix patterns with an exclamation point (`!`)."
//! * Android Studio (<https://developer.android.com/studio/gemini/aiexclude>): "the
//!   same syntax as a .gitignore file", no exceptions listed.
//! * A later revision of the Gemini Code Assist page shows `foo/*` + `!foo/bar.txt`.
//!
//! All of them agree that `*` does not cross `/` (`/*.kt` "blocks all .kt files in
//! the .aiexclude directory, but not below"; `my/sensitive/dir/*.txt` blocks the
//! `.txt` files in that directory "but not in subdirectories"), that `**` spans
//! directories, that a leading `/` anchors to the file's directory and that a file
//! applies at and below its directory. veilfs follows the pages that state the
//! differences explicitly, which is also the reading that never shows more than the
//! file asks to hide:
//!
//! * patterns are gitignore patterns, matched as git matches them;
//! * a `!` line is **not applied**: it is reported as an error (so `check` says so)
//!   and the paths it names stay excluded;
//! * a file with no pattern line (empty, or only blank and comment lines) excludes
//!   everything at and below its directory, as `**/*` would; [`Match::line`] is `0`
//!   for that rule.
//!
//! # Gitignore semantics (git 2.x `dir.c` and `wildmatch.c`)
//!
//! * Lines are split at `\n`; one `\r` before it is dropped; a UTF-8 BOM at the very
//!   start is skipped.
//! * An empty line, or one starting with `#`, is no pattern. `\#` starts a pattern
//!   with a literal `#`.
//! * Trailing spaces are dropped unless escaped: `a\ ` keeps one space. Tabs stay.
//! * `!` negates: a path it matches is re-included ([`Match::ignored`] is false).
//!   `\!` starts a pattern with a literal `!`.
//! * A trailing `/` makes the pattern match directories only (`is_dir` is asked).
//! * A pattern with no other `/` matches the last name of a path, at any depth below
//!   the file's directory (`*.pem`, `.env`, `build/`).
//! * A pattern with a leading or inner `/` is matched against the whole path relative
//!   to the file's directory (`/build`, `docs/*.md`).
//! * `*` and `?` never match `/`; `[...]` (with `!` or `^` to negate, ranges,
//!   `[:alpha:]`-style classes, `\` escapes inside) matches one byte, never `/`.
//! * `**/` at the start matches in every directory, `/**` at the end everything
//!   inside, `/**/` zero or more directories; any other `**` is a `*` (with git's one
//!   quirk: a `**` right after the pattern's literal prefix spans `/` too, so
//!   `foo**/bar` matches `foo/x/bar`, as in git).
//! * `\` escapes any character; `{`, `}` and `,` are literal (no alternation).
//! * Names are bytes; a non-UTF-8 path is matched byte for byte.
//! * Of the lines that match, the last one decides.
//!
//! Patterns are compiled with globset (the policy's own glob builder,
//! `index::build_glob`); this module only rewrites git's syntax into
//! globset's where the two differ (escapes, character classes, `**` placement).
//!
//! A line git accepts but that can never match, and that globset cannot express as
//! git means it (a class holding a non-ASCII byte, an unclosed `[`, an unknown
//! `[:class:]`, a trailing lone `\`), is reported with its line number and skipped;
//! the rest of the file still applies.
//!
//! The `!` column is what the built-in default (and an import rule without
//! `negation = false`) applies: a `!` line re-includes where the file's tool
//! re-includes. Cursor documents `!` ("negates a pattern (un-ignores a previously
//! ignored path)"); Gemini CLI documents it ("`!` negates a pattern") and reads the
//! file with the npm `ignore` package, which implements gitignore's negation
//! (`packages/core/src/utils/geminiIgnoreParser.ts`); Windsurf, aider and the
//! `.agentignore` readers say gitignore syntax and use gitignore parsers, `!`
//! included; `.claudeignore` is read as the gitignore its writers mean; only
//! `.aiexclude` documents that it has no negation.
//!
//! # Ancestors
//!
//! git never re-includes a path whose parent directory is excluded ("It is not
//! possible to re-include a file if a parent directory of that file is excluded",
//! gitignore(5)): `logs/` then `!logs/keep.log` keeps `logs/keep.log` excluded, while
//! `logs/*` then `!logs/keep.log` re-includes it. The tools agree: the npm `ignore`
//! package (Gemini CLI's reader) tests a path's parent directories first and returns
//! an ignored parent's answer for the child (`Ignore::_t`), and Cursor's own example
//! of an allow-list (`*`, `!app/`, `!app/*/`, `!app/**/*/`, `!*.py`,
//! <https://cursor.com/docs/context/ignore-files>) re-includes the directories
//! explicitly because of that rule, and sends readers to `git check-ignore`.
//! [`IgnoreFile::decide`] answers for one path; a caller decides each ancestor
//! directory first, outermost first, and stops at the first one that is ignored.
//! That walk, with this module's answers, is what the tests compare against
//! `git check-ignore`.
//!
//! | file (in `dir`) | lines                | path                | decision            |
//! |-----------------|----------------------|---------------------|---------------------|
//! | root            | `*.pem`              | `a/b/key.pem`       | ignored, line 1     |
//! | root            | `*.pem`, `!pub.pem`  | `pub.pem`           | re-included, line 2 |
//! | root            | `/build`             | `src/build`         | none                |
//! | root            | `logs/`              | `logs` (a file)     | none                |
//! | `sub`           | `*.log`              | `x.log`             | none (outside `sub`)|
//! | `sub`           | `/x.log`             | `sub/x.log`         | ignored, line 1     |
//! | root, `.aiexclude` | (empty)           | `anything`          | ignored, line 0     |

use globset::{Candidate, GlobSet};

use super::index::build_glob;

/// How an ignore file's lines are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// Exactly `.gitignore`.
    Gitignore,
    /// `.gitignore` without negation, and an empty file excludes everything.
    AiExclude,
    /// `.gitignore` without negation: an import rule with `negation = false`, where
    /// no file can re-include what another hides.
    NoNegation,
}

/// Every ignore file name [`syntax_of`] knows.
pub const NAMES: [&str; 7] = [
    ".cursorignore",
    ".aiexclude",
    ".geminiignore",
    ".claudeignore",
    ".agentignore",
    ".aiderignore",
    ".codeiumignore",
];

/// The syntax of a known ignore file, by its name (no directory).
pub fn syntax_of(file_name: &str) -> Option<Syntax> {
    match file_name {
        ".cursorignore" | ".geminiignore" | ".claudeignore" | ".agentignore" | ".aiderignore"
        | ".codeiumignore" => Some(Syntax::Gitignore),
        ".aiexclude" => Some(Syntax::AiExclude),
        _ => None,
    }
}

/// The line of an ignore file that decides a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    /// True: the path is excluded. False: a `!` line re-included it.
    pub ignored: bool,
    /// 1-based line number; 0 for the rule of an empty `.aiexclude`.
    pub line: u32,
    /// The line as written, trailing unescaped spaces and a `\r` removed.
    pub text: String,
}

/// A line that could not be compiled: its 1-based number and why.
pub type LineError = (u32, String);

#[derive(Debug)]
enum Matcher {
    /// Matched against the last name of the path.
    Basename(GlobSet),
    /// Matched against the path relative to the file's directory.
    Path(GlobSet),
}

/// One pattern line of an ignore file.
#[derive(Debug)]
pub struct Rule {
    line: u32,
    text: String,
    negated: bool,
    dir_only: bool,
    /// `None`: a pattern git accepts that matches nothing (an empty one).
    matcher: Option<Matcher>,
}

impl Rule {
    /// 1-based line number (0 for an empty `.aiexclude`'s rule).
    pub fn line(&self) -> u32 {
        self.line
    }
    /// The line as written (trailing unescaped spaces removed).
    pub fn text(&self) -> &str {
        &self.text
    }
    /// A `!` line: what it matches is re-included.
    pub fn negated(&self) -> bool {
        self.negated
    }
    /// A trailing `/`: matches directories only.
    pub fn dir_only(&self) -> bool {
        self.dir_only
    }

    fn matches(&self, rel: &[u8], base: &[u8]) -> bool {
        match &self.matcher {
            Some(Matcher::Basename(m)) => m.is_match_candidate(&Candidate::from_bytes(base)),
            Some(Matcher::Path(m)) => m.is_match_candidate(&Candidate::from_bytes(rel)),
            None => false,
        }
    }
}

/// One parsed ignore file: its rules, in file order, and where it applies.
#[derive(Debug)]
pub struct IgnoreFile {
    name: String,
    dir: Vec<u8>,
    syntax: Syntax,
    rules: Vec<Rule>,
}

impl IgnoreFile {
    /// Parses `text`, the content of the file `name` found in the workspace-relative
    /// directory `dir` (`""` at the root, no trailing `/`). Lines that cannot be
    /// compiled are returned next to the file, with their line numbers; the other
    /// lines apply.
    pub fn parse(
        name: &str,
        dir: &[u8],
        text: &str,
        syntax: Syntax,
    ) -> (IgnoreFile, Vec<LineError>) {
        let mut rules = Vec::new();
        let mut errors = Vec::new();
        let mut patterns = 0usize;
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        for (i, raw) in text.split('\n').enumerate() {
            let line = u32::try_from(i + 1).unwrap_or(u32::MAX);
            if raw.is_empty() || raw.starts_with('#') {
                continue;
            }
            let trimmed = trim_trailing_spaces(raw.strip_suffix('\r').unwrap_or(raw));
            if !trimmed.is_empty() {
                patterns += 1;
            }
            if syntax != Syntax::Gitignore && trimmed.starts_with('!') {
                let why = if syntax == Syntax::AiExclude {
                    format!("{name} has no negation (`!`)")
                } else {
                    "the rule importing it takes no negation (`!`)".to_string()
                };
                errors.push((
                    line,
                    format!("{why}: this line is not applied, what it names stays excluded"),
                ));
                continue;
            }
            match compile_line(trimmed) {
                Ok((negated, dir_only, matcher)) => rules.push(Rule {
                    line,
                    text: trimmed.to_string(),
                    negated,
                    dir_only,
                    matcher,
                }),
                Err(e) => errors.push((line, format!("`{trimmed}`: {e}"))),
            }
        }
        if syntax == Syntax::AiExclude && patterns == 0 {
            // "An empty .aiexclude file blocks all files in its directory and all
            // sub-directories. This result is the same as a file that contains **/*."
            if let Ok((negated, dir_only, matcher)) = compile_line("**/*") {
                rules.push(Rule {
                    line: 0,
                    text: "**/*".to_string(),
                    negated,
                    dir_only,
                    matcher,
                });
            }
        }
        let file = IgnoreFile {
            name: name.to_string(),
            dir: dir.to_vec(),
            syntax,
            rules,
        };
        (file, errors)
    }

    /// The file's name, as given to [`IgnoreFile::parse`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The workspace-relative directory the file applies to.
    pub fn dir(&self) -> &[u8] {
        &self.dir
    }

    pub fn syntax(&self) -> Syntax {
        self.syntax
    }

    /// The compiled rules, in file order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The last line of this file matching `path` (workspace-relative, `/`-separated),
    /// as git decides with this file alone; `None` when no line matches or the path
    /// is not below the file's directory. Parents are not looked at (see the module
    /// docs). `is_dir` is called at most once, and only when a directory-only line
    /// matches the path's name.
    pub fn decide(&self, path: &[u8], is_dir: impl FnOnce() -> bool) -> Option<Match> {
        let rel = if self.dir.is_empty() {
            path
        } else {
            let rest = path.strip_prefix(self.dir.as_slice())?;
            rest.strip_prefix(b"/")?
        };
        if rel.is_empty() {
            return None;
        }
        let base = match rel.iter().rposition(|&b| b == b'/') {
            Some(i) => &rel[i + 1..],
            None => rel,
        };
        let mut is_dir = Some(is_dir);
        let mut dir_answer = None;
        for rule in self.rules.iter().rev() {
            if !rule.matches(rel, base) {
                continue;
            }
            if rule.dir_only {
                let d = match dir_answer {
                    Some(d) => d,
                    None => {
                        let d = is_dir.take().is_some_and(|f| f());
                        dir_answer = Some(d);
                        d
                    }
                };
                if !d {
                    continue;
                }
            }
            return Some(Match {
                ignored: !rule.negated,
                line: rule.line,
                text: rule.text.clone(),
            });
        }
        None
    }
}

/// git's `trim_trailing_spaces`: drops trailing spaces not escaped by `\`.
fn trim_trailing_spaces(s: &str) -> &str {
    let b = s.as_bytes();
    let mut last_space = None;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b' ' => {
                if last_space.is_none() {
                    last_space = Some(i);
                }
            }
            b'\\' => {
                i += 1;
                if i >= b.len() {
                    return s;
                }
                last_space = None;
            }
            _ => last_space = None,
        }
        i += 1;
    }
    match last_space {
        Some(n) => &s[..n],
        None => s,
    }
}

/// git's `parse_path_pattern`, then the translation to globset.
fn compile_line(pattern: &str) -> Result<(bool, bool, Option<Matcher>), String> {
    let (negated, p) = match pattern.strip_prefix('!') {
        Some(rest) => (true, rest),
        None => (false, pattern),
    };
    let (dir_only, p) = match p.strip_suffix('/') {
        Some(rest) => (true, rest),
        None => (false, p),
    };
    let basename = !p.contains('/');
    // The literal prefix git compares before calling wildmatch on the rest.
    let mut prefix = p
        .bytes()
        .position(|c| matches!(c, b'*' | b'?' | b'[' | b'\\'))
        .unwrap_or(p.len());
    let body = if basename {
        p
    } else if let Some(rest) = p.strip_prefix('/') {
        prefix -= 1;
        rest
    } else {
        p
    };
    if body.is_empty() {
        return Ok((negated, dir_only, None));
    }
    let globs = translate(body.as_bytes(), basename, prefix)?;
    let Some(globs) = globs else {
        return Ok((negated, dir_only, None));
    };
    let mut built = Vec::with_capacity(globs.len());
    for g in &globs {
        built.push(build_glob(g).map_err(|e| e.to_string())?);
    }
    let set = GlobSet::new(built).map_err(|e| e.to_string())?;
    let matcher = if basename {
        Matcher::Basename(set)
    } else {
        Matcher::Path(set)
    };
    Ok((negated, dir_only, Some(matcher)))
}

/// Rewrites a git pattern (wildmatch syntax) into globset globs whose union matches
/// what git matches. `Ok(None)`: the pattern can never match.
fn translate(p: &[u8], basename: bool, prefix: usize) -> Result<Option<Vec<String>>, String> {
    let mut alts: Vec<Vec<u8>> = vec![Vec::new()];
    let push = |alts: &mut Vec<Vec<u8>>, s: &[u8]| alts.iter_mut().for_each(|a| a.extend(s));
    let n = p.len();
    let mut i = 0;
    while i < n {
        match p[i] {
            b'\\' => {
                i += 1;
                if i >= n {
                    return Err("ends with a lone `\\`, which git never matches".into());
                }
                push(&mut alts, &escape_literal(p[i]));
                i += 1;
            }
            b'*' => {
                let start = i;
                while i < n && p[i] == b'*' {
                    i += 1;
                }
                if basename || i - start == 1 {
                    push(&mut alts, b"*");
                    continue;
                }
                let slash_next = i < n && p[i] == b'/';
                let escaped_slash_next = i + 1 < n && p[i] == b'\\' && p[i + 1] == b'/';
                let after = i == n || slash_next || escaped_slash_next;
                let boundary = start == 0 || p[start - 1] == b'/';
                if after && boundary {
                    push(&mut alts, b"**");
                } else if after && start == prefix {
                    // wildmatch sees this `**` at the start of its pattern (git
                    // compared the literal prefix before it): it spans `/`.
                    let choices: [&[u8]; 2] = if i == n {
                        [b"*", b"*/**"]
                    } else {
                        i += if slash_next { 1 } else { 2 };
                        [b"", b"*/**/"]
                    };
                    alts = alts
                        .iter()
                        .flat_map(|a| {
                            choices.iter().map(move |c| {
                                let mut v = a.clone();
                                v.extend_from_slice(c);
                                v
                            })
                        })
                        .collect();
                } else {
                    push(&mut alts, b"*");
                }
            }
            b'?' => {
                push(&mut alts, b"?");
                i += 1;
            }
            b'[' => {
                let (class, next) = parse_class(p, i)?;
                match class {
                    Some(c) => push(&mut alts, c.as_bytes()),
                    None => return Ok(None),
                }
                i = next;
            }
            c => {
                push(&mut alts, &escape_literal(c));
                i += 1;
            }
        }
    }
    alts.into_iter()
        .map(|a| String::from_utf8(a).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// One literal byte in globset syntax.
fn escape_literal(c: u8) -> Vec<u8> {
    if matches!(
        c,
        b'\\' | b'*' | b'?' | b'[' | b']' | b'{' | b'}' | b',' | b'!' | b'^'
    ) {
        vec![b'\\', c]
    } else {
        vec![c]
    }
}

/// Parses a wildmatch bracket expression starting at `p[start] == b'['`. Returns the
/// equivalent globset text (`None`: it matches nothing) and the index after it.
fn parse_class(p: &[u8], start: usize) -> Result<(Option<String>, usize), String> {
    const UNCLOSED: &str = "unclosed `[`: git matches nothing with it";
    let n = p.len();
    let mut set = [false; 128];
    fn add_range(set: &mut [bool; 128], lo: u8, hi: u8) -> Result<(), String> {
        if lo >= 0x80 || hi >= 0x80 {
            return Err(
                "a character class with a non-ASCII character (git matches it \
                        byte by byte) is not supported"
                    .into(),
            );
        }
        (lo..=hi).for_each(|b| set[usize::from(b)] = true);
        Ok(())
    }
    let mut j = start + 1;
    if j >= n {
        return Err(UNCLOSED.into());
    }
    let negated = matches!(p[j], b'!' | b'^');
    if negated {
        j += 1;
    }
    let mut prev: Option<u8> = None;
    loop {
        if j >= n {
            return Err(UNCLOSED.into());
        }
        let c = p[j];
        let this_prev;
        if c == b'\\' {
            j += 1;
            if j >= n {
                return Err(UNCLOSED.into());
            }
            add_range(&mut set, p[j], p[j])?;
            this_prev = Some(p[j]);
        } else if c == b'-' && prev.is_some() && j + 1 < n && p[j + 1] != b']' {
            j += 1;
            let mut hi = p[j];
            if hi == b'\\' {
                j += 1;
                if j >= n {
                    return Err(UNCLOSED.into());
                }
                hi = p[j];
            }
            if let Some(lo) = prev
                && lo <= hi
            {
                add_range(&mut set, lo, hi)?;
            }
            this_prev = None;
        } else if c == b'[' && j + 1 < n && p[j + 1] == b':' {
            let s = j + 2;
            let Some(k) = p[s..].iter().position(|&b| b == b']').map(|k| s + k) else {
                return Err(UNCLOSED.into());
            };
            if k == s || p[k - 1] != b':' {
                add_range(&mut set, b'[', b'[')?;
                this_prev = Some(b'[');
            } else {
                let name = &p[s..k - 1];
                let test = posix_class(name).ok_or_else(|| {
                    format!(
                        "unknown class `[:{}:]`: git matches nothing with it",
                        String::from_utf8_lossy(name)
                    )
                })?;
                (0u8..0x80)
                    .filter(|&b| test(b))
                    .for_each(|b| set[usize::from(b)] = true);
                j = k;
                this_prev = None;
            }
        } else {
            add_range(&mut set, c, c)?;
            this_prev = Some(c);
        }
        prev = this_prev;
        j += 1;
        if j >= n {
            return Err(UNCLOSED.into());
        }
        if p[j] == b']' {
            break;
        }
    }
    // A class never matches `/` where git matches with WM_PATHNAME; where it does not
    // (the last name), there is no `/` to match.
    set[usize::from(b'/')] = false;
    Ok((emit_class(&set, negated), j + 1))
}

/// git's (ASCII, C locale) character classes; `space` is git's own: no `\v`, `\f`.
fn posix_class(name: &[u8]) -> Option<fn(u8) -> bool> {
    Some(match name {
        b"alnum" => |b: u8| b.is_ascii_alphanumeric(),
        b"alpha" => |b: u8| b.is_ascii_alphabetic(),
        b"blank" => |b: u8| b == b' ' || b == b'\t',
        b"cntrl" => |b: u8| b.is_ascii_control(),
        b"digit" => |b: u8| b.is_ascii_digit(),
        b"graph" => |b: u8| b.is_ascii_graphic(),
        b"lower" => |b: u8| b.is_ascii_lowercase(),
        b"print" => |b: u8| (0x20..0x7f).contains(&b),
        b"punct" => |b: u8| b.is_ascii_punctuation(),
        b"space" => |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r'),
        b"upper" => |b: u8| b.is_ascii_uppercase(),
        b"xdigit" => |b: u8| b.is_ascii_hexdigit(),
        _ => return None,
    })
}

/// A byte set as a globset class. globset's class syntax has no escapes: `]` goes
/// first, `-` last, `!`/`^` never first, and `[` is never followed by `:`.
fn emit_class(set: &[bool; 128], negated: bool) -> Option<String> {
    let special = |b: u8| matches!(b, b']' | b'-' | b'!' | b'^');
    let has = |b: u8| set[usize::from(b)];
    let mut body = String::new();
    let mut b = 0u8;
    while b < 0x80 {
        if !has(b) || special(b) {
            b += 1;
            continue;
        }
        let lo = b;
        while b + 1 < 0x80 && has(b + 1) && !special(b + 1) {
            b += 1;
        }
        body.push(char::from(lo));
        if b > lo {
            body.push('-');
            body.push(char::from(b));
        }
        b += 1;
    }
    let members = set.iter().filter(|&&m| m).count();
    if !negated {
        match members {
            0 => return None,
            1 => {
                let only = (0u8..0x80).find(|&c| has(c))?;
                return Some(String::from_utf8_lossy(&escape_literal(only)).into_owned());
            }
            _ => {}
        }
        if body.is_empty() && !has(b']') {
            // Only `!`, `^` and `-`: a class could not start safely; alternation can.
            let lits: Vec<String> = [b'!', b'^', b'-']
                .into_iter()
                .filter(|&c| has(c))
                .map(|c| String::from_utf8_lossy(&escape_literal(c)).into_owned())
                .collect();
            return Some(format!("{{{}}}", lits.join(",")));
        }
    } else if members == 0 {
        return Some("?".to_string());
    }
    let mut out = String::from(if negated { "[!" } else { "[" });
    if has(b']') {
        out.push(']');
    }
    out.push_str(&body);
    if has(b'!') {
        out.push('!');
    }
    if has(b'^') {
        out.push('^');
    }
    if has(b'-') {
        out.push('-');
    }
    out.push(']');
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> IgnoreFile {
        let (f, errors) = IgnoreFile::parse(".cursorignore", b"", text, Syntax::Gitignore);
        assert!(errors.is_empty(), "{errors:?}");
        f
    }

    fn ignored(f: &IgnoreFile, path: &str, dir: bool) -> Option<(bool, u32)> {
        f.decide(path.as_bytes(), || dir)
            .map(|m| (m.ignored, m.line))
    }

    #[test]
    fn names() {
        assert_eq!(syntax_of(".cursorignore"), Some(Syntax::Gitignore));
        assert_eq!(syntax_of(".aiexclude"), Some(Syntax::AiExclude));
        assert_eq!(syntax_of(".gitignore"), None);
    }

    #[test]
    fn trailing_spaces() {
        assert_eq!(trim_trailing_spaces("a  "), "a");
        assert_eq!(trim_trailing_spaces("a\\  "), "a\\ ");
        assert_eq!(trim_trailing_spaces("a\\"), "a\\");
        assert_eq!(trim_trailing_spaces("a\t "), "a\t");
    }

    #[test]
    fn translation() {
        let t = |p: &str, base: bool| {
            let prefix = p
                .bytes()
                .position(|c| matches!(c, b'*' | b'?' | b'[' | b'\\'))
                .unwrap_or(p.len());
            translate(p.as_bytes(), base, prefix).unwrap()
        };
        assert_eq!(t("a{b,c}", true), Some(vec![r"a\{b\,c\}".to_string()]));
        assert_eq!(t("a**b", true), Some(vec!["a*b".to_string()]));
        assert_eq!(t("a/**/b", false), Some(vec!["a/**/b".to_string()]));
        assert_eq!(
            t("foo**/bar", false),
            Some(vec!["foobar".to_string(), "foo*/**/bar".to_string()])
        );
        // git matches the first byte of a reversed range as itself.
        assert_eq!(t("[z-a]", true), Some(vec!["z".to_string()]));
        assert_eq!(t("a[/]b", false), None);
        assert_eq!(t("[!a-c]", true), Some(vec!["[!a-c]".to_string()]));
        assert_eq!(t("[]a-]", true), Some(vec!["[]a-]".to_string()]));
    }

    #[test]
    fn last_line_decides() {
        let f = file("*.pem\n!pub.pem\n");
        assert_eq!(ignored(&f, "a/key.pem", false), Some((true, 1)));
        assert_eq!(ignored(&f, "a/pub.pem", false), Some((false, 2)));
        assert_eq!(ignored(&f, "a/x", false), None);
    }

    #[test]
    fn dir_only_asks_only_when_needed() {
        let f = file("logs/\n*.txt\n");
        let mut asked = 0;
        assert_eq!(
            f.decide(b"a.txt", || {
                asked += 1;
                false
            })
            .map(|m| m.line),
            Some(2)
        );
        assert_eq!(asked, 0);
        assert_eq!(ignored(&f, "logs", false), None);
        assert_eq!(ignored(&f, "x/logs", true), Some((true, 1)));
    }

    #[test]
    fn subdirectory_file() {
        let (f, _) = IgnoreFile::parse(".cursorignore", b"sub", "/x\ny/z\n", Syntax::Gitignore);
        assert_eq!(ignored(&f, "x", false), None);
        assert_eq!(ignored(&f, "sub", true), None);
        assert_eq!(ignored(&f, "subx/x", false), None);
        assert_eq!(ignored(&f, "sub/x", false), Some((true, 1)));
        assert_eq!(ignored(&f, "sub/a/x", false), None);
        assert_eq!(ignored(&f, "sub/y/z", false), Some((true, 2)));
    }

    #[test]
    fn non_utf8_names() {
        let f = file("*.key\n");
        assert!(f.decide(b"a/\xff\xfe.key", || false).is_some());
        assert!(f.decide(b"a/\xff.txt", || false).is_none());
    }

    #[test]
    fn errors_are_reported_and_the_rest_applies() {
        let (f, errors) =
            IgnoreFile::parse(".x", b"", "a[b\nok\n[[:nope:]]\nx\\\n", Syntax::Gitignore);
        assert_eq!(
            errors.iter().map(|e| e.0).collect::<Vec<_>>(),
            vec![1, 3, 4]
        );
        assert_eq!(ignored(&f, "ok", false), Some((true, 2)));
    }

    #[test]
    fn aiexclude() {
        let (f, errors) = IgnoreFile::parse(".aiexclude", b"", "", Syntax::AiExclude);
        assert!(errors.is_empty());
        assert_eq!(ignored(&f, "a/b", false), Some((true, 0)));
        let (f, errors) = IgnoreFile::parse(
            ".aiexclude",
            b"",
            "foo/*\n!foo/bar.txt\n",
            Syntax::AiExclude,
        );
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].0, 2);
        assert_eq!(ignored(&f, "foo/bar.txt", false), Some((true, 1)));
    }
}
