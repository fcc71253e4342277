//! The house plan, checked: every path a file names into the crate (`use crate::..`,
//! `super::..`, inline `crate::..` and `$crate::..`, and a path through a module the file
//! declares itself, `child::..`; test code included) is resolved to the file that defines the
//! module, and then
//! - no two files import each other (a folder's `mod.rs` and one of its files included: its
//!   re-exports of its files are its face, not a use), and the imports between files form no
//!   circle at all;
//! - imports between the top-level modules only point down [`LAYERS`];
//! - the waiting core (`core/`, its simulation aside) stands on its own vocabulary: it imports
//!   neither `session` nor `wire`, which implement and adapt its seam instead.
//!
//! A new top-level module takes its place in [`LAYERS`]; a folder's `mod.rs` declares its files
//! and is imported by them only for what it defines itself (its re-exports would make circles).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The layers, bottom first: a module may import its own files and the modules before it.
const LAYERS: &[&str] = &[
    "random", "error", "metrics", "rt", "znode", "core", "wire", "session", "client", "recipes",
    "sim",
];

/// The layers the waiting core must not import: the session layer depends on the core's
/// types (its seam, states and errors), not the reverse.
const CORE_MUST_NOT_IMPORT: &[&str] = &["session", "wire"];

/// Whether `from` -> `to` is the core reaching into a layer of [`CORE_MUST_NOT_IMPORT`]: not
/// allowed, but for the simulation (`core/sim`), which stands in for the session layer.
fn core_reach(from: &Module, to: &Module) -> bool {
    from[0] == "core" && CORE_MUST_NOT_IMPORT.contains(&to[0].as_str())
}

/// A module's path below the crate root (empty for `lib.rs`).
type Module = Vec<String>;

/// Every module file of the library, by module path.
fn module_files(src: &Path) -> BTreeMap<Module, PathBuf> {
    fn walk(dir: &Path, src: &Path, out: &mut BTreeMap<Module, PathBuf>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel: Vec<String> = path
                .strip_prefix(src)
                .unwrap()
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if path.is_dir() {
                walk(&path, src, out);
            } else if let Some(last) = rel.last().and_then(|l| l.strip_suffix(".rs")) {
                let mut module: Module = rel[..rel.len() - 1].to_vec();
                match last {
                    "lib" if module.is_empty() => {}
                    "mod" => {}
                    other => module.push(other.to_owned()),
                }
                out.insert(module, path);
            }
        }
    }
    let mut files = BTreeMap::new();
    walk(src, src, &mut files);
    files
}

/// `text` without comments (doc links are no imports) and without string literals.
fn code_of(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let (next, after_next) = (chars.peek().copied(), chars.clone().nth(1));
        match (c, next.as_ref()) {
            ('/', Some('/')) => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            // A char literal ('{', '\'', '"'), not a lifetime ('a): blanked, braces included.
            ('\'', _) if next == Some('\\') || after_next == Some('\'') => {
                let mut escaped = false;
                for c in chars.by_ref() {
                    match c {
                        '\\' if !escaped => escaped = true,
                        '\'' if !escaped => break,
                        _ => escaped = false,
                    }
                }
                out.push_str("' '");
            }
            ('"', _) => {
                let mut escaped = false;
                for c in chars.by_ref() {
                    match c {
                        '\\' if !escaped => escaped = true,
                        '"' if !escaped => break,
                        _ => escaped = false,
                    }
                }
                out.push_str("\"\"");
            }
            _ => out.push(c),
        }
    }
    out
}

/// `a::{b, c::{d, e as f}}` as `[a::b, a::c::d, a::c::e]`.
fn expand_use(tree: &str) -> Vec<String> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = tree.find('{') else {
        return vec![tree.split("as").next().unwrap_or_default().to_owned()];
    };
    let (prefix, inner) = (&tree[..open], &tree[open + 1..tree.rfind('}').unwrap()]);
    let (mut parts, mut depth, mut part) = (Vec::new(), 0, String::new());
    for c in inner.chars() {
        match c {
            ',' if depth == 0 => parts.push(std::mem::take(&mut part)),
            '{' => {
                depth += 1;
                part.push(c);
            }
            '}' => {
                depth -= 1;
                part.push(c);
            }
            _ => part.push(c),
        }
    }
    parts.push(part);
    parts
        .iter()
        .filter(|p| !p.is_empty())
        .flat_map(|p| expand_use(&format!("{prefix}{p}")))
        .collect()
}

