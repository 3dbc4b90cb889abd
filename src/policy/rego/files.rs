//! `rego = ["policies/*.rego"]` → the module files, in a stable order.
//!
//! Globs follow the config file's directory like every other path; `*`
//! stays within one directory and `**` crosses directories. A pattern
//! without glob characters names a file, or a directory whose `.rego`
//! files are all loaded.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use globset::GlobBuilder;

use super::error::RegoError;

/// The files `pattern` names under `base`, sorted; an error when none.
pub(super) fn expand(base: &Path, pattern: &str) -> Result<Vec<PathBuf>, RegoError> {
    let absolute = base.join(pattern);
    let found = if has_glob_chars(pattern) {
        matching(&absolute, pattern)?
    } else if absolute.is_dir() {
        let mut files = BTreeSet::new();
        walk(&absolute, &mut files)?;
        files.into_iter().filter(|p| is_rego(p)).collect()
    } else if absolute.is_file() {
        vec![absolute.clone()]
    } else {
        Vec::new()
    };
    if found.is_empty() {
        return Err(RegoError::NoFiles {
            pattern: absolute.display().to_string(),
        });
    }
    Ok(found)
}

/// Whether `path` is a module the proxy evaluates: `.rego`, and not a
/// `*_test.rego` file (tests run under `acs-proxy policy test`).
pub(super) fn is_policy_module(path: &Path) -> bool {
    is_rego(path) && !is_test_module(path)
}

/// `*_test.rego`, OPA's name for a file of tests.
pub(super) fn is_test_module(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.ends_with("_test.rego"))
}

/// Every file under `root`, recursively (symbolic links to directories
/// are not followed, so a link loop cannot hang the load).
pub fn walk(root: &Path, out: &mut BTreeSet<PathBuf>) -> Result<(), RegoError> {
    let read_error = |source| RegoError::Read {
        path: root.to_owned(),
        source,
    };
    for entry in std::fs::read_dir(root).map_err(read_error)? {
        let entry = entry.map_err(read_error)?;
        let kind = entry.file_type().map_err(read_error)?;
        if kind.is_dir() {
            walk(&entry.path(), out)?;
        } else {
            out.insert(entry.path());
        }
    }
    Ok(())
}

fn matching(absolute: &Path, pattern: &str) -> Result<Vec<PathBuf>, RegoError> {
    let text = absolute.display().to_string();
    let glob = GlobBuilder::new(&text)
        .literal_separator(true)
        .build()
        .map_err(|err| RegoError::BadGlob {
            pattern: pattern.to_owned(),
            message: err.kind().to_string(),
        })?
        .compile_matcher();
    let root = static_prefix(absolute);
    let mut files = BTreeSet::new();
    if root.is_dir() {
        walk(&root, &mut files)?;
    }
    Ok(files
        .into_iter()
        .filter(|path| glob.is_match(path))
        .collect())
}

/// The directory above the first component with a glob character.
fn static_prefix(path: &Path) -> PathBuf {
    let mut prefix = PathBuf::new();
    for component in path.components() {
        if has_glob_chars(&component.as_os_str().to_string_lossy()) {
            break;
        }
        prefix.push(component);
    }
    prefix
}

fn has_glob_chars(text: &str) -> bool {
    text.contains(['*', '?', '[', '{'])
}

fn is_rego(path: &Path) -> bool {
    path.extension().is_some_and(|ext| ext == "rego")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("p/sub")).unwrap();
        for file in ["p/a.rego", "p/a_test.rego", "p/sub/b.rego", "p/c.txt"] {
            std::fs::write(dir.path().join(file), "package x\n").unwrap();
        }
        dir
    }

    fn names(base: &Path, files: &[PathBuf]) -> Vec<String> {
        files
            .iter()
            .map(|f| f.strip_prefix(base).unwrap().display().to_string())
            .collect()
    }

    #[test]
    fn star_stays_in_one_directory_and_double_star_crosses() {
        let dir = tree();
        let one = expand(dir.path(), "p/*.rego").unwrap();
        assert_eq!(names(dir.path(), &one), ["p/a.rego", "p/a_test.rego"]);
        let all = expand(dir.path(), "p/**/*.rego").unwrap();
        assert_eq!(
            names(dir.path(), &all),
            ["p/a.rego", "p/a_test.rego", "p/sub/b.rego"]
        );
    }

    #[test]
    fn a_directory_means_its_rego_files_and_a_file_itself() {
        let dir = tree();
        let all = expand(dir.path(), "p").unwrap();
        assert_eq!(all.len(), 3);
        let one = expand(dir.path(), "p/sub/b.rego").unwrap();
        assert_eq!(names(dir.path(), &one), ["p/sub/b.rego"]);
    }

    #[test]
    fn nothing_matched_is_an_error() {
        let dir = tree();
        let err = expand(dir.path(), "q/*.rego").unwrap_err();
        assert!(err.to_string().contains("matches no .rego file"), "{err}");
        assert!(expand(dir.path(), "p/missing.rego").is_err());
        assert!(matches!(
            expand(dir.path(), "p/[.rego"),
            Err(RegoError::BadGlob { .. })
        ));
    }

    #[test]
    fn test_modules_are_told_apart() {
        assert!(is_policy_module(Path::new("a/b.rego")));
        assert!(!is_policy_module(Path::new("a/b_test.rego")));
        assert!(!is_policy_module(Path::new("a/b.json")));
    }
}
