//! Brace alternatives: the globs without braces that a glob with braces stands for.
//!
//! `/.config/{Code,Cursor}/User/{settings,tasks}.json` matches exactly what the four
//! globs `/.config/Code/User/settings.json`, …, `/.config/Cursor/User/tasks.json`
//! match together. What reads a pattern's literal parts rather than matching it
//! (the directories on the way to a named path that `veilfs run` keeps from being
//! replaced, the targets of linked paths it holds the same) reads each alternative,
//! so a family of paths written as one brace pattern is held exactly as the same
//! paths written one by one.
//!
//! Matching never uses this: globset decides whether a glob matches, braces and
//! all. The expansion follows globset's reading of braces (nesting, a `,` outside
//! braces is a literal, `\` escapes the next character, an empty alternative is
//! dropped: `a{,b}` is `ab`), and a test checks it against globset.
//!
//! | glob                 | alternatives                     |
//! |----------------------|----------------------------------|
//! | `a/{b,c}/d`          | `a/b/d`, `a/c/d`                 |
//! | `{x/y,z}/*.json`     | `x/y/*.json`, `z/*.json`         |
//! | `a{b,{c,d}e}`        | `ab`, `ace`, `ade`               |
//! | `a\{b,c}`            | `a\{b,c}` (escaped: no braces)   |
//! | `a,b`                | `a,b`                            |
//! | `[{]x{a,b}`          | itself (a class: not expanded)   |
//!
//! A glob that cannot be expanded (a character class anywhere, unbalanced braces, a
//! group with no non-empty alternative, more than [`MAX_ALTERNATIVES`]) stands for
//! itself, as every glob without braces does.

/// The most alternatives one glob is expanded to; past it, it stands for itself.
pub const MAX_ALTERNATIVES: usize = 1024;

/// The globs without braces that `glob` stands for, in the order written; `glob`
/// itself when it has no braces or cannot be expanded (see the module
/// documentation).
pub fn alternatives(glob: &str) -> Vec<String> {
    if !glob.contains('{') || glob.contains('[') {
        return vec![glob.to_string()];
    }
    let mut chars = glob.chars().peekable();
    match sequence(&mut chars, 0) {
        Some((alts, None)) => alts,
        _ => vec![glob.to_string()],
    }
}

/// Reads a sequence up to the end, or up to a `,` or `}` when inside `depth`
/// groups; returns its expansions and the character that ended it (`None` at the
/// end of the glob). `None` when it cannot be expanded.
fn sequence(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    depth: usize,
) -> Option<(Vec<String>, Option<char>)> {
    let mut out = vec![String::new()];
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let next = chars.next()?;
                out.iter_mut().for_each(|s| {
                    s.push('\\');
                    s.push(next);
                });
            }
            '{' => {
                let group = group(chars, depth + 1)?;
                if out.len().saturating_mul(group.len()) > MAX_ALTERNATIVES {
                    return None;
                }
                out = out
                    .iter()
                    .flat_map(|head| group.iter().map(move |tail| format!("{head}{tail}")))
                    .collect();
            }
            ',' | '}' if depth > 0 => return Some((out, Some(c))),
            '}' => return None,
            c => out.iter_mut().for_each(|s| s.push(c)),
        }
    }
    // The end of the glob inside a group: unbalanced.
    (depth == 0).then_some((out, None))
}

