//! The import graph, read from the sources: no cycle between the core's
//! top-level modules, none between the server crate's modules or files, and
//! no core module importing from a layer above its own.
//!
//! An import is any path that starts with `crate::`, `super::` or `self::`
//! (in `use` trees, which are expanded, and in expressions, types and
//! attributes), or with the name of a child module of the file's own module.
//! Comments are skipped; test modules count like any other code. A path is
//! resolved to the longest module prefix that is a file; anything else
//! (`crate::X` for an item of the crate root, external crates) is no edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The core's layers, bottom first. A module may import from its own layer
/// (the cycle check covers those) and from any below, never from above.
const CORE_LAYERS: &[&[&str]] = &[
    &[
        "ids",
        "clock",
        "tool_name",
        "text",
        "error_type",
        "bounded_cache",
        "offload",
    ],
    &["model"],
    &["schema"],
    &["contract"],
    &["prompt"],
    &["conversation"],
    &["store", "tools", "events", "budget"],
    &["trace"],
    &["turn"],
    &["history"],
    &["session"],
];

/// Imports known to break the rules, each with why it is still here:
/// (importing file, imported path). Exactly these; nothing else is waived.
const PENDING: &[(&str, &str)] = &[];

/// One source file: where it is and the module path it defines.
struct SourceFile {
    /// Relative to the workspace root, for messages and `PENDING`.
    name: String,
    module: Vec<String>,
    text: String,
}

/// An import: the module (as its path) a file reaches, and the path that did.
struct Import {
    file: String,
    from: Vec<String>,
    to: Vec<String>,
    path: String,
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `root` except those under `skip` (other crates,
/// binaries whose root is not the library).
fn sources(root: &Path, skip: &[&str]) -> Vec<SourceFile> {
    let mut files = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|error| panic!("read {}: {error}", dir.display()))
            .map(|entry| entry.expect("directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            let relative = path.strip_prefix(root).expect("under root");
            if skip.iter().any(|skipped| relative.starts_with(skipped)) {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                let mut module: Vec<String> = relative
                    .with_extension("")
                    .components()
                    .map(|part| part.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if matches!(
                    module.last().map(String::as_str),
                    Some("lib" | "mod" | "main")
                ) {
                    module.pop();
                }
                let text = std::fs::read_to_string(&path).expect("read source");
                let name = path
                    .strip_prefix(workspace())
                    .expect("in the workspace")
                    .to_string_lossy()
                    .into_owned();
                files.push(SourceFile {
                    name,
                    module,
                    text: strip_comments(&text),
                });
            }
        }
    }
    files
}

/// The code of `text`: comments (doc comments included) removed, string
/// literals emptied and character literals blanked, so that neither a path
/// in prose nor a brace in a literal counts.
fn strip_comments(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut kept_from = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                // `r"…"`, `r#"…"#`, `br#"…"#`: the hashes before the quote
                // close it too; a plain string ends at an unescaped quote.
                let hashes = bytes[..i].iter().rev().take_while(|&&b| b == b'#').count();
                let raw = i > hashes && bytes[i - hashes - 1] == b'r';
                out.push_str(&text[kept_from..=i]);
                i += 1;
                while i < bytes.len() {
                    if !raw && bytes[i] == b'\\' {
                        i += 2;
                        continue;
                    }
                    if bytes[i] == b'"'
                        && bytes[i + 1..]
                            .iter()
                            .take(hashes)
                            .filter(|&&b| b == b'#')
                            .count()
                            == if raw { hashes } else { 0 }
                    {
                        break;
                    }
                    i += 1;
                }
                kept_from = i.min(bytes.len());
                i += 1;
                continue;
            }
            // A character literal: 'x', '"', '{', '\'', '\\' and the like.
            b'\''
                if bytes.get(i + 2) == Some(&b'\'')
                    || (bytes.get(i + 1) == Some(&b'\\') && bytes.get(i + 3) == Some(&b'\'')) =>
            {
                let end = if bytes[i + 1] == b'\\' { i + 3 } else { i + 2 };
                out.push_str(&text[kept_from..i]);
                out.push_str("' '");
                i = end + 1;
                kept_from = i;
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                out.push_str(&text[kept_from..i]);
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                kept_from = i;
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                out.push_str(&text[kept_from..i]);
                i = text[i + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |at| i + 2 + at + 2);
                kept_from = i;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out.push_str(&text[kept_from.min(text.len())..]);
    out
}

fn is_ident_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// The identifier at `at`, if one starts there.
fn ident_at(text: &str, at: usize) -> Option<&str> {
    if !text.is_char_boundary(at) {
        return None;
    }
    let end = text[at..]
        .bytes()
        .position(|byte| !is_ident_byte(byte))
        .map_or(text.len(), |len| at + len);
    (end > at).then(|| &text[at..end])
}

/// Expands the use tree at `at` (just past a `::`) under `prefix`, adding
/// each path it names to `out`; returns where the tree ends.
fn expand_tree(
    text: &str,
    mut at: usize,
    prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    let bytes = text.as_bytes();
    let skip_space = |mut at: usize| {
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        at
    };
    at = skip_space(at);
    if bytes.get(at) == Some(&b'{') {
        at += 1;
        loop {
            at = skip_space(at);
            match bytes.get(at) {
                None => return at,
                Some(b'}') => return at + 1,
                Some(b',') => at += 1,
                _ => {
                    let next = expand_tree(text, at, prefix.clone(), out);
                    // A glob or anything unexpected: step over it.
                    at = if next == at { at + 1 } else { next };
                }
            }
        }
    }
    let mut path = prefix;
    while let Some(ident) = ident_at(text, at) {
        path.push(ident.to_string());
        at += ident.len();
        if text[at..].starts_with("::") {
            at += 2;
            at = skip_space(at);
            if bytes.get(at) == Some(&b'{') {
                return expand_tree(text, at, path, out);
            }
        } else {
            break;
        }
    }
    out.push(path);
    at
}

/// Every path of `text` that starts with `crate`, `super`, `self` or one of
/// `children`, each as written (`super` steps kept), with the inline modules
/// (`mod tests { … }`) it is written in, innermost last.
fn paths_in(text: &str, children: &BTreeSet<String>) -> Vec<(Vec<String>, Vec<String>)> {
    let bytes = text.as_bytes();
    let mut paths = Vec::new();
    // Inline modules open at this point, each with the brace depth inside it.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'{' => depth += 1,
            b'}' => {
                if inline.last().is_some_and(|(_, inside)| *inside == depth) {
                    inline.pop();
                }
                depth -= 1;
            }
            _ => {}
        }
        let starts_word = at == 0 || !(is_ident_byte(bytes[at - 1]) || bytes[at - 1] == b':');
        let Some(ident) = ident_at(text, at).filter(|_| starts_word) else {
            at += 1;
            continue;
        };
        let after = at + ident.len();
        if ident == "mod" {
            let name_at = after + text[after..].len() - text[after..].trim_start().len();
            if let Some(name) = ident_at(text, name_at) {
                let rest = text[name_at + name.len()..].trim_start();
                if rest.starts_with('{') {
                    inline.push((name.to_string(), depth + 1));
                }
            }
            at = after;
            continue;
        }
        let rooted = matches!(ident, "crate" | "super" | "self")
            || (inline.is_empty() && children.contains(ident));
        if rooted && text[after..].starts_with("::") {
            let mut found = Vec::new();
            at = expand_tree(text, at, Vec::new(), &mut found);
            let names: Vec<String> = inline.iter().map(|(name, _)| name.clone()).collect();
            paths.extend(found.into_iter().map(|path| (names.clone(), path)));
        } else {
            at = after;
        }
    }
    paths
}

