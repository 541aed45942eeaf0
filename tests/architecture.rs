//! ARCHITECTURE.md stays true: every source path it names exists, and every
//! module directory of `src/` is named in it.

use std::path::Path;

fn text() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md")).unwrap()
}

/// The `src/...` paths ARCHITECTURE.md names in backticks.
fn named() -> Vec<String> {
    text()
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| s.starts_with("src/"))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_path_it_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let names = named();
    assert!(names.len() > 30, "{names:?}");
    let missing: Vec<&String> = names.iter().filter(|p| !root.join(p).exists()).collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names what is not there: {missing:?}"
    );
}

#[test]
fn every_module_directory_is_named() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let names = named();
    for e in std::fs::read_dir(&root).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            let dir = format!("src/{}/", e.file_name().to_string_lossy());
            assert!(
                names.iter().any(|n| n.starts_with(&dir)),
                "ARCHITECTURE.md does not name {dir}"
            );
        }
    }
}

/// The modules of `src/fs/` that a request's decision goes through, and the leaves
/// they share, import each other without a circle (they once went ask → ops →
/// permissive → reply → notice → ops). A module's imports are its `super::NAME`
/// paths outside comments.
#[test]
fn the_decision_path_of_fs_has_no_import_circle() {
    const MODULES: [&str; 10] = [
        "ask",
        "ops",
        "permissive",
        "reply",
        "notice",
        "request",
        "grant",
        "refusal",
        "snapshot",
        "parked",
    ];
    let fs = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/fs");
    let imports = |m: &str| -> Vec<&'static str> {
        let text = std::fs::read_to_string(fs.join(format!("{m}.rs"))).unwrap();
        let code: String = text
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        MODULES
            .iter()
            .copied()
            .filter(|o| *o != m && code.contains(&format!("super::{o}")))
            .collect()
    };
    // Depth-first search for a way back to where it started.
    for start in MODULES {
        let mut stack = vec![(start, vec![start])];
        let mut seen = std::collections::HashSet::new();
        while let Some((m, way)) = stack.pop() {
            for next in imports(m) {
                let mut way = way.clone();
                way.push(next);
                assert!(next != start, "an import circle: {}", way.join(" -> "));
                if seen.insert(next) {
                    stack.push((next, way));
                }
            }
        }
    }
}

/// The code of every `.rs` file under `src/<dir>`, at any depth (or of the file `src/<dir>.rs`),
/// comments left out.
fn code_of(rel: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let mut todo = vec![root.join(rel)];
    while let Some(p) = todo.pop() {
        if p.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                todo.push(e.unwrap().path());
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            files.push(p);
        }
    }
    files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .flat_map(|t| {
            t.lines()
                .map(|l| l.split("//").next().unwrap_or("").to_string())
                .collect::<Vec<_>>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The layers of the filesystem stay apart: the node table knows nothing of
/// policy, and the gatekeeper nothing of operations (a guard answers for a target
/// and an intent; it never calls into `ops` or the filesystem object).
#[test]
fn the_node_table_knows_no_policy_and_the_gatekeeper_no_operation() {
    let inode = code_of("fs/inode.rs");
    assert!(
        !inode.contains("policy") && !inode.contains("Decision"),
        "src/fs/inode.rs uses the policy"
    );
    let gate = code_of("fs/gate");
    for used in ["fs::ops", "super::super::ops", "VeilFs", "fs::ask"] {
        assert!(!gate.contains(used), "src/fs/gate uses {used}");
    }
}

/// The layers import downwards only: nothing below the commands imports a command
/// or `run`, and the policy imports nothing of the filesystem, the session, the
/// workspace on disk or the system (it is pure).
#[test]
fn the_layers_import_downwards_only() {
    for below in ["session", "workspace", "fs", "policy", "sys"] {
        let code = code_of(below);
        for above in ["crate::cmd", "crate::run", "crate::app"] {
            assert!(!code.contains(above), "src/{below} imports {above}");
        }
    }
    let policy = code_of("policy");
    for io in [
        "crate::fs",
        "crate::session",
        "crate::workspace",
        "crate::sys",
    ] {
        assert!(!policy.contains(io), "src/policy imports {io}");
    }
}