/// Reads the alternatives of a group whose `{` was just read, through its `}`:
/// every alternative's expansions, the empty ones dropped (as globset drops them).
fn group(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    depth: usize,
) -> Option<Vec<String>> {
    let mut alts = Vec::new();
    loop {
        let (branch, end) = sequence(chars, depth)?;
        alts.extend(branch.into_iter().filter(|s| !s.is_empty()));
        if alts.len() > MAX_ALTERNATIVES {
            return None;
        }
        match end {
            Some(',') => continue,
            Some('}') if !alts.is_empty() => return Some(alts),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    macro_rules! expands {
        ($($name:ident: $glob:expr => [$($alt:expr),* $(,)?];)*) => {
            $(
                #[test]
                fn $name() {
                    let want: Vec<String> = vec![$($alt.to_string()),*];
                    assert_eq!(alternatives($glob), want, "glob {:?}", $glob);
                }
            )*
        };
    }

    expands! {
        no_braces: "a/b/*.json" => ["a/b/*.json"];
        one_group: "a/{b,c}/d" => ["a/b/d", "a/c/d"];
        two_groups: "{a,b}/{c,d}" => ["a/c", "a/d", "b/c", "b/d"];
        separators_inside: "{x/y,z}/*.json" => ["x/y/*.json", "z/*.json"];
        nested: "a{b,{c,d}e}" => ["ab", "ace", "ade"];
        spaces_in_names: "/.config/{Code,Code - OSS}/User" =>
            ["/.config/Code/User", "/.config/Code - OSS/User"];
        wildcards_kept: "{a*,b?}/c" => ["a*/c", "b?/c"];
        escaped_brace: r"a\{b,c}" => [r"a\{b,c}"];
        escaped_comma_inside: r"{a\,b,c}" => [r"a\,b", "c"];
        escape_kept_in_alternative: r"{a\*,b}" => [r"a\*", "b"];
        comma_outside: "a,b" => ["a,b"];
        empty_alternative_dropped: "a{,b}" => ["ab"];
        empty_alternative_last: "a{b,}" => ["ab"];
        only_empty_alternatives: "a{,}" => ["a{,}"];
        empty_group: "a{}" => ["a{}"];
        unclosed: "a{b,c" => ["a{b,c"];
        unopened: "a}b" => ["a}b"];
        class_not_expanded: "[{]x{a,b}" => ["[{]x{a,b}"];
        dangling_escape: "{a,b}\\" => ["{a,b}\\"];
        recursive_inside: "{**/a,b}/c" => ["**/a/c", "b/c"];
    }

    #[test]
    fn too_many_alternatives_stand_for_themselves() {
        let ten = "{0,1,2,3,4,5,6,7,8,9}";
        let glob = ten.repeat(4);
        assert_eq!(alternatives(&glob), vec![glob.clone()]);
        assert_eq!(alternatives(&ten.repeat(3)).len(), 1000);
    }

    /// Each glob matches a path exactly when one of its alternatives does, as
    /// globset decides both.
    #[test]
    fn alternatives_match_what_the_glob_matches() {
        let globs = [
            "a/{b,c}/d",
            "{x/y,z}/*.json",
            "a{b,{c,d}e}",
            "a{,b}",
            "{a*,b?}/c",
            r"{a\,b,c}",
            "{**/a,b}/c",
            "x{/**,y}",
            "{a,b}**",
            ".{vscode,cursor}-server/{extensions,data/Machine,code-*}",
            "/.config/{Code,Code - OSS}/User/{settings.json,snippets}",
        ];
        let paths = [
            "a/b/d",
            "a/c/d",
            "a/d/d",
            "x/y/z.json",
            "z/q.json",
            "x/z.json",
            "ab",
            "ace",
            "ade",
            "ae",
            "a",
            "ax/c",
            "bq/c",
            "b/c",
            "a,b",
            "c",
            "a/c",
            "q/a/c",
            "b/c/d",
            "x",
            "x/",
            "x/1/2",
            "xy",
            "a1",
            "b",
            "bb/c",
            ".vscode-server/extensions",
            ".cursor-server/data/Machine",
            ".cursor-server/code-1a2b",
            ".vscode-server/data",
            "/.config/Code - OSS/User/snippets",
            "/.config/Code/User/settings.json",
            "/.config/Codium/User/settings.json",
        ];
        let matches = |g: &str, p: &str| {
            let (_, set) = super::super::index::compile(g).unwrap();
            set.is_match(p)
        };
        for g in globs {
            let alts = alternatives(g);
            assert_ne!(alts, vec![g.to_string()], "{g} not expanded");
            for p in paths {
                let by_alts = alts.iter().any(|a| matches(a, p));
                assert_eq!(matches(g, p), by_alts, "glob {g:?} ({alts:?}) on {p:?}");
            }
        }
    }
}
