//! Ignore files (`.cursorignore`, `.aiexclude`, …) against real git.
//!
//! Each row is an ignore file's text and paths (files or directories). The row is
//! set up twice in a fresh git repository, the file as `.gitignore` at the root and
//! in `sub/`, with every path created on disk, and `git check-ignore --no-index -v
//! --non-matching` is asked about each path. veilfs's answer for a path is what the
//! caller of `IgnoreFile::decide` will do: decide each ancestor directory first,
//! outermost first, stop at the first ignored one (git never re-includes below an
//! excluded directory), then the path itself. Both the verdict and the deciding line
//! (number and text) must be git's.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Stdio};

use std::io::Write;

use veilfs::policy::ignore::{IgnoreFile, Match, Syntax, syntax_of};

/// The caller's walk: ancestors first, the first ignored one decides.
fn walk(f: &IgnoreFile, path: &[u8], is_dir: bool) -> Option<Match> {
    for (i, _) in path.iter().enumerate().filter(|&(_, &b)| b == b'/') {
        if let Some(m) = f.decide(&path[..i], || true)
            && m.ignored
        {
            return Some(m);
        }
    }
    f.decide(path, || is_dir)
}

/// What git says: `None` (no line) or (ignored, line, pattern text).
type GitAnswer = Option<(bool, u32, String)>;

fn git(repo: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("git");
    c.current_dir(repo)
        .args(args)
        .env("HOME", repo)
        .env("XDG_CONFIG_HOME", repo)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null");
    c
}

