//! Rules from Claude Code's settings files: the `Read(...)` and `Edit(...)` entries
//! of `permissions.deny` and `permissions.ask` in `.claude/settings.json` and
//! `.claude/settings.local.json` at the workspace root.
//!
//! ```toml
//! [[rules]]
//! import = [".claude/settings.json", ".claude/settings.local.json"]   # no `action`
//! ```
//!
//! This module is pure: it reads a string, never the disk. [`translate`] turns a
//! settings file into gitignore lines, each with the veilfs action it maps to, and
//! says of every entry it cannot map why not, so that `veilfs check` reports it
//! (nothing is dropped silently).
//!
//! # What Claude Code documents (<https://code.claude.com/docs/en/permissions>)
//!
//! * A rule is `Tool` or `Tool(specifier)`. "Read & Edit rules both follow the
//!   gitignore specification"; `Edit` rules apply to every built-in tool that edits
//!   files (`Write`, `MultiEdit` and `NotebookEdit` are spelt as `Edit` here too).
//! * Rules are evaluated deny first, then ask, then allow: an allow never overrides a
//!   deny, and a `Read` deny also blocks editing the path.
//! * Four forms of path: `//path` is absolute from the filesystem root; `~/path` is
//!   from the home directory; `/path` is relative to the project root (the
//!   directory holding `.claude/`); `path` or `./path` is relative to the current
//!   directory.
//!
//! # The mapping
//!
//! | list  | `Read(p)` | `Edit(p)` (and `Write`, `MultiEdit`, `NotebookEdit`) |
//! |-------|-----------|------------------------------------------------------|
//! | deny  | `deny`    | `read-only`                                          |
//! | ask   | `ask`     | `ask` (veilfs also asks before reading: a note says so) |
//! | allow | nothing: an allow can never loosen a veilfs rule (a note counts them) | |
//!
//! A bare `Read` or `Edit` (no specifier) means every path: the line `*`.
//!
//! Paths become gitignore lines of a file at the workspace root, which is taken as
//! both the project root and the directory Claude Code is started in:
//!
//! * `/p` is `/p` (anchored at the root);
//! * `./p` and `p` are `p`: with an inner `/` it is anchored at the root, without one
//!   it matches that name at every depth, as a `.gitignore` line does (`./.env`
//!   hides every `.env`; more than the root's alone, never less);
//! * `//abs` and `~/p` are kept when they lead into the workspace (its real
//!   absolute path, as given in [`Context`]), as the anchored rest; paths outside the
//!   workspace are reported (veilfs polices the workspace; under `veilfs run` the
//!   home policy decides the home directory);
//! * a path with a `..` segment, a control character or a leading `!` is reported and
//!   not applied; a leading `#` is escaped.
//!
//! Other tools' rules (`Bash(...)`, `WebFetch(...)`, `mcp__...`) in `deny` or `ask`
//! are reported one by one: veilfs polices files, not commands.
//!
//! Within one settings file the strictest list wins (deny, then ask, then the
//! read-only of an `Edit` deny), as Claude Code evaluates deny before ask.

use super::Action;

/// The settings files veilfs reads, relative to the workspace root.
pub const NAMES: [&str; 2] = [".claude/settings.json", ".claude/settings.local.json"];

/// Whether `name` (as written in `import`) is a Claude Code settings file.
pub fn is_name(name: &str) -> bool {
    NAMES.contains(&name)
}

/// Where the workspace is, to map `//abs` and `~/p` paths into it.
#[derive(Clone, Debug, Default)]
pub struct Context {
    /// The workspace root's absolute path (no trailing `/`).
    pub workspace: Option<Vec<u8>>,
    /// The home directory's absolute path (no trailing `/`).
    pub home: Option<Vec<u8>>,
}

/// One entry of the settings that maps to a veilfs rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapped {
    pub action: Action,
    /// The gitignore line, relative to the workspace root.
    pub line: String,
    /// The entry as written (`Read(./.env)`).
    pub entry: String,
    /// The 1-based line of the settings file it is on (0: not found).
    pub at: u32,
}

/// Something `check` says about an entry: not applied, or applied differently.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// The 1-based line of the settings file (0: the file as a whole).
    pub at: u32,
    pub message: String,
}

/// A settings file, translated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Translation {
    pub mapped: Vec<Mapped>,
    pub notes: Vec<Note>,
}

/// The file-tool family of a rule's tool name.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tool {
    Read,
    Edit,
}

fn tool(name: &str) -> Option<Tool> {
    match name {
        "Read" => Some(Tool::Read),
        "Edit" | "Write" | "MultiEdit" | "NotebookEdit" => Some(Tool::Edit),
        _ => None,
    }
}

