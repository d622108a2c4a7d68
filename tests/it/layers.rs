//! The house rules CI can check: the library's folders under `src/` depend on each other without
//! a cycle (a newcomer can learn, test and split them one layer at a time), and within any
//! folder no two files import each other, directly or around a circle. Dependencies are read
//! from the code itself: every `use crate::…`, `use super::…` and inline `crate::…` path
//! outside comments, strings and `#[cfg(test)] mod tests`, resolved to the file that defines the
//! item (through a `mod.rs`'s `pub use` re-exports).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path from its crate's root (`["run", "execute", "core"]`).
type ModPath = Vec<String>;

/// One crate of the package: its files by module path.
struct Crate {
    files: BTreeMap<ModPath, String>,
    /// `(module, item)` → the child module a `mod.rs` re-exports it from.
    reexports: BTreeMap<(ModPath, String), ModPath>,
}

/// The library's source folder.
pub(super) fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, in sorted order.
pub(super) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file relative to `src/` (`run/execute/mod.rs` → `["run", "execute"]`).
fn module_of(rel: &Path) -> ModPath {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts
        .last()
        .is_some_and(|p| p == "mod" || p == "lib" || p == "main")
    {
        parts.pop();
    }
    parts
}

/// `text` without comments, string and char literals (each replaced by a space) and without
/// the unit-test module at its end.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == '*' && b[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && raw_string_start(&b, i) {
            let mut hashes = 0;
            i += 1;
            while b.get(i) == Some(&'#') {
                hashes += 1;
                i += 1;
            }
            i += 1; // the opening quote
            loop {
                if i >= b.len() {
                    break;
                }
                if b[i] == '"' && (1..=hashes).all(|k| b.get(i + k) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
            out.push(' ');
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push(' ');
        } else if c == '\'' && (next == Some('\\') || b.get(i + 2) == Some(&'\'')) {
            // a char literal ('x', '\n', '\''); a lifetime has no closing quote
            i += 1;
            if b.get(i) == Some(&'\\') {
                i += 1;
            }
            i += 1;
            while i < b.len() && b[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push(' ');
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Whether `b[i..]` starts a raw string (`r"`, `r#"`) rather than an identifier ending in `r`.
fn raw_string_start(b: &[char], i: usize) -> bool {
    let before = i.checked_sub(1).map(|j| b[j]);
    if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
        return false;
    }
    let mut j = i + 1;
    while b.get(j) == Some(&'#') {
        j += 1;
    }
    b.get(j) == Some(&'"')
}

/// The paths of a `use` tree (`crate::a::{b, c::{D, E}}` → `crate::a::b`, `crate::a::c::D`, …).
fn expand(tree: &str) -> Vec<String> {
    let tree: String = tree.split_whitespace().collect::<Vec<_>>().join("");
    let Some(open) = tree.find('{') else {
        return vec![tree.split(" as ").next().unwrap_or("").to_string()];
    };
    let base = tree[..open].trim_end_matches("::");
    let inner = &tree[open + 1..tree.len().saturating_sub(1)];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (k, ch) in inner.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .flat_map(expand)
        .map(|p| match (base.is_empty(), p.as_str()) {
            (true, _) => p,
            (false, "self") => base.to_string(),
            (false, _) => format!("{base}::{p}"),
        })
        .collect()
}

/// Every path the code of a file names: its `use` trees and its inline `crate::`/`super::`
/// paths.
fn named_paths(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = code.to_string();
    while let Some(i) = find_use(&rest) {
        let end = rest[i..].find(';').map_or(rest.len(), |e| i + e);
        let tree = rest[i + 4..end].trim().to_string();
        paths.extend(expand(&tree));
        rest.replace_range(i..end, "");
    }
    let chars: Vec<char> = rest.chars().collect();
    let text: String = chars.iter().collect();
    for root in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(k) = text[from..].find(root) {
            let at = from + k;
            let starts_word = at == 0
                || !text[..at]
                    .chars()
                    .last()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':');
            let end = text[at..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .map_or(text.len(), |e| at + e);
            if starts_word {
                paths.push(text[at..end].trim_end_matches(':').to_string());
            }
            from = end.max(at + root.len());
        }
    }
    paths
}

/// The byte offset of the next `use` keyword that starts a statement in `code`.
fn find_use(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(k) = code[from..].find("use ") {
        let at = from + k;
        let before = code[..at].chars().last();
        let word_start = before.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        if word_start {
            return Some(at);
        }
        from = at + 4;
    }
    None
}

impl Crate {
    fn read(files: &[(PathBuf, ModPath)]) -> Crate {
        let mut out = Crate {
            files: BTreeMap::new(),
            reexports: BTreeMap::new(),
        };
        for (path, module) in files {
            let code = code_of(&std::fs::read_to_string(path).unwrap());
            if path.ends_with("mod.rs") || path.ends_with("lib.rs") {
                for line in code.split(';') {
                    let line = line.trim();
                    let Some(tree) = line
                        .strip_prefix("pub use ")
                        .or_else(|| line.strip_prefix("pub(crate) use "))
                    else {
                        continue;
                    };
                    for p in expand(tree) {
                        let segs: Vec<&str> = p.split("::").collect();
                        if segs.len() >= 2 && !matches!(segs[0], "crate" | "super" | "self") {
                            let child = [module.clone(), vec![segs[0].to_string()]].concat();
                            out.reexports
                                .insert((module.clone(), segs[segs.len() - 1].to_string()), child);
                        }
                    }
                }
            }
            out.files.insert(module.clone(), code);
        }
        out
    }

    /// The file module a path from `base` lands in.
    fn resolve(&self, base: &[String], rest: &[&str]) -> ModPath {
        let mut cur: ModPath = base.to_vec();
        for seg in rest {
            let mut next = cur.clone();
            next.push(seg.to_string());
            if self.files.contains_key(&next) {
                cur = next;
                continue;
            }
            if let Some(child) = self.reexports.get(&(cur.clone(), seg.to_string()))
                && self.files.contains_key(child)
            {
                return child.clone();
            }
            break;
        }
        cur
    }

    /// Every module each file module depends on (itself left out).
    fn edges(&self, is_dir: &BTreeSet<ModPath>) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
        let mut edges: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
        for (module, code) in &self.files {
            for path in named_paths(code) {
                let segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
                let Some((&root, mut rest)) = segs.split_first() else {
                    continue;
                };
                let mut base: ModPath = match root {
                    "crate" => Vec::new(),
                    "self" if is_dir.contains(module) => module.clone(),
                    "self" => module.clone(),
                    "super" => {
                        let mut b = module.clone();
                        b.pop();
                        b
                    }
                    _ => continue,
                };
                while rest.first() == Some(&"super") {
                    base.pop();
                    rest = &rest[1..];
                }
                let target = self.resolve(&base, rest);
                if &target != module && !target.is_empty() {
                    edges.entry(module.clone()).or_default().insert(target);
                }
            }
        }
        edges
    }
}