/// The imports of every file among `files`, resolved to the longest module
/// prefix that is one of the files.
fn imports(files: &[SourceFile]) -> Vec<Import> {
    let modules: BTreeSet<Vec<String>> = files.iter().map(|file| file.module.clone()).collect();
    let mut found = Vec::new();
    for file in files {
        let children: BTreeSet<String> = modules
            .iter()
            .filter(|module| {
                module.len() == file.module.len() + 1 && module.starts_with(&file.module)
            })
            .map(|module| module[module.len() - 1].clone())
            .collect();
        for (inline, path) in paths_in(&file.text, &children) {
            let here: Vec<String> = file.module.iter().chain(&inline).cloned().collect();
            let mut absolute: Vec<String> = Vec::new();
            let mut rest = path.as_slice();
            match rest.first().map(String::as_str) {
                Some("crate") => rest = &rest[1..],
                Some("self") => {
                    absolute = here;
                    rest = &rest[1..];
                }
                Some("super") => {
                    absolute = here;
                    while rest.first().is_some_and(|step| step == "super") {
                        absolute.pop();
                        rest = &rest[1..];
                    }
                }
                // A child module, named from its parent.
                _ => absolute = here,
            }
            absolute.extend(rest.iter().cloned());
            let target = (1..=absolute.len())
                .rev()
                .map(|len| absolute[..len].to_vec())
                .find(|prefix| modules.contains(prefix));
            if let Some(target) = target {
                if target != file.module {
                    found.push(Import {
                        file: file.name.clone(),
                        from: file.module.clone(),
                        to: target,
                        path: absolute.join("::"),
                    });
                }
            }
        }
    }
    found.retain(|import| {
        !PENDING
            .iter()
            .any(|(file, path)| import.file == *file && import.path.starts_with(path))
    });
    found
}

/// The graph between modules `node` maps them to, with one import as the
/// evidence of each edge.
fn graph(
    imports: &[Import],
    node: impl Fn(&[String]) -> String,
) -> BTreeMap<String, BTreeMap<String, &Import>> {
    let mut edges: BTreeMap<String, BTreeMap<String, &Import>> = BTreeMap::new();
    for import in imports {
        let (from, to) = (node(&import.from), node(&import.to));
        if from != to {
            edges.entry(from).or_default().entry(to).or_insert(import);
        }
    }
    edges
}

