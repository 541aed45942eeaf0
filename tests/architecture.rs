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