/// Translates the text of a settings file. An `Err` is a file that is not JSON of
/// the documented shape: its rules could not be honoured, so the load stops.
pub fn translate(text: &str, cx: &Context) -> Result<Translation, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let mut out = Translation::default();
    let Some(top) = value.as_object() else {
        return Err("not a JSON object".into());
    };
    let Some(perms) = top.get("permissions") else {
        return Ok(out);
    };
    let Some(perms) = perms.as_object() else {
        return Err("`permissions` is not an object".into());
    };
    let lines = LineFinder::new(text);
    let mut allows = 0usize;
    for list in ["deny", "ask", "allow"] {
        let Some(entries) = perms.get(list) else {
            continue;
        };
        let Some(entries) = entries.as_array() else {
            return Err(format!("`permissions.{list}` is not a list"));
        };
        for e in entries {
            let Some(entry) = e.as_str() else {
                out.notes.push(Note {
                    at: 0,
                    message: format!(
                        "permissions.{list}: {e} is not a string: not applied (Claude Code \
                         ignores it too)"
                    ),
                });
                continue;
            };
            let at = lines.line_of(entry);
            if list == "allow" {
                allows += 1;
                continue;
            }
            match map_entry(list, entry, cx) {
                Ok((action, line, note)) => {
                    if let Some(message) = note {
                        out.notes.push(Note { at, message });
                    }
                    out.mapped.push(Mapped {
                        action,
                        line,
                        entry: entry.to_string(),
                        at,
                    });
                }
                Err(why) => out.notes.push(Note {
                    at,
                    message: format!("{entry:?} in permissions.{list}: not applied: {why}"),
                }),
            }
        }
    }
    if allows > 0 {
        out.notes.push(Note {
            at: 0,
            message: format!(
                "{allows} permissions.allow rule{} not applied: an allow cannot loosen a \
                 veilfs rule (in Claude Code, too, deny wins over allow)",
                if allows == 1 { " is" } else { "s are" }
            ),
        });
    }
    Ok(out)
}

/// One deny or ask entry: its action, its gitignore line and a note, or why it
/// cannot be applied.
fn map_entry(
    list: &str,
    entry: &str,
    cx: &Context,
) -> Result<(Action, String, Option<String>), String> {
    let (name, spec) = match entry.find('(') {
        Some(i) if entry.ends_with(')') => (&entry[..i], Some(&entry[i + 1..entry.len() - 1])),
        Some(_) => return Err("not of the form Tool or Tool(specifier)".into()),
        None => (entry, None),
    };
    let Some(t) = tool(name.trim()) else {
        return Err(format!(
            "not a rule for reading or editing files ({name}): veilfs polices files, \
             not what a tool does"
        ));
    };
    let action = match (list, t) {
        ("deny", Tool::Read) => Action::Deny,
        ("deny", Tool::Edit) => Action::ReadOnly,
        _ => Action::Ask,
    };
    let mut note = None;
    if list == "ask" && t == Tool::Edit {
        note = Some(format!(
            "{entry:?} in permissions.ask: veilfs asks before reading these paths too (its \
             question covers every use)"
        ));
    }
    let line = match spec {
        None => "*".to_string(),
        Some(s) => gitignore_line(s, cx)?,
    };
    if line == "*" || line == "/**" || line == "**" {
        note = Some(format!(
            "{entry:?} in permissions.{list}: applies to every path of the workspace ({})",
            action.as_str()
        ));
    }
    Ok((action, line, note))
}

/// A Claude Code path specifier as a gitignore line relative to the workspace root.
fn gitignore_line(spec: &str, cx: &Context) -> Result<String, String> {
    if spec.is_empty() {
        return Err("an empty path".into());
    }
    if spec.chars().any(char::is_control) {
        return Err("the path holds a control character".into());
    }
    let rel = if let Some(abs) = spec.strip_prefix("//") {
        let abs = normalized(&format!("/{abs}"));
        into_workspace(abs.as_bytes(), cx)?
    } else if spec == "~" || spec.starts_with("~/") {
        let Some(home) = &cx.home else {
            return Err("a path in the home directory, and no home directory is known".into());
        };
        let mut abs = home.clone();
        abs.extend_from_slice(normalized(&spec[1..]).as_bytes());
        into_workspace(&abs, cx)?
    } else if spec.starts_with('/') {
        match normalized(spec).as_str() {
            "/" => "*".to_string(),
            s => s.to_string(),
        }
    } else {
        match normalized(spec).as_str() {
            "" | "/" => "*".to_string(),
            s => s.to_string(),
        }
    };
    if rel.split('/').any(|seg| seg == "..") {
        return Err("a `..` segment: veilfs does not resolve it".into());
    }
    if rel.starts_with('!') {
        return Err("a leading `!`: Claude Code's rules have no exceptions".into());
    }
    Ok(match rel.strip_prefix('#') {
        Some(rest) => format!("\\#{rest}"),
        None => rel,
    })
}