/// Asks `git check-ignore` about `paths` (repository-relative) in `repo`.
fn check_ignore(repo: &Path, paths: &[Vec<u8>]) -> BTreeMap<Vec<u8>, GitAnswer> {
    let mut child = git(
        repo,
        &[
            "check-ignore",
            "--no-index",
            "-v",
            "--non-matching",
            "-z",
            "--stdin",
        ],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("git must be installed for these tests");
    {
        let mut stdin = child.stdin.take().unwrap();
        for p in paths {
            stdin.write_all(p).unwrap();
            stdin.write_all(b"\0").unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "git check-ignore failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fields: Vec<&[u8]> = out.stdout.split(|&b| b == 0).collect();
    let mut answers = BTreeMap::new();
    for rec in fields.chunks(4).filter(|r| r.len() == 4) {
        let (source, line, pattern, path) = (rec[0], rec[1], rec[2], rec[3]);
        let answer = if source.is_empty() {
            None
        } else {
            let text = String::from_utf8(pattern.to_vec()).unwrap();
            let line: u32 = std::str::from_utf8(line).unwrap().parse().unwrap();
            Some((!text.starts_with('!'), line, text))
        };
        answers.insert(path.to_vec(), answer);
    }
    answers
}

fn create(root: &Path, rel: &[u8], is_dir: bool) {
    let p = root.join(OsStr::from_bytes(rel));
    if is_dir {
        std::fs::create_dir_all(&p).unwrap();
    } else {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, b"x").unwrap();
    }
}

/// Compares veilfs with git for one ignore file text and its paths, with the file
/// at the root and in `sub/`.
fn compare(name: &str, text: &str, paths: &[(&[u8], bool)]) {
    let syntax = syntax_of(name).unwrap();
    for dir in ["", "sub"] {
        let tmp = tempfile::Builder::new()
            .prefix("veilfs-ignore")
            .tempdir()
            .unwrap();
        let repo = tmp.path();
        let st = git(repo, &["init", "-q", "."]).status().unwrap();
        assert!(st.success());
        let prefix = |p: &[u8]| -> Vec<u8> {
            if dir.is_empty() {
                p.to_vec()
            } else {
                [dir.as_bytes(), b"/", p].concat()
            }
        };
        create(repo, dir.as_bytes(), true);
        std::fs::write(repo.join(dir).join(".gitignore"), text).unwrap();
        let full: Vec<(Vec<u8>, bool)> = paths.iter().map(|&(p, d)| (prefix(p), d)).collect();
        for (p, d) in &full {
            create(repo, p, *d);
        }
        let asked: Vec<Vec<u8>> = full.iter().map(|(p, _)| p.clone()).collect();
        let answers = check_ignore(repo, &asked);
        let (file, errors) = IgnoreFile::parse(name, dir.as_bytes(), text, syntax);
        for (p, d) in &full {
            let ours = walk(&file, p, *d).map(|m| (m.ignored, m.line, m.text));
            let theirs = answers
                .get(p)
                .cloned()
                .unwrap_or_else(|| panic!("git said nothing about {}", String::from_utf8_lossy(p)));
            assert_eq!(
                ours,
                theirs,
                "\n{name} in {dir:?}:\n{text}\n---\npath {:?} ({}): veilfs (left) vs git (right); \
                 line errors: {errors:?}",
                String::from_utf8_lossy(p),
                if *d { "dir" } else { "file" },
            );
        }
    }
}

/// One named test per row: `row!(name, "file text", [("path", is_dir), …])`.
macro_rules! row {
    ($name:ident, $text:expr, [$(($path:expr, $dir:expr)),* $(,)?]) => {
        #[test]
        fn $name() {
            compare(".cursorignore", $text, &[$(($path.as_bytes(), $dir)),*]);
        }
    };
}

const F: bool = false;
const D: bool = true;

row!(
    comments_and_blank_lines,
    "# comment\n\n*.log\n  \n",
    [("a.log", F), ("# comment", F), ("d/b.log", F), ("keep", F),]
);
row!(
    escaped_hash,
    "\\#notes\n",
    [("#notes", F), ("d/#notes", F), ("notes", F)]
);
row!(
    escaped_bang,
    "\\!important\n",
    [("!important", F), ("important", F)]
);
row!(
    negation_reincludes,
    "*.pem\n!pub.pem\n",
    [
        ("key.pem", F),
        ("pub.pem", F),
        ("d/pub.pem", F),
        ("d/key.pem", F),
    ]
);
row!(
    last_line_wins,
    "!keep.txt\n*.txt\n",
    [("keep.txt", F), ("a.txt", F)]
);
row!(
    no_reinclusion_below_excluded_dir,
    "secrets/\n!secrets/ok.txt\n",
    [
        ("secrets", D),
        ("secrets/ok.txt", F),
        ("secrets/x", F),
        ("secrets/d/ok.txt", F),
    ]
);
row!(
    reinclusion_below_star,
    "dir/*\n!dir/keep\n",
    [("dir/keep", F), ("dir/other", F), ("dir/sub/keep", F),]
);
row!(
    ignore_all_but_dirs_and_rs,
    "*\n!*/\n!*.rs\n",
    [
        ("src", D),
        ("src/main.rs", F),
        ("src/notes.txt", F),
        ("top.txt", F),
    ]
);
row!(
    trailing_spaces_trimmed,
    "foo   \n",
    [("foo", F), ("foo ", F)]
);
row!(
    escaped_trailing_space,
    "foo\\ \nbar\\  \n",
    [
        ("foo ", F),
        ("foo", F),
        ("bar ", F),
        ("bar  ", F),
        ("bar", F),
    ]
);
row!(trailing_tab_kept, "foo\t\n", [("foo\t", F), ("foo", F)]);
row!(
    crlf_lines,
    "a.txt\r\nb.txt\r\n",
    [("a.txt", F), ("b.txt", F), ("c.txt", F)]
);
row!(
    byte_order_mark,
    "\u{feff}bom\n",
    [("bom", F), ("\u{feff}bom", F)]
);
row!(
    leading_slash_anchors,
    "/build\n",
    [
        ("build", D),
        ("build/x", F),
        ("src/build", D),
        ("src/build/y", F),
    ]
);
row!(
    middle_slash_anchors,
    "docs/*.md\n",
    [("docs/a.md", F), ("x/docs/a.md", F), ("docs/sub/a.md", F),]
);
row!(
    name_at_any_depth,
    "tmp\n",
    [("tmp", F), ("a/tmp", D), ("a/tmp/x", F), ("a/tmpx", F),]
);
row!(
    dir_only,
    "logs/\n",
    [("logs", F), ("a/logs", D), ("a/logs/x.txt", F)]
);
row!(
    dir_only_anchored,
    "/out/\n",
    [("out", D), ("out/x", F), ("a/out", D)]
);
row!(
    dir_only_star,
    "*.d/\n",
    [("x.d", D), ("y.d", F), ("x.d/f", F)]
);
row!(
    leading_double_star,
    "**/foo\n",
    [("foo", F), ("a/b/foo", F), ("a/foox", F)]
);
row!(
    leading_double_star_path,
    "**/foo/bar\n",
    [("foo/bar", F), ("a/foo/bar", F), ("a/foo/x/bar", F),]
);
row!(
    trailing_double_star,
    "abc/**\n",
    [("abc", D), ("abc/x", F), ("abc/y/z", F), ("x/abc/y", F),]
);
row!(
    middle_double_star,
    "a/**/b\n",
    [
        ("a/b", F),
        ("a/x/b", F),
        ("a/x/y/b", F),
        ("a/xb", F),
        ("c/a/b", F),
    ]
);
row!(
    double_star_inside_a_name,
    "a**b\n",
    [("ab", F), ("axyb", F), ("a/b", F), ("c/axb", F)]
);
row!(double_star_alone, "**\n", [("x", F), ("a/b", F)]);
row!(
    double_star_any_txt,
    "**/*.txt\n",
    [("a.txt", F), ("d/e/a.txt", F), ("a.md", F)]
);
row!(
    double_star_after_literal_prefix,
    "foo**/bar\n",
    [
        ("foo/bar", F),
        ("foo/x/bar", F),
        ("fooz/y/bar", F),
        ("foobar", F),
        ("xfoo/bar", F),
    ]
);
row!(
    double_star_at_end_after_literal_prefix,
    "d/x**\n",
    [("d/x", F), ("d/xy/z", F), ("d/xyz", F), ("d/y", F),]
);
row!(
    double_star_not_after_slash,
    "a/b**/c\n",
    [("a/b/c", F), ("a/bx/c", F), ("a/bx/y/c", F),]
);
row!(
    star_does_not_cross_slash,
    "a/*.txt\n*/x\n",
    [("a/b.txt", F), ("a/b/c.txt", F), ("q/x", F), ("q/r/x", F),]
);
row!(
    question_mark,
    "a?c\nx/a?c\n",
    [("abc", F), ("ac", F), ("d/a-c", F), ("x/a/c", F)]
);
row!(
    classes,
    "[abc]x\n[!0-9]y\n[^a]w\n[[:digit:]]z\n",
    [
        ("ax", F),
        ("dx", F),
        ("1y", F),
        ("ay", F),
        ("aw", F),
        ("bw", F),
        ("5z", F),
        ("az", F),
    ]
);
row!(
    class_edge_cases,
    "[]a]1\n[a-]2\n[\\]]3\n[z-a]5\n[a-c-e]6\n[\\a-\\c]7\n",
    [
        ("]1", F),
        ("a1", F),
        ("b1", F),
        ("-2", F),
        ("b2", F),
        ("]3", F),
        ("z5", F),
        ("a5", F),
        ("-6", F),
        ("d6", F),
        ("e6", F),
        ("b7", F),
        ("d7", F),
    ]
);
row!(
    class_only_bang_caret_dash,
    "[!]]x\n[-!^]y\n",
    [
        ("]x", F),
        ("ax", F),
        ("!y", F),
        ("^y", F),
        ("-y", F),
        ("ay", F),
    ]
);
row!(
    class_never_matches_slash,
    "a[/]b\nc[!x]d/e\nf[[:punct:]]g/h\n",
    [
        ("a/b", F),
        ("c/d/e", F),
        ("cyd/e", F),
        ("f/g/h", F),
        ("f.g/h", F),
    ]
);
row!(
    posix_classes,
    "[[:space:]]s\n[[:punct:]]p\n[[:upper:]]u\n[[:alnum:]]n\n",
    [
        (" s", F),
        ("$p", F),
        ("_p", F),
        ("Au", F),
        ("au", F),
        ("9n", F),
        ("-n", F),
    ]
);
// (No path starts with `:`: git reads its arguments as pathspecs, `:` is their magic.)
row!(
    not_a_posix_class,
    "a[[:]x\n[[a]y\n",
    [("a[x", F), ("a:x", F), ("a]x", F), ("[y", F), ("ay", F),]
);
row!(
    braces_are_literal,
    "{a,b}\nc,d\n",
    [("{a,b}", F), ("a", F), ("b", F), ("c,d", F)]
);
row!(
    escaped_wildcards,
    "\\*.txt\n\\?q\n\\[x]\n",
    [
        ("*.txt", F),
        ("a.txt", F),
        ("?q", F),
        ("aq", F),
        ("[x]", F),
        ("x", F),
    ]
);
row!(
    escaped_letters_and_slash,
    "\\a\\b\nc\\/d\n",
    [("ab", F), ("c/d", F), ("e/c/d", F)]
);
row!(empty_patterns, "!\n/\n//\n", [("x", F), ("d/y", F)]);
row!(
    lines_git_never_matches,
    "a[b\n[[:nope:]]x\nfoo\\\nkept\n",
    [
        ("a[b", F),
        ("ab", F),
        ("nx", F),
        ("foo\\", F),
        ("foo", F),
        ("kept", F),
    ]
);
row!(
    negated_dir_only,
    "build/\n!build/\n*.o\n",
    [("build", D), ("build/a.o", F), ("b.o", F)]
);
row!(
    unicode_names,
    "café\n*.ü\n",
    [("café", F), ("d/café", F), ("x.ü", F), ("cafe", F)]
);

#[test]
fn non_utf8_names() {
    compare(
        ".aiderignore",
        "*.key\nd?\n[!a]z\n",
        &[
            (b"\xff\xfe.key", F),
            (b"x/\xff.key", F),
            (b"d\xff", F),
            (b"\xffz", F),
            (b"\xff.txt", F),
        ],
    );
}

#[test]
fn every_gitignore_syntax_file_reads_the_same() {
    for name in [
        ".cursorignore",
        ".geminiignore",
        ".claudeignore",
        ".agentignore",
        ".aiderignore",
        ".codeiumignore",
    ] {
        assert_eq!(syntax_of(name), Some(Syntax::Gitignore), "{name}");
        compare(
            name,
            "*.pem\n!pub.pem\nsecrets/\n",
            &[
                (b"a.pem", F),
                (b"pub.pem", F),
                (b"secrets", D),
                (b"secrets/x", F),
            ],
        );
    }
}

#[test]
fn line_errors_are_reported_and_the_rest_applies() {
    let (f, errors) = IgnoreFile::parse(
        ".cursorignore",
        b"",
        "a[b\nok\n[[:nope:]]x\nfoo\\\n[é]\n",
        Syntax::Gitignore,
    );
    let lines: Vec<u32> = errors.iter().map(|e| e.0).collect();
    assert_eq!(lines, [1, 3, 4, 5], "{errors:?}");
    let m = f.decide(b"d/ok", || false).unwrap();
    assert_eq!((m.ignored, m.line, m.text.as_str()), (true, 2, "ok"));
}

// `.aiexclude`: gitignore patterns, no negation, an empty file excludes everything
// (Gemini Code Assist and Firebase Studio documentation; see the module docs).

/// The examples of the `.aiexclude` documentation, compared with git (the same
/// patterns) and with what the documentation says each one blocks.
#[test]
fn aiexclude_documented_examples() {
    let text = "KEYS\nKEYS.*\n*.kt\n/*.k2\nmy/sensitive/dir/\nother/dir/**/*.txt\nthird/dir/*.txt\napikeys.txt\n/top.txt\n";
    let paths: &[(&[u8], bool)] = &[
        (b"KEYS", F),
        (b"a/KEYS", F),
        (b"a/KEYS.json", F),
        (b"b/Main.kt", F),
        (b"x.k2", F),
        (b"a/x.k2", F),
        (b"my/sensitive/dir", D),
        (b"my/sensitive/dir/a/b", F),
        (b"other/dir/a.txt", F),
        (b"other/dir/x/y/a.txt", F),
        (b"third/dir/a.txt", F),
        (b"third/dir/sub/a.txt", F),
        (b"c/apikeys.txt", F),
        (b"top.txt", F),
        (b"c/top.txt", F),
    ];
    compare(".aiexclude", text, paths);
    let (f, errors) = IgnoreFile::parse(".aiexclude", b"", text, Syntax::AiExclude);
    assert!(errors.is_empty(), "{errors:?}");
    let ignored = |p: &[u8], d: bool| walk(&f, p, d).is_some_and(|m| m.ignored);
    // "/*.kt blocks all .kt files in the .aiexclude directory, but not below."
    assert!(ignored(b"x.k2", F) && !ignored(b"a/x.k2", F));
    // "my/sensitive/dir/*.txt blocks … but not in subdirectories" (`*` stops at `/`).
    assert!(ignored(b"third/dir/a.txt", F) && !ignored(b"third/dir/sub/a.txt", F));
    assert!(ignored(b"other/dir/x/y/a.txt", F));
    assert!(ignored(b"my/sensitive/dir/a/b", F));
}

#[test]
fn aiexclude_empty_file_excludes_everything_below_it() {
    for text in ["", "\n\n", "# nothing listed yet\n"] {
        let (f, errors) = IgnoreFile::parse(".aiexclude", b"sub", text, Syntax::AiExclude);
        assert!(errors.is_empty());
        for p in [&b"sub/a"[..], b"sub/d/e/f", b"sub/.env"] {
            let m = f.decide(p, || false).unwrap();
            assert_eq!((m.ignored, m.line), (true, 0), "{text:?} {p:?}");
        }
        assert_eq!(f.decide(b"sub", || true), None);
        assert_eq!(f.decide(b"other/a", || false), None);
    }
}

#[test]
fn aiexclude_negation_is_reported_and_not_applied() {
    let (f, errors) = IgnoreFile::parse(
        ".aiexclude",
        b"",
        "foo/*\n!foo/bar.txt\n\\!literal\n",
        Syntax::AiExclude,
    );
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].0, 2);
    let m = f.decide(b"foo/bar.txt", || false).unwrap();
    assert_eq!((m.ignored, m.line), (true, 1));
    // An escaped `!` is a name, as in gitignore.
    assert_eq!(f.decide(b"!literal", || false).map(|m| m.line), Some(3));
}

#[test]
fn aiexclude_with_only_a_negation_is_not_empty() {
    let (f, errors) = IgnoreFile::parse(".aiexclude", b"", "!x\n", Syntax::AiExclude);
    assert_eq!(errors.len(), 1);
    assert_eq!(f.decide(b"x", || false), None);
}
