//! The crate's layering, as `layers.toml` writes it, holds for every file of
//! `src/`: no module imports from a higher layer, and no two files import
//! each other, directly or around a loop.
//!
//! The checker itself is tested on small trees that break each rule.

mod layering {
    pub mod check;
    pub mod graph;
}

use std::path::{Path, PathBuf};

use layering::check::{check, Layers, Violation};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn repo_layers() -> Layers {
    let text = std::fs::read_to_string(repo_root().join("layers.toml")).expect("read layers.toml");
    Layers::parse(&text).expect("parse layers.toml")
}

#[test]
fn src_follows_the_layers_of_layers_toml() {
    let violations = check(&repo_root().join("src"), &repo_layers()).expect("read src");
    let report: Vec<String> = violations.iter().map(ToString::to_string).collect();
    assert!(violations.is_empty(), "{}", report.join("\n"));
}

/// Writes `files` (path relative to `src/`, contents) into a fresh tree.
fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    dir
}

const TWO_LAYERS: &str = r#"
[[layer]]
name = "low"
modules = ["low"]

[[layer]]
name = "high"
modules = ["high"]
"#;

fn check_tree(files: &[(&str, &str)]) -> Vec<Violation> {
    let dir = tree(files);
    let layers = Layers::parse(TWO_LAYERS).expect("layers");
    check(dir.path(), &layers).expect("check")
}

#[test]
fn a_downward_import_passes() {
    let violations = check_tree(&[
        ("lib.rs", "pub mod low; pub mod high;"),
        ("low.rs", "pub struct Frame;"),
        ("high.rs", "use crate::low::Frame; pub fn f(_: Frame) {}"),
    ]);
    assert_eq!(violations, vec![]);
}

#[test]
fn an_upward_import_fails() {
    let violations = check_tree(&[
        ("lib.rs", "pub mod low; pub mod high;"),
        (
            "low.rs",
            "use crate::high::Session; pub fn f(_: Session) {}",
        ),
        ("high.rs", "pub struct Session;"),
    ]);
    assert_eq!(
        violations,
        vec![Violation::Upward {
            from: "low.rs".into(),
            from_layer: "low".into(),
            to: "high.rs".into(),
            to_layer: "high".into(),
            names: vec!["high::Session".into()],
        }]
    );
}

#[test]
fn an_upward_path_in_code_fails_as_an_import_does() {
    let violations = check_tree(&[
        ("lib.rs", "pub mod low; pub mod high;"),
        ("low.rs", "pub fn f() { crate::high::start(); }"),
        ("high.rs", "pub fn start() {}"),
    ]);
    assert!(
        matches!(violations.as_slice(), [Violation::Upward { .. }]),
        "{violations:?}"
    );
}

#[test]
fn a_cycle_between_two_files_of_one_layer_fails() {
    let violations = check_tree(&[
        ("lib.rs", "pub mod low;"),
        ("low/mod.rs", "mod store; mod session; pub use store::Log;"),
        (
            "low/store.rs",
            "use super::session::Chain; pub struct Log(Chain);",
        ),
        (
            "low/session.rs",
            "use super::store::Log; pub struct Chain; pub fn open(_: &Log) {}",
        ),
    ]);
    let [Violation::Cycle { edges }] = violations.as_slice() else {
        panic!("expected one cycle, got {violations:?}");
    };
    let pairs: Vec<(&Path, &Path)> = edges
        .iter()
        .map(|(a, b, _)| (a.as_path(), b.as_path()))
        .collect();
    assert_eq!(
        pairs,
        vec![
            (Path::new("low/session.rs"), Path::new("low/store.rs")),
            (Path::new("low/store.rs"), Path::new("low/session.rs")),
        ]
    );
}

#[test]
fn a_cycle_through_a_re_export_is_found() {
    let violations = check_tree(&[
        ("lib.rs", "pub mod low;"),
        ("low/mod.rs", "mod a; mod b; pub use a::A; pub use b::B;"),
        ("low/a.rs", "use super::B; pub struct A(B);"),
        ("low/b.rs", "pub struct B; pub fn f(_: super::A) {}"),
    ]);
    assert!(
        matches!(violations.as_slice(), [Violation::Cycle { .. }]),
        "{violations:?}"
    );
}

#[test]
fn re_exports_alone_make_no_cycle() {
    let violations = check_tree(&[
        ("lib.rs", "pub mod low;"),
        ("low/mod.rs", "mod a; pub use a::A; pub enum Error { Io }"),
        ("low/a.rs", "use super::Error; pub struct A(Error);"),
    ]);
    assert_eq!(violations, vec![]);
}

#[test]
fn a_module_missing_from_the_layers_fails() {
    let violations = check_tree(&[
        ("lib.rs", "pub mod low; pub mod stray;"),
        ("low.rs", "pub struct Frame;"),
        ("stray.rs", "use crate::low::Frame; pub fn f(_: Frame) {}"),
    ]);
    assert_eq!(
        violations,
        vec![Violation::Unplaced {
            file: "stray.rs".into()
        }]
    );
}
