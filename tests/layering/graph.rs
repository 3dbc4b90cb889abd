//! The import graph of a crate's source tree, file by file.
//!
//! Every `src/**/*.rs` file is parsed with `syn`. An edge runs from a file to
//! the file that *defines* a name it takes: through a private `use`, or
//! through a path in the code (`crate::a::B`, `super::c()`, an alias a `use`
//! brought in). Re-exports (`pub use`) are followed to the item's own file
//! and are not edges themselves, so a `mod.rs` that only re-exports its
//! children ties nothing together. A path that names a module and no item
//! in it is no edge either: only the names a file takes count. Test code
//! (`#[cfg(test)]` items and the modules they declare) is left out: it is
//! not part of the built crate and may reach anything it tests.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A module path from the crate root, e.g. `["audit", "store"]`.
pub type ModPath = Vec<String>;

/// One module: a file, or an inline `mod name { … }` inside one.
#[derive(Default)]
struct Module {
    /// The file (relative to the source root) holding this module's items.
    file: PathBuf,
    children: BTreeSet<String>,
    /// Items this module defines by name (types, functions, constants …).
    items: BTreeSet<String>,
    /// `pub use` names: name → the absolute path it stands for.
    reexports: HashMap<String, ModPath>,
    /// `pub use path::*` sources.
    glob_reexports: Vec<ModPath>,
}

/// A `use` or a path in code, as found, before resolution.
struct Reference {
    /// The file the reference is in.
    file: PathBuf,
    /// The absolute path it names.
    path: ModPath,
}

/// The whole tree: every module and every reference found in it.
pub struct SourceTree {
    /// Every file, relative to the source root.
    pub files: Vec<PathBuf>,
    modules: BTreeMap<ModPath, Module>,
    references: Vec<Reference>,
    /// Modules declared `#[cfg(test)]`: test code may reach anything.
    test_only: BTreeSet<ModPath>,
}

/// A file → file import with the names that make it.
pub type Edges = BTreeMap<(PathBuf, PathBuf), BTreeSet<String>>;

/// Why a source tree could not be read.
#[derive(Debug)]
pub struct LoadError(pub String);

impl SourceTree {
    /// Reads and parses every `.rs` file under `src`.
    pub fn load(src: &Path) -> Result<SourceTree, LoadError> {
        let mut tree = SourceTree {
            files: Vec::new(),
            modules: BTreeMap::new(),
            references: Vec::new(),
            test_only: BTreeSet::new(),
        };
        let mut files = Vec::new();
        collect_rs_files(src, &mut files)?;
        files.sort();
        // Child modules first, so that `pub use child::X` resolves in any order.
        for file in &files {
            let relative = file
                .strip_prefix(src)
                .map_err(|e| LoadError(e.to_string()))?;
            let module = module_path_of(relative);
            if let Some((name, parent)) = module.split_last() {
                let parent = tree.modules.entry(parent.to_vec()).or_default();
                parent.children.insert(name.clone());
            }
        }
        let mut parsed = Vec::new();
        for file in files {
            let relative = file
                .strip_prefix(src)
                .map_err(|e| LoadError(e.to_string()))?
                .to_path_buf();
            let text = std::fs::read_to_string(&file)
                .map_err(|e| LoadError(format!("{}: {e}", file.display())))?;
            let syntax = syn::parse_file(&text)
                .map_err(|e| LoadError(format!("{}: {e}", file.display())))?;
            let module = module_path_of(&relative);
            tree.files.push(relative.clone());
            tree.declare(&module, &relative, &syntax.items);
            parsed.push((relative, module, syntax));
        }
        for (relative, module, syntax) in &parsed {
            if tree.is_test_code(module) {
                continue;
            }
            let mut collector = Collector::new(&tree, relative, module.clone());
            collector.items(&syntax.items);
            tree.references.extend(collector.found);
        }
        Ok(tree)
    }

    /// Registers a module's items, children and re-exports (first pass).
    fn declare(&mut self, module: &ModPath, file: &Path, items: &[syn::Item]) {
        if let Some((name, parent)) = module.split_last() {
            self.modules
                .entry(parent.to_vec())
                .or_default()
                .children
                .insert(name.clone());
        }
        let children = self
            .modules
            .get(module)
            .map(|m| m.children.clone())
            .unwrap_or_default();
        let entry = self.modules.entry(module.clone()).or_default();
        entry.file = file.to_path_buf();
        let mut inline = Vec::new();
        for item in items {
            if let Some(name) = item_name(item) {
                entry.items.insert(name);
            }
            match item {
                syn::Item::Use(use_item) if !matches!(use_item.vis, syn::Visibility::Inherited) => {
                    for leaf in use_leaves(&use_item.tree) {
                        let Some(path) = absolute(module, &leaf.path, &children) else {
                            continue;
                        };
                        match leaf.alias {
                            Some(alias) => {
                                entry.reexports.insert(alias, path);
                            }
                            None => entry.glob_reexports.push(path),
                        }
                    }
                }
                syn::Item::Mod(module_item) if is_test_only(item) => {
                    let mut child = module.clone();
                    child.push(module_item.ident.to_string());
                    self.test_only.insert(child);
                }
                syn::Item::Mod(module_item) => {
                    if let Some((_, content)) = &module_item.content {
                        let mut child = module.clone();
                        child.push(module_item.ident.to_string());
                        inline.push((child, content));
                    }
                }
                _ => {}
            }
        }
        for (child, content) in inline {
            self.declare(&child, file, content);
        }
    }