/// The `crate::`, `$crate::`, `self::` and `super::` paths `code` names, and those through
/// one of `children` (the modules its file declares, each as `name::`), each with where it
/// is named (for the inline modules around it).
fn paths_named(code: &str, children: &[String]) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    let mut from = 0;
    for statement in code.split(';') {
        let at = from;
        from += statement.len() + 1;
        let trimmed = statement.trim();
        let last = trimmed
            .rsplit_once('\n')
            .map_or(trimmed, |(_, last)| last)
            .trim_start();
        for prefix in ["use ", "pub use ", "pub(crate) use ", "pub(super) use "] {
            if let Some(tree) = last.strip_prefix(prefix) {
                found.extend(
                    expand_use(tree)
                        .into_iter()
                        .map(|p| (p, at + statement.len())),
                );
            }
        }
    }
    let bytes = code.as_bytes();
    let starts = ["crate::", "super::", "self::"].map(str::to_owned);
    for start in starts.iter().chain(children) {
        for (at, _) in code.match_indices(start) {
            let before = at.checked_sub(1).map(|b| bytes[b]);
            let is_path_start = before.is_none_or(|b| !(b.is_ascii_alphanumeric() || b == b'_'));
            if !is_path_start || before == Some(b':') {
                continue;
            }
            let path: String = code[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            found.push((path.trim_end_matches(':').to_owned(), at));
        }
    }
    found
}

/// The spans of the re-exports (`pub use ..;`, `pub(crate) use ..;`) in `code`, each to its
/// `;`: a folder's face, which hands its files' items on without using them.
fn reexports(code: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut line_start = 0;
    for line in code.split_inclusive('\n') {
        let text = line.trim_start();
        let start = line_start + (line.len() - text.len());
        line_start += line.len();
        if ["pub use ", "pub(crate) use ", "pub(super) use "]
            .iter()
            .any(|p| text.starts_with(p))
        {
            let end = code[start..].find(';').map_or(code.len(), |e| start + e);
            spans.push((start, end));
        }
    }
    spans
}

