//! Backup copies: the names a rule with `backups = true` also gives its action to.
//!
//! People and their tools leave copies of a file beside it: an editor's backup
//! (`credentials~`), a copy made by hand before an edit (`.netrc.bak`, `.netrc.old`,
//! `.pgpass.orig`), nano's emergency save (`.my.cnf.save`), vim's swap file
//! (`.credentials.swp`, then `.swo`, `.swn`, …; for a name that starts with a dot,
//! `.netrc.swp`) and emacs's auto-save file (`#.netrc#`). Whole directories get
//! copied too (`~/.aws.bak/`, `~/.ssh~/`, `~/.kube.old/`). Each holds what the
//! original holds, so a rule that hides the original must hide its copies, and a
//! list that names every copy by hand misses one sooner or later.
//!
//! A rule with `backups = true` gives each of its patterns a second one that names
//! those copies: the pattern's last name with each of [`SUFFIXES`] appended, and,
//! for a pattern that may name a file (no trailing `/`), vim's swap file and emacs's
//! auto-save file beside it. A directory-only pattern's copies are directories
//! (`/.aws/` gives `/.aws.bak/`, so `~/.aws.bak/credentials` is hidden with its
//! directory). The second pattern is one glob, the copies in braces, so it costs
//! one more match per lookup, and it is compiled by globset like any other.
//!
//! | pattern (`backups = true`)  | also names (the glob made here)                                                 |
//! |-----------------------------|---------------------------------------------------------------------------------|
//! | `/.netrc`                   | `{.netrc~,.netrc.bak,.netrc.old,.netrc.orig,.netrc.save,.netrc.sw?,#.netrc#}`   |
//! | `/.aws/`                    | `{.aws~,.aws.bak,.aws.old,.aws.orig,.aws.save,.aws.sw?}` (directories)          |
//! | `/.config/containers/auth.json` | `.config/containers/{auth.json~,…,auth.json.sw?,.auth.json.sw?,#auth.json#}` |
//! | `.*_history`                | `{.*_history~,…,#.*_history#}` (a name at any depth, as the pattern)           |
//! | `/.config/{a,b}/c`          | `.config/{a,b}/{c~,…,#c#}` (the directories' braces kept)                     |
//! | `/x/{a/b,c}`                | `x/{a/b~,…,a/.b.sw?,a/#b#,c~,…,#c#}` (each alternative's own last name)        |
//! | `/.cache/**`                | nothing: `**` names no one entry to copy                                        |
//!
//! The copies keep the pattern's anchoring (a name at any depth stays one), its
//! rule, its action and its location: `explain` names the pattern as written and
//! says that the path is a backup copy ([`super::Pattern::backup`]).

/// What is appended to a name to make its copies: an editor's backup (`~`), the
/// usual hand-made ones, nano's emergency save, and vim's swap files (`.swp`,
/// then `.swo`, `.swn`, … when one is in use: `.sw?`).
pub const SUFFIXES: &[&str] = &["~", ".bak", ".old", ".orig", ".save", ".sw?"];

/// The glob (the pattern's body: no anchoring `/`, no trailing `/`) naming the
/// backup copies of what `glob` names, as the module documentation says; `None`
/// when its last name holds `**`, which names no one entry. `dir_only`: the
/// pattern names directories only (no swap or auto-save file beside them).
pub fn copies(glob: &str, dir_only: bool) -> Option<String> {
    let (dir, name) = split_last(glob);
    if name.is_empty() || name.contains("**") {
        return None;
    }
    let mut alts = Vec::new();
    for alt in super::braces::alternatives(name) {
        // An alternative may hold `/` (`{a/b,c}`): its own last name is copied.
        let (adir, aname) = split_last(&alt);
        let (adir, aname) = (escape_commas(adir), escape_commas(aname));
        for suffix in SUFFIXES {
            alts.push(format!("{adir}{aname}{suffix}"));
        }
        if !dir_only {
            if !aname.starts_with('.') {
                alts.push(format!("{adir}.{aname}.sw?"));
            }
            alts.push(format!("{adir}#{aname}#"));
        }
    }
    Some(format!("{dir}{{{}}}", alts.join(",")))
}