    /// Every file → file edge, with the names that make it. References to
    /// names outside the crate, and a file's references to itself, are left
    /// out.
    pub fn edges(&self) -> Edges {
        let mut edges = Edges::new();
        for reference in &self.references {
            let Some(target) = self.resolve(&reference.path, 0) else {
                continue;
            };
            if target != reference.file {
                edges
                    .entry((reference.file.clone(), target))
                    .or_default()
                    .insert(reference.path.join("::"));
            }
        }
        edges
    }

    /// The file defining what `path` names, or `None` for a module, an
    /// unknown root or a path that loops through re-exports.
    fn resolve(&self, path: &[String], depth: usize) -> Option<PathBuf> {
        if depth > 16 {
            return None;
        }
        let mut current: ModPath = Vec::new();
        for (i, segment) in path.iter().enumerate() {
            let module = self.modules.get(&current)?;
            if module.children.contains(segment) {
                current.push(segment.clone());
                continue;
            }
            if module.items.contains(segment) {
                return Some(module.file.clone());
            }
            if let Some(target) = module.reexports.get(segment) {
                let mut next = target.clone();
                next.extend_from_slice(&path[i + 1..]);
                return self.resolve(&next, depth + 1);
            }
            for glob in &module.glob_reexports {
                let mut next = glob.clone();
                next.extend_from_slice(&path[i..]);
                if let Some(found) = self.resolve(&next, depth + 1) {
                    return Some(found);
                }
            }
            // A name the module does not declare (a macro, a derive's
            // output): the module's own file is the best answer.
            return Some(module.file.clone());
        }
        None
    }

    fn is_test_code(&self, module: &[String]) -> bool {
        (1..=module.len()).any(|n| self.test_only.contains(&module[..n]))
    }

    fn is_module(&self, path: &[String]) -> bool {
        self.modules.contains_key(path)
    }
}

/// Walks one file's syntax, recording the references of each module in it.
struct Collector<'a> {
    tree: &'a SourceTree,
    file: &'a Path,
    /// The module the walk is in, and the aliases its `use`s brought in.
    module: ModPath,
    aliases: BTreeMap<String, ModPath>,
    found: Vec<Reference>,
}

impl<'a> Collector<'a> {
    fn new(tree: &'a SourceTree, file: &'a Path, module: ModPath) -> Self {
        Collector {
            tree,
            file,
            module,
            aliases: BTreeMap::new(),
            found: Vec::new(),
        }
    }

    fn items(&mut self, items: &[syn::Item]) {
        // Aliases first: a `use` anywhere in a module scopes the whole module.
        for item in items.iter().filter(|item| !is_test_only(item)) {
            if let syn::Item::Use(use_item) = item {
                self.learn_aliases(use_item);
            }
        }
        for item in items.iter().filter(|item| !is_test_only(item)) {
            self.visit_item(item);
        }
    }

    fn learn_aliases(&mut self, use_item: &syn::ItemUse) {
        let children = self.children();
        for leaf in use_leaves(&use_item.tree) {
            let Some(path) = absolute(&self.module, &leaf.path, &children) else {
                continue;
            };
            match leaf.alias {
                Some(alias) => {
                    self.aliases.insert(alias, path);
                }
                None if matches!(use_item.vis, syn::Visibility::Inherited) => {
                    // `use super::*` and the like take the whole module.
                    self.record(path);
                }
                None => {}
            }
        }
    }

    fn children(&self) -> BTreeSet<String> {
        self.tree
            .modules
            .get(&self.module)
            .map(|m| m.children.clone())
            .unwrap_or_default()
    }