/// The spans of the inline modules (`mod tests { .. }`) in `code`.
fn inline_modules(code: &str) -> Vec<(usize, usize)> {
    let bytes = code.as_bytes();
    let mut spans = Vec::new();
    for (at, _) in code.match_indices("mod ") {
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
            continue;
        }
        let rest = &code[at + 4..];
        let name_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let after = rest[name_len..].trim_start();
        if !after.starts_with('{') {
            continue; // `mod x;`: a file of its own.
        }
        let open = code.len() - after.len();
        let mut depth = 0;
        for (i, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        spans.push((open, open + i));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    spans
}

/// Items the crate root re-exports (`pub use a::b::X`), so that `crate::X` names `a::b`.
fn root_items(lib: &str) -> BTreeMap<String, Module> {
    let mut items = BTreeMap::new();
    for (path, _) in paths_named(&code_of(lib), &[]) {
        let mut segments: Vec<String> = path.split("::").map(str::to_owned).collect();
        if segments[0] == "crate" {
            segments.remove(0);
        }
        if let Some(item) = segments.pop() {
            items.insert(item, segments);
        }
    }
    items
}

/// The module file a path from `here` leads to: its longest prefix that is a module.
fn resolve(
    path: &str,
    here: &Module,
    files: &BTreeMap<Module, PathBuf>,
    root: &BTreeMap<String, Module>,
) -> Option<Module> {
    let mut segments: Vec<&str> = path.split("::").collect();
    let mut module: Module = match segments[0] {
        "crate" => {
            segments.remove(0);
            if let Some(reexported) = segments.first().and_then(|s| root.get(*s)) {
                if !files.contains_key(&vec![segments[0].to_owned()]) {
                    return Some(reexported.clone());
                }
            }
            Vec::new()
        }
        "self" => {
            segments.remove(0);
            here.clone()
        }
        "super" => {
            let mut module = here.clone();
            while segments.first() == Some(&"super") {
                segments.remove(0);
                module.pop();
            }
            module
        }
        // A module declared by the file itself (`mod child;` .. `child::X`).
        child if files.contains_key(&[here.as_slice(), &[child.to_owned()]].concat()) => {
            here.clone()
        }
        _ => return None,
    };
    for segment in segments {
        module.push(segment.to_owned());
        if !files.contains_key(&module) {
            module.pop();
            break;
        }
    }
    Some(module)
}

#[test]
fn imports_point_down_the_layers_and_form_no_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = module_files(&src);
    let root = root_items(&fs::read_to_string(&files[&Vec::new()]).unwrap());
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, path) in &files {
        if module.is_empty() {
            continue; // lib.rs: declarations and re-exports only.
        }
        let code = code_of(&fs::read_to_string(path).unwrap());
        let inline = inline_modules(&code);
        let face = reexports(&code);
        let children: Vec<String> = files
            .keys()
            .filter(|m| m.len() == module.len() + 1 && m.starts_with(module))
            .map(|m| format!("{}::", m[module.len()]))
            .collect();
        for (named, at) in paths_named(&code, &children) {
            // Inside an inline module (`mod tests`), `self` and `super` start one level down
            // per module around: `use super::*` there names the file itself.
            let mut here = module.clone();
            for _ in inline
                .iter()
                .filter(|(open, close)| (*open..*close).contains(&at))
            {
                here.push(String::new());
            }
            match resolve(&named, &here, &files, &root) {
                // A re-export of one of its own files: the folder's face, not a use.
                Some(target)
                    if target.len() == module.len() + 1
                        && target.starts_with(module)
                        && face.iter().any(|(open, end)| (*open..=*end).contains(&at)) => {}
                Some(target)
                    if !target.is_empty()
                        && target != *module
                        && !target.contains(&String::new()) =>
                {
                    edges.entry(module.clone()).or_default().insert(target);
                }
                _ => {}
            }
        }
    }
    let name = |m: &Module| m.join("/");
    let mut problems = BTreeSet::new();
    for (from, targets) in &edges {
        for to in targets {
            if edges.get(to).is_some_and(|back| back.contains(from)) {
                let (a, b) = (name(from).min(name(to)), name(from).max(name(to)));
                problems.insert(format!("{a} and {b} import each other"));
            }
            let (layer_from, layer_to) = (&from[0], &to[0]);
            // The core's reach into the session and the wire is judged below, on its own.
            if layer_from == layer_to || core_reach(from, to) {
                continue;
            }
            let place = |l: &String| LAYERS.iter().position(|x| x == l);
            match (place(layer_from), place(layer_to)) {
                (Some(a), Some(b)) if b > a => {
                    problems.insert(format!(
                        "{} imports {}, a layer above",
                        name(from),
                        name(to)
                    ));
                }
                (Some(_), Some(_)) => {}
                _ => {
                    problems.insert(format!(
                        "{} imports {}: give {layer_from} and {layer_to} a place in LAYERS",
                        name(from),
                        name(to)
                    ));
                }
            }
        }
    }
    for (from, targets) in &edges {
        let in_core = from[0] == "core" && from.get(1).is_none_or(|f| f != "sim");
        for to in targets.iter().filter(|to| in_core && core_reach(from, to)) {
            problems.insert(format!(
                "{} imports {}: the core stands on its own vocabulary",
                name(from),
                name(to)
            ));
        }
    }
    for circle in circles(&edges) {
        let names: Vec<String> = circle.iter().map(name).collect();
        problems.insert(format!("circle: {}", names.join(" -> ")));
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The strongly connected groups of more than one file (Tarjan).
fn circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        found: Vec<Vec<Module>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a Module) {
            let at = self.index.len();
            self.index.insert(v, at);
            self.low.insert(v, at);
            self.stack.push(v);
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.stack.contains(&w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut group = Vec::new();
                while let Some(w) = self.stack.pop() {
                    group.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if group.len() > 1 {
                    self.found.push(group);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

#[test]
fn use_trees_and_paths_are_read_as_written() {
    assert_eq!(
        expand_use("crate::a::{b, c::{d, e as f}}"),
        ["crate::a::b", "crate::a::c::d", "crate::a::c::e"]
    );
    let code =
        code_of("use crate::x::Y; // crate::no\nfn f() { $crate::z::w(); \"crate::s\"; '{'; }");
    let named: Vec<String> = paths_named(&code, &[])
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert_eq!(named, ["crate::x::Y", "crate::x::Y", "crate::z::w"]);
    let code = code_of("mod kid;\nstruct S(kid::K);\nfn f() { other::kid::k(); }");
    let named: Vec<String> = paths_named(&code, &["kid::".to_owned()])
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert_eq!(
        named,
        ["kid::K"],
        "a declared module's path, not one through another"
    );
    let code = code_of("pub use kid::K;\nuse kid::L;\npub(crate) use kid::{\n    M,\n};\n");
    let spans = reexports(&code);
    assert_eq!(spans.len(), 2);
    let faces = paths_named(&code, &["kid::".to_owned()])
        .into_iter()
        .filter(|(_, at)| spans.iter().any(|(open, end)| (*open..=*end).contains(at)))
        .count();
    assert_eq!(
        faces, 3,
        "K twice (the statement and the path), M once; L is a use"
    );
    let code = code_of("mod a;\nmod tests {\n    use super::*;\n}\n");
    let spans = inline_modules(&code);
    assert_eq!(spans.len(), 1);
    let (_, at) = paths_named(&code, &[])[0];
    assert!(spans[0].0 < at && at < spans[0].1);
}