/// The circles (strongly connected sets of two or more) of a graph.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let nodes: Vec<&String> = graph
        .keys()
        .chain(graph.values().flatten())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(n) = stack.pop() {
            for m in graph.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    stack.push(m.clone());
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for n in &nodes {
        if done.contains(*n) || !reachable[n].contains(*n) {
            continue;
        }
        let set: Vec<String> = nodes
            .iter()
            .filter(|m| reachable[n].contains(**m) && reachable[*m].contains(*n))
            .map(|m| m.to_string())
            .collect();
        done.extend(set.iter().cloned());
        out.push(set);
    }
    out
}

/// Folder-level and file-level circles of a crate, as readable lines.
fn violations(krate: &Crate, label: &str) -> Vec<String> {
    let is_dir: BTreeSet<ModPath> = krate
        .files
        .keys()
        .filter(|m| {
            krate
                .files
                .keys()
                .any(|o| o.len() > m.len() && o.starts_with(m))
        })
        .cloned()
        .collect();
    let edges = krate.edges(&is_dir);
    let mut found = Vec::new();
    for folder in std::iter::once(Vec::new()).chain(is_dir.iter().cloned()) {
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, targets) in &edges {
            for b in targets {
                let (Some(ca), Some(cb)) = (child_of(a, &folder), child_of(b, &folder)) else {
                    continue;
                };
                if ca != cb {
                    graph.entry(ca).or_default().insert(cb);
                }
            }
        }
        for circle in circles(&graph) {
            let at = if folder.is_empty() {
                format!("{label} src/")
            } else {
                format!("{label} src/{}/", folder.join("/"))
            };
            let detail: Vec<String> = circle
                .iter()
                .map(|a| {
                    let to: Vec<&String> = graph[a].iter().filter(|b| circle.contains(b)).collect();
                    format!("{a} → {to:?}")
                })
                .collect();
            found.push(format!("{at}: {}", detail.join(", ")));
        }
    }
    found
}

/// The member of `folder` that module `m` lies in (`None` outside the folder).
fn child_of(m: &ModPath, folder: &ModPath) -> Option<String> {
    (m.len() > folder.len() && m.starts_with(folder)).then(|| m[folder.len()].clone())
}

/// The package's files split into the library and the binary (`main.rs`, `cli.rs`,
/// `commands/`).
fn crates() -> (Crate, Crate) {
    let root = src();
    let mut all = Vec::new();
    rust_files(&root, &mut all);
    let (mut lib, mut bin) = (Vec::new(), Vec::new());
    for path in all {
        let rel = path.strip_prefix(&root).unwrap().to_path_buf();
        let module = module_of(&rel);
        let in_bin = rel == Path::new("main.rs")
            || rel == Path::new("cli.rs")
            || rel.starts_with("commands");
        if in_bin {
            bin.push((path, module));
        } else {
            lib.push((path, module));
        }
    }
    (Crate::read(&lib), Crate::read(&bin))
}

#[test]
fn the_source_folders_depend_on_each_other_without_a_cycle_and_no_files_import_in_a_circle() {
    let (lib, bin) = crates();
    assert!(lib.files.len() > 100, "read only {} files", lib.files.len());
    let mut found = violations(&lib, "library");
    found.extend(violations(&bin, "binary"));
    assert!(
        found.is_empty(),
        "the module graph has circles (each line: a folder, then who imports whom):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_layer_check_sees_imports_and_circles() {
    // `use` trees, inline paths and comments
    let code = code_of(
        "use super::a::{b, c::{D, E}};\n// use crate::nope::X;\nlet s = \"crate::str\";\nfn f() { crate::z::g(); }\n",
    );
    let paths = named_paths(&code);
    assert_eq!(
        paths,
        [
            "super::a::b",
            "super::a::c::D",
            "super::a::c::E",
            "crate::z::g"
        ]
    );
    // a circle of three and a one-way edge
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a", "d"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(circles(&graph), vec![vec!["a", "b", "c"]]);
    // the real tree is read: the run executor's core is imported by its siblings
    let (lib, _) = crates();
    let is_dir = BTreeSet::new();
    let edges = lib.edges(&is_dir);
    let solo: ModPath = ["run", "execute", "solo"].map(String::from).to_vec();
    let core: ModPath = ["run", "execute", "core"].map(String::from).to_vec();
    assert!(edges.get(&solo).is_some_and(|t| t.contains(&core)));
}