/// `glob` split after its last `/` outside braces and classes (and not escaped):
/// the directories (with their `/`, or empty) and the last name.
fn split_last(glob: &str) -> (&str, &str) {
    let mut cut = 0;
    scan(glob, |i, c, depth| {
        if c == '/' && depth == 0 {
            cut = i + 1;
        }
    });
    glob.split_at(cut)
}

/// `s` with each `,` outside braces and classes escaped: inside the braces of
/// [`copies`], an unescaped one would split an alternative where the pattern had
/// a literal comma.
fn escape_commas(s: &str) -> String {
    let mut commas = Vec::new();
    scan(s, |i, c, depth| {
        if c == ',' && depth == 0 {
            commas.push(i);
        }
    });
    let mut out = String::with_capacity(s.len() + commas.len());
    for (i, c) in s.char_indices() {
        if commas.contains(&i) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Calls `f(offset, char, brace depth)` for each character of `glob` that is
/// neither escaped nor inside a class (`[...]`, as globset reads one: a `]`
/// right after `[` or `[!` is a member).
fn scan(glob: &str, mut f: impl FnMut(usize, char, usize)) {
    let mut depth = 0usize;
    let mut chars = glob.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '[' => {
                if chars.peek().is_some_and(|&(_, c)| c == '!' || c == '^') {
                    chars.next();
                }
                if chars.peek().is_some_and(|&(_, c)| c == ']') {
                    chars.next();
                }
                for (_, c) in chars.by_ref() {
                    if c == ']' {
                        break;
                    }
                }
            }
            '{' => {
                f(i, c, depth);
                depth += 1;
            }
            '}' => {
                depth = depth.saturating_sub(1);
                f(i, c, depth);
            }
            c => f(i, c, depth),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    macro_rules! copies {
        ($($name:ident: $glob:expr, $dir_only:expr => $want:expr;)*) => {
            $(
                #[test]
                fn $name() {
                    let want: Option<&str> = $want;
                    assert_eq!(
                        copies($glob, $dir_only).as_deref(),
                        want,
                        "glob {:?}",
                        $glob
                    );
                }
            )*
        };
    }

    copies! {
        dotfile: ".netrc", false => Some(
            "{.netrc~,.netrc.bak,.netrc.old,.netrc.orig,.netrc.save,.netrc.sw?,#.netrc#}");
        directory: ".aws", true => Some(
            "{.aws~,.aws.bak,.aws.old,.aws.orig,.aws.save,.aws.sw?}");
        file_in_a_directory: ".config/containers/auth.json", false => Some(
            ".config/containers/{auth.json~,auth.json.bak,auth.json.old,auth.json.orig,\
             auth.json.save,auth.json.sw?,.auth.json.sw?,#auth.json#}");
        wildcard_name: ".*_history", false => Some(
            "{.*_history~,.*_history.bak,.*_history.old,.*_history.orig,.*_history.save,\
             .*_history.sw?,#.*_history#}");
        braces_in_the_directories_kept: ".config/{a,b}/c", true => Some(
            ".config/{a,b}/{c~,c.bak,c.old,c.orig,c.save,c.sw?}");
        braces_in_the_name_expanded: "x/{a,.b}", true => Some(
            "x/{a~,a.bak,a.old,a.orig,a.save,a.sw?,.b~,.b.bak,.b.old,.b.orig,.b.save,.b.sw?}");
        an_alternative_with_a_slash: "x/{a/b,c}", false => Some(
            "x/{a/b~,a/b.bak,a/b.old,a/b.orig,a/b.save,a/b.sw?,a/.b.sw?,a/#b#,\
             c~,c.bak,c.old,c.orig,c.save,c.sw?,.c.sw?,#c#}");
        a_comma_in_a_name: "a,b", true => Some(
            r"{a\,b~,a\,b.bak,a\,b.old,a\,b.orig,a\,b.save,a\,b.sw?}");
        a_class_with_a_slash_and_a_comma: "d/x[/,]y", true => Some(
            "d/{x[/,]y~,x[/,]y.bak,x[/,]y.old,x[/,]y.orig,x[/,]y.save,x[/,]y.sw?}");
        an_escaped_slash: r"d/a\/b", true => Some(
            r"d/{a\/b~,a\/b.bak,a\/b.old,a\/b.orig,a\/b.save,a\/b.sw?}");
        recursive_names_nothing: ".cache/**", false => None;
        recursive_in_the_name: "x/a**", false => None;
    }

    /// The glob compiled by globset, as the policy compiles it.
    fn matches(glob: &str, path: &str) -> bool {
        let (_, set) = super::super::index::compile(glob).unwrap();
        set.is_match(path)
    }

    /// Each pattern's copies glob matches its copies and nothing else among near
    /// misses, as globset decides.
    #[test]
    fn copies_match_the_copies_and_nothing_else() {
        let cases: &[(&str, bool, &[&str], &[&str])] = &[
            (
                ".vault-token",
                false,
                &[
                    ".vault-token~",
                    ".vault-token.bak",
                    ".vault-token.old",
                    ".vault-token.orig",
                    ".vault-token.save",
                    ".vault-token.swp",
                    ".vault-token.swo",
                    "#.vault-token#",
                ],
                &[
                    ".vault-token",
                    "..vault-token.swp",
                    ".vault-token.bak2",
                    ".vault-tokenbak",
                    "x/.vault-token.bak",
                    ".vault-token~/x",
                ],
            ),
            (
                ".kube",
                true,
                &[
                    ".kube~",
                    ".kube.bak",
                    ".kube.old",
                    ".kube.orig",
                    ".kube.save",
                ],
                &[".kube", "#.kube#", ".kube.bak.1", "kube.bak"],
            ),
            (
                ".cargo/credentials.toml",
                false,
                &[
                    ".cargo/credentials.toml~",
                    ".cargo/credentials.toml.bak",
                    ".cargo/.credentials.toml.swp",
                    ".cargo/#credentials.toml#",
                ],
                &[
                    ".cargo/credentials.toml",
                    ".cargo.bak/credentials.toml",
                    ".credentials.toml.swp",
                ],
            ),
            (
                ".config/{gh/hosts.yml,hub}",
                false,
                &[
                    ".config/gh/hosts.yml.bak",
                    ".config/gh/.hosts.yml.swp",
                    ".config/hub~",
                    ".config/.hub.swp",
                    ".config/#hub#",
                ],
                &[
                    ".config/gh/hosts.yml",
                    ".config/.gh/hosts.yml.swp",
                    ".config/hub",
                ],
            ),
            (
                "a,b",
                false,
                &["a,b~", ".a,b.swp", "#a,b#"],
                &["a,b", "a~", "b~", "a", "b.bak"],
            ),
        ];
        for &(glob, dir_only, yes, no) in cases {
            let made = copies(glob, dir_only).unwrap();
            for p in yes {
                assert!(matches(&made, p), "{glob:?} -> {made:?} misses {p:?}");
            }
            for p in no {
                assert!(!matches(&made, p), "{glob:?} -> {made:?} matches {p:?}");
            }
        }
    }

    /// What reads a pattern's literal parts reads each copy, one by one.
    #[test]
    fn copies_expand_to_one_alternative_per_copy() {
        let made = copies(".config/{a,b}/tok", false).unwrap();
        let alts = super::super::braces::alternatives(&made);
        assert_eq!(alts.len(), 2 * (SUFFIXES.len() + 2), "{alts:?}");
        assert!(alts.contains(&".config/b/.tok.sw?".to_string()), "{alts:?}");
        assert!(alts.contains(&".config/a/#tok#".to_string()), "{alts:?}");
    }
}
