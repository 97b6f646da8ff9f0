//! ARCHITECTURE.md names every source file, and every `.rs` path it writes
//! exists (from the root, or from the folder of the heading it is under;
//! outside folder headings only paths from the root are checked).
//! The rule (stated at the top of ARCHITECTURE.md): a `.rs` file is named
//! when its path from the repository root is in backticks anywhere, or when
//! its path from a heading's folder (the heading's first backticked token
//! ending in `/`) is in backticks in that heading's section. Files are those
//! of the whole repository, outside `target/`, `node_modules/` and hidden
//! folders, so a new crate's files are counted too.

use std::collections::BTreeSet;
use std::path::Path;

/// Folders that hold no source of ours.
const SKIPPED_FOLDERS: &[&str] = &["target", "node_modules"];

/// Where a path outside a folder heading must start for it to be checked.
const ROOTS: &[&str] = &["src/", "actors/", "benches/", "examples/", "tests/"];

#[test]
fn architecture_names_every_source_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("read ARCHITECTURE.md");
    let mut files = BTreeSet::new();
    source_files(root, root, &mut files);
    assert!(files.contains("src/main.rs"), "found {files:?}");
    let named = named_paths(&text);
    let missing: Vec<&String> = files.iter().filter(|file| !named.contains(*file)).collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md does not name {} source file(s); add one line for each under \
         its folder's heading (see the rule at the top of ARCHITECTURE.md):\n{}",
        missing.len(),
        lines(&missing)
    );
}

#[test]
fn every_source_path_architecture_writes_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("read ARCHITECTURE.md");
    let mut stale = Vec::new();
    for (folder, token) in tokens(&text) {
        let checked = token.ends_with(".rs")
            && (folder.is_some() || ROOTS.iter().any(|start| token.starts_with(start)))
            && !token.contains(['*', '{', ' ', '<']);
        if !checked {
            continue;
        }
        let from_folder = folder.as_ref().map(|folder| format!("{folder}{token}"));
        let exists = root.join(&token).is_file()
            || from_folder.is_some_and(|path| root.join(path).is_file());
        if !exists {
            stale.push(match folder {
                Some(folder) => format!("{token} (under the heading of {folder})"),
                None => token,
            });
        }
    }
    assert!(
        stale.is_empty(),
        "ARCHITECTURE.md names {} path(s) that do not exist (moved or removed?):\n{}",
        stale.len(),
        lines(&stale.iter().collect::<Vec<_>>())
    );
}

/// The `.rs` files under `dir`, as paths from `root` with `/` separators.
fn source_files(root: &Path, dir: &Path, files: &mut BTreeSet<String>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|error| panic!("read {dir:?}: {error}"));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if path.is_dir() {
            if !name.starts_with('.') && !SKIPPED_FOLDERS.contains(&name.as_ref()) {
                source_files(root, &path, files);
            }
        } else if name.ends_with(".rs") {
            let relative = path.strip_prefix(root).expect("under the root");
            let parts: Vec<String> = relative
                .components()
                .map(|part| part.as_os_str().to_string_lossy().into_owned())
                .collect();
            files.insert(parts.join("/"));
        }
    }
}

/// Every path the document names: each backticked token as written (from
/// the root) and, inside a folder heading's section, joined to that folder.
fn named_paths(text: &str) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    for (folder, token) in tokens(text) {
        if let Some(folder) = folder {
            named.insert(format!("{folder}{token}"));
        }
        named.insert(token);
    }
    named
}

/// Each backticked token with the folder of the heading it is under (`None`
/// under a heading that names no folder); code blocks are skipped.
fn tokens(text: &str) -> Vec<(Option<String>, String)> {
    let mut tokens = Vec::new();
    let mut folder: Option<String> = None;
    let mut in_code_block = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code_block = !in_code_block;
            continue;
        }
        if in_code_block {
            continue;
        }
        let spans = backticked(line);
        if line.starts_with('#') {
            folder = spans.iter().find(|span| span.ends_with('/')).cloned();
            continue;
        }
        for span in spans {
            tokens.push((folder.clone(), span));
        }
    }
    tokens
}

/// The text between each pair of backticks on `line`.
fn backticked(line: &str) -> Vec<String> {
    line.split('`')
        .skip(1)
        .step_by(2)
        .map(|span| span.trim_start_matches("./").to_string())
        .collect()
}

fn lines(paths: &[&String]) -> String {
    paths
        .iter()
        .map(|path| format!("  {path}"))
        .collect::<Vec<_>>()
        .join("\n")
}
