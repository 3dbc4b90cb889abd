//! The two rules of `layers.toml` checked against an import graph: no
//! import from a higher layer, and no cycle between files.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::graph::{Edges, SourceTree};

/// The layer order, bottom first, as `layers.toml` writes it.
#[derive(Deserialize)]
pub struct Layers {
    layer: Vec<Layer>,
}

#[derive(Deserialize)]
struct Layer {
    name: String,
    modules: Vec<String>,
}

impl Layers {
    /// Parses a `layers.toml`.
    pub fn parse(text: &str) -> Result<Layers, toml::de::Error> {
        toml::from_str(text)
    }

    /// The layer index of a source file (relative to `src/`): the layer of
    /// its top-level module. `main.rs` is above every layer; `lib.rs` is
    /// the crate root and imports nothing.
    fn of(&self, file: &Path) -> Option<usize> {
        let top = file.iter().next()?.to_string_lossy();
        let module = top.trim_end_matches(".rs");
        if module == "main" {
            return Some(self.layer.len());
        }
        self.layer
            .iter()
            .position(|layer| layer.modules.iter().any(|m| m == module))
    }

    fn name(&self, index: usize) -> &str {
        self.layer.get(index).map_or("main", |l| l.name.as_str())
    }
}

/// A broken rule, printed so that a reader can find and fix it.
#[derive(Debug, PartialEq, Eq)]
pub enum Violation {
    /// A file whose top-level module `layers.toml` does not place.
    Unplaced { file: PathBuf },
    /// `from` (in layer `from_layer`) takes `names` from `to`, which sits in
    /// the higher layer `to_layer`.
    Upward {
        from: PathBuf,
        from_layer: String,
        to: PathBuf,
        to_layer: String,
        names: Vec<String>,
    },
    /// Files that import each other, directly or around a loop; `edges`
    /// are the imports inside the loop.
    Cycle {
        edges: Vec<(PathBuf, PathBuf, Vec<String>)>,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Unplaced { file } => {
                write!(
                    f,
                    "src/{}: its module is in no layer of layers.toml",
                    file.display()
                )
            }
            Violation::Upward {
                from,
                from_layer,
                to,
                to_layer,
                names,
            } => write!(
                f,
                "upward import: src/{} ({from_layer}) takes {} from src/{} ({to_layer})",
                from.display(),
                names.join(", "),
                to.display()
            ),
            Violation::Cycle { edges } => {
                writeln!(f, "import cycle:")?;
                for (from, to, names) in edges {
                    writeln!(
                        f,
                        "  src/{} → src/{} ({})",
                        from.display(),
                        to.display(),
                        names.join(", ")
                    )?;
                }
                Ok(())
            }
        }
    }
}

/// Checks the source tree under `src` against `layers`.
pub fn check(src: &Path, layers: &Layers) -> Result<Vec<Violation>, String> {
    let tree = SourceTree::load(src).map_err(|e| e.0)?;
    let edges = tree.edges();
    let mut violations = unplaced(&tree.files, layers);
    violations.extend(upward(&edges, layers));
    violations.extend(cycles(&edges));
    Ok(violations)
}

fn unplaced(files: &[PathBuf], layers: &Layers) -> Vec<Violation> {
    files
        .iter()
        .filter(|file| layers.of(file).is_none() && *file != Path::new("lib.rs"))
        .map(|file| Violation::Unplaced { file: file.clone() })
        .collect()
}

fn upward(edges: &Edges, layers: &Layers) -> Vec<Violation> {
    let mut found = Vec::new();
    for ((from, to), names) in edges {
        let (Some(low), Some(high)) = (layers.of(from), layers.of(to)) else {
            continue;
        };
        if high > low {
            found.push(Violation::Upward {
                from: from.clone(),
                from_layer: layers.name(low).to_string(),
                to: to.clone(),
                to_layer: layers.name(high).to_string(),
                names: names.iter().cloned().collect(),
            });
        }
    }
    found
}

/// Strongly connected components of more than one file (Tarjan).
fn cycles(edges: &Edges) -> Vec<Violation> {
    let mut successors: BTreeMap<&PathBuf, Vec<&PathBuf>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        successors.entry(from).or_default().push(to);
        successors.entry(to).or_default();
    }
    let mut state = Tarjan {
        successors: &successors,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        components: Vec::new(),
    };
    for node in successors.keys() {
        if !state.index.contains_key(node) {
            state.visit(node);
        }
    }
    state
        .components
        .into_iter()
        .filter(|component| component.len() > 1)
        .map(|component| {
            let members: BTreeSet<&PathBuf> = component.into_iter().collect();
            let edges = edges
                .iter()
                .filter(|((from, to), _)| members.contains(from) && members.contains(to))
                .map(|((from, to), names)| {
                    (from.clone(), to.clone(), names.iter().cloned().collect())
                })
                .collect();
            Violation::Cycle { edges }
        })
        .collect()
}

struct Tarjan<'a> {
    successors: &'a BTreeMap<&'a PathBuf, Vec<&'a PathBuf>>,
    index: BTreeMap<&'a PathBuf, usize>,
    low: BTreeMap<&'a PathBuf, usize>,
    stack: Vec<&'a PathBuf>,
    on_stack: BTreeSet<&'a PathBuf>,
    next: usize,
    components: Vec<Vec<&'a PathBuf>>,
}

impl<'a> Tarjan<'a> {
    fn visit(&mut self, node: &'a PathBuf) {
        self.index.insert(node, self.next);
        self.low.insert(node, self.next);
        self.next += 1;
        self.stack.push(node);
        self.on_stack.insert(node);
        let successors = self.successors.get(node).cloned().unwrap_or_default();
        for next in successors {
            if !self.index.contains_key(next) {
                self.visit(next);
                let low = self.low[node].min(self.low[next]);
                self.low.insert(node, low);
            } else if self.on_stack.contains(next) {
                let low = self.low[node].min(self.index[next]);
                self.low.insert(node, low);
            }
        }
        if self.low[node] == self.index[node] {
            let mut component = Vec::new();
            while let Some(member) = self.stack.pop() {
                self.on_stack.remove(member);
                component.push(member);
                if member == node {
                    break;
                }
            }
            self.components.push(component);
        }
    }
}