/// One cycle of the graph, if it has any: the nodes in order, each with the
/// import that leads to the next.
fn find_cycle(edges: &BTreeMap<String, BTreeMap<String, &Import>>) -> Option<Vec<String>> {
    // Depth-first search; `on_path` holds the current path.
    fn visit<'a>(
        node: &'a str,
        edges: &'a BTreeMap<String, BTreeMap<String, &Import>>,
        done: &mut BTreeSet<&'a str>,
        on_path: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(start) = on_path.iter().position(|seen| *seen == node) {
            let cycle = &on_path[start..];
            return Some(
                cycle
                    .iter()
                    .enumerate()
                    .map(|(i, from)| {
                        let to = cycle[(i + 1) % cycle.len()];
                        let import = edges[*from][to];
                        format!("{from} -> {to} ({}: {})", import.file, import.path)
                    })
                    .collect(),
            );
        }
        if !done.insert(node) {
            return None;
        }
        on_path.push(node);
        for next in edges
            .get(node)
            .into_iter()
            .flat_map(|targets| targets.keys())
        {
            if let Some(cycle) = visit(next, edges, done, on_path) {
                return Some(cycle);
            }
        }
        on_path.pop();
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|node| visit(node, edges, &mut done, &mut Vec::new()))
}

fn assert_acyclic(what: &str, edges: &BTreeMap<String, BTreeMap<String, &Import>>) {
    if let Some(cycle) = find_cycle(edges) {
        panic!("an import cycle between {what}:\n  {}", cycle.join("\n  "));
    }
}

fn top_level(module: &[String]) -> String {
    module.first().cloned().unwrap_or_else(|| "lib".to_string())
}

fn whole(module: &[String]) -> String {
    if module.is_empty() {
        "lib".to_string()
    } else {
        module.join("::")
    }
}

fn core_imports() -> Vec<Import> {
    imports(&sources(&workspace().join("actors/src"), &[]))
}

/// The server crate; `socketio/` is a crate of its own, `bin/` and `main.rs`
/// are binaries over the library.
fn server_imports() -> Vec<Import> {
    imports(&sources(
        &workspace().join("src"),
        &["socketio", "bin", "main.rs"],
    ))
}

#[test]
fn the_core_has_no_import_cycle() {
    let imports = core_imports();
    assert!(imports.len() > 100, "the scan found the core's imports");
    assert_acyclic("the core's top-level modules", &graph(&imports, top_level));
}

#[test]
fn no_core_module_imports_from_a_layer_above_it() {
    let layer_of = |module: &str| {
        CORE_LAYERS
            .iter()
            .position(|layer| layer.contains(&module))
            .unwrap_or_else(|| {
                panic!("actors/src/{module}: put the new module in a layer of CORE_LAYERS")
            })
    };
    let upward: Vec<String> = core_imports()
        .iter()
        .filter(|import| !import.from.is_empty())
        .filter(|import| layer_of(&import.to[0]) > layer_of(&import.from[0]))
        .map(|import| format!("{} imports {} (a layer above)", import.file, import.path))
        .collect();
    assert!(upward.is_empty(), "{}", upward.join("\n"));
}

#[test]
fn the_server_has_no_import_cycle() {
    let imports = server_imports();
    assert!(imports.len() > 100, "the scan found the server's imports");
    assert_acyclic(
        "the server's top-level modules",
        &graph(&imports, top_level),
    );
    assert_acyclic("the server's files", &graph(&imports, whole));
}

#[test]
fn a_cycle_is_found_and_named() {
    let file = |name: &str, module: &[&str], text: &str| SourceFile {
        name: name.to_string(),
        module: module.iter().map(|part| part.to_string()).collect(),
        text: strip_comments(text),
    };
    let files = [
        file("lib.rs", &[], "mod a; mod b; mod c;"),
        file(
            "a.rs",
            &["a"],
            "use crate::{b::{B, Other}, x};\n// use crate::c::C;",
        ),
        file("b.rs", &["b"], "fn f() -> super::c::C { todo!() }"),
        file("c.rs", &["c"], "use d::D;\nstruct C(crate::a::A);"),
        file(
            "c/d.rs",
            &["c", "d"],
            "pub struct D;\nconst S: &str = \"crate::a {\";\nconst R: &str = r#\"\"crate::b\"\"#;\n\
             mod tests { use super::*; fn f() { let _ = '{'; } }\nfn g() -> super::D { D }",
        ),
    ];
    let imports = imports(&files);
    let seen: Vec<String> = imports
        .iter()
        .map(|import| format!("{} {}", import.file, import.path))
        .collect();
    assert_eq!(
        seen,
        [
            "a.rs b::B",
            "a.rs b::Other",
            "b.rs c::C",
            "c.rs c::d::D",
            "c.rs a::A",
            "c/d.rs c::D"
        ]
    );
    let cycle = find_cycle(&graph(&imports, top_level)).expect("a -> b -> c -> a");
    assert_eq!(
        cycle,
        [
            "a -> b (a.rs: b::B)",
            "b -> c (b.rs: c::C)",
            "c -> a (c.rs: a::A)"
        ]
    );
    assert!(find_cycle(&graph(&imports[..4], whole)).is_none());
}