    fn record(&mut self, path: ModPath) {
        self.found.push(Reference {
            file: self.file.to_path_buf(),
            path,
        });
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item_use(&mut self, use_item: &'ast syn::ItemUse) {
        // Private imports are edges; `pub use` re-exports are not (a file
        // that uses a re-exported name is caught by its paths below).
        if !matches!(use_item.vis, syn::Visibility::Inherited) {
            return;
        }
        let children = self.children();
        for leaf in use_leaves(&use_item.tree) {
            if leaf.alias.is_none() {
                continue;
            }
            if let Some(path) = absolute(&self.module, &leaf.path, &children) {
                if !self.tree.is_module(&path) {
                    self.record(path);
                }
            }
        }
    }

    fn visit_item_mod(&mut self, module_item: &'ast syn::ItemMod) {
        let Some((_, content)) = &module_item.content else {
            return;
        };
        let mut inner = Collector::new(self.tree, self.file, self.module.clone());
        inner.module.push(module_item.ident.to_string());
        inner.items(content);
        self.found.extend(inner.found);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        let expanded = match segments.first().map(String::as_str) {
            Some("crate" | "super" | "self" | "acs_proxy") => {
                absolute(&self.module, &segments, &BTreeSet::new())
            }
            Some(first) => self.aliases.get(first).map(|target| {
                let mut full = target.clone();
                full.extend_from_slice(&segments[1..]);
                full
            }),
            None => None,
        };
        if let Some(full) = expanded {
            if !self.tree.is_module(&full) {
                self.record(full);
            }
        }
        syn::visit::visit_path(self, path);
    }
}

/// One name a `use` tree brings in: its path and the name it is bound to
/// (`None` for a glob).
struct UseLeaf {
    path: Vec<String>,
    alias: Option<String>,
}

fn use_leaves(tree: &syn::UseTree) -> Vec<UseLeaf> {
    let mut leaves = Vec::new();
    walk_use(tree, &mut Vec::new(), &mut leaves);
    leaves
}

fn walk_use(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<UseLeaf>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            walk_use(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            if name == "self" {
                if let Some(last) = prefix.last().cloned() {
                    out.push(UseLeaf {
                        path: prefix.clone(),
                        alias: Some(last),
                    });
                }
            } else {
                let mut path = prefix.clone();
                path.push(name.clone());
                out.push(UseLeaf {
                    path,
                    alias: Some(name),
                });
            }
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push(UseLeaf {
                path,
                alias: Some(r.rename.to_string()),
            });
        }
        syn::UseTree::Glob(_) => out.push(UseLeaf {
            path: prefix.clone(),
            alias: None,
        }),
        syn::UseTree::Group(g) => {
            for item in &g.items {
                walk_use(item, prefix, out);
            }
        }
    }
}

/// `path` as seen from `module`, made absolute from the crate root; `None`
/// for a path into another crate. `children` are the module's own child
/// modules, which a 2018-edition `use child::X` may name directly.
fn absolute(module: &[String], path: &[String], children: &BTreeSet<String>) -> Option<ModPath> {
    let (first, rest) = path.split_first()?;
    let mut base: ModPath = match first.as_str() {
        "crate" | "acs_proxy" => Vec::new(),
        "self" => module.to_vec(),
        "super" => {
            let mut base = module.to_vec();
            base.pop()?;
            base
        }
        other if children.contains(other) => {
            let mut base = module.to_vec();
            base.push(other.to_string());
            base
        }
        _ => return None,
    };
    let mut rest = rest;
    while let Some((next, tail)) = rest.split_first() {
        if next != "super" {
            break;
        }
        base.pop()?;
        rest = tail;
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The module path of a file relative to the source root: `lib.rs` is the
/// root, `main.rs` the binary's own `main`, `a/mod.rs` and `a.rs` are `a`.
fn module_path_of(relative: &Path) -> ModPath {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        match stem {
            "lib" | "mod" => {}
            other => parts.push(other.to_string()),
        }
    }
    parts
}

/// Whether an item is compiled for tests only (`#[cfg(test)]`).
fn is_test_only(item: &syn::Item) -> bool {
    let attrs = match item {
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Const(i) => &i.attrs,
        _ => return false,
    };
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Ident>()
                .is_ok_and(|ident| ident == "test")
    })
}

fn item_name(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(i) => &i.ident,
        syn::Item::Enum(i) => &i.ident,
        syn::Item::Fn(i) => &i.sig.ident,
        syn::Item::Static(i) => &i.ident,
        syn::Item::Struct(i) => &i.ident,
        syn::Item::Trait(i) => &i.ident,
        syn::Item::TraitAlias(i) => &i.ident,
        syn::Item::Type(i) => &i.ident,
        syn::Item::Union(i) => &i.ident,
        syn::Item::Macro(i) => i.ident.as_ref()?,
        _ => return None,
    };
    Some(ident.to_string())
}

fn collect_rs_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), LoadError> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| LoadError(format!("{}: {e}", dir.display())))?;
    for entry in entries {
        let path = entry
            .map_err(|e| LoadError(format!("{}: {e}", dir.display())))?
            .path();
        if path.is_dir() {
            collect_rs_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}