/// `p` without `.` segments and empty ones (`a/./b`, `a//b` are `a/b`), its
/// leading and trailing `/` kept (they anchor, and mean a directory).
fn normalized(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    if p.starts_with('/') {
        out.push('/');
    }
    let mut first = true;
    for seg in p.split('/').filter(|s| !s.is_empty() && *s != ".") {
        if !first {
            out.push('/');
        }
        out.push_str(seg);
        first = false;
    }
    if p.ends_with('/') && !first {
        out.push('/');
    }
    out
}

/// An absolute path as an anchored line, when it is inside the workspace.
fn into_workspace(abs: &[u8], cx: &Context) -> Result<String, String> {
    let shown = String::from_utf8_lossy(abs);
    let Some(ws) = &cx.workspace else {
        return Err(format!(
            "the absolute path {shown} cannot be placed: the workspace's path is not known"
        ));
    };
    let rest = match abs.strip_prefix(ws.as_slice()) {
        Some([]) => return Ok("*".to_string()),
        Some(rest) if rest.starts_with(b"/") => rest,
        _ => {
            return Err(format!(
                "{shown} is outside the workspace (veilfs polices the workspace; under \
                 `veilfs run` the home policy decides the home directory)"
            ));
        }
    };
    let rest = String::from_utf8_lossy(rest).into_owned();
    if rest == "/" {
        return Ok("*".to_string());
    }
    Ok(rest)
}

/// Finds the line each entry is written on (the first occurrence of its JSON
/// spelling not yet given to an earlier entry).
struct LineFinder<'a> {
    text: &'a str,
    used: std::cell::RefCell<Vec<usize>>,
}

impl<'a> LineFinder<'a> {
    fn new(text: &'a str) -> LineFinder<'a> {
        LineFinder {
            text,
            used: std::cell::RefCell::new(Vec::new()),
        }
    }

    fn line_of(&self, entry: &str) -> u32 {
        let Ok(needle) = serde_json::to_string(entry) else {
            return 0;
        };
        let mut used = self.used.borrow_mut();
        let mut from = 0;
        while let Some(i) = self.text[from..].find(&needle) {
            let at = from + i;
            if !used.contains(&at) {
                used.push(at);
                let line = self.text[..at].bytes().filter(|&b| b == b'\n').count() + 1;
                return u32::try_from(line).unwrap_or(0);
            }
            from = at + needle.len();
        }
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cx() -> Context {
        Context {
            workspace: Some(b"/home/me/proj".to_vec()),
            home: Some(b"/home/me".to_vec()),
        }
    }

    #[test]
    fn path_forms() {
        let cx = cx();
        assert_eq!(gitignore_line("./.env", &cx).unwrap(), ".env");
        assert_eq!(gitignore_line(".env", &cx).unwrap(), ".env");
        assert_eq!(gitignore_line("./secrets/**", &cx).unwrap(), "secrets/**");
        assert_eq!(gitignore_line("/src/**/*.ts", &cx).unwrap(), "/src/**/*.ts");
        assert_eq!(
            gitignore_line("//home/me/proj/config/*.yaml", &cx).unwrap(),
            "/config/*.yaml"
        );
        assert_eq!(gitignore_line("~/proj/.npmrc", &cx).unwrap(), "/.npmrc");
        assert_eq!(gitignore_line("//home/me/proj", &cx).unwrap(), "*");
        assert_eq!(gitignore_line("#x", &cx).unwrap(), "\\#x");
        assert_eq!(gitignore_line("./a/./b/p10", &cx).unwrap(), "a/b/p10");
        assert_eq!(
            gitignore_line("cfg2//token.txt", &cx).unwrap(),
            "cfg2/token.txt"
        );
        assert_eq!(gitignore_line("./build/", &cx).unwrap(), "build/");
        assert_eq!(gitignore_line("/./x", &cx).unwrap(), "/x");
        assert_eq!(gitignore_line("//home/me//proj/./p4", &cx).unwrap(), "/p4");
        assert_eq!(gitignore_line("~/proj/./.npmrc", &cx).unwrap(), "/.npmrc");
        assert_eq!(gitignore_line("./", &cx).unwrap(), "*");
        assert!(gitignore_line("//home/me/projx/a", &cx).is_err());
        assert!(gitignore_line("~/.ssh/**", &cx).is_err());
        assert!(gitignore_line("../up", &cx).is_err());
        assert!(gitignore_line("a\nb", &cx).is_err());
        assert!(gitignore_line("!a", &cx).is_err());
    }

    #[test]
    fn lines_found() {
        let text =
            "{\n \"permissions\": {\n  \"deny\": [\n   \"Read(a)\",\n   \"Read(a)\"\n  ]\n }\n}";
        let t = translate(text, &cx()).unwrap();
        let at: Vec<u32> = t.mapped.iter().map(|m| m.at).collect();
        assert_eq!(at, vec![4, 5]);
    }
}
