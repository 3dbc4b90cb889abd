//! Relative paths in `proxy.toml` follow the file, not the working directory.
//!
//! An agent spawns its MCP server (acs-proxy) from a working directory it
//! chooses, often `/` or its own install folder, so a path read against
//! the working directory would name a different file, or none, depending
//! on who started the proxy. [`Config::load`](super::Config::load) therefore
//! resolves every relative path against the config file's directory; each
//! section lists its path-valued settings through [`SectionPaths`].

use std::fmt;
use std::path::{Path, PathBuf};

/// One path-valued setting as the proxy will use it, for `config check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathSetting {
    /// Where it is set, e.g. `audit.path` or `upstream.demo.command`.
    pub key: String,
    /// The path after resolution, or a bare program name as written.
    pub path: PathBuf,
    /// A bare program name (no `/`), looked up on `PATH` when spawned.
    pub on_path: bool,
}

impl fmt::Display for PathSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.path.display())?;
        if self.on_path {
            f.write_str(" (looked up on PATH)")?;
        }
        Ok(())
    }
}

/// A config section holding paths: one list of them, both to resolve and
/// to report, kept side by side in the section's own file.
pub(super) trait SectionPaths {
    /// Makes every relative path of the section absolute against `base`,
    /// the config file's directory.
    fn resolve_paths(&mut self, base: &Path);

    /// The section's path-valued settings that are set.
    fn path_settings(&self) -> Vec<PathSetting>;
}

/// `path` joined onto `base` when relative.
pub(super) fn resolve_file(base: &Path, path: &mut PathBuf) {
    if path.is_relative() {
        *path = base.join(&*path);
    }
}

/// [`resolve_file`] for an optional setting.
pub(super) fn resolve_optional(base: &Path, path: &mut Option<PathBuf>) {
    if let Some(path) = path {
        resolve_file(base, path);
    }
}

/// A command's program: a relative path (it has a `/`) follows the config
/// file; a bare name is left for the `PATH` lookup at spawn time, as a
/// shell would do. Arguments are the program's business and stay as written.
pub(super) fn resolve_program(base: &Path, command: &mut [String]) {
    let Some(program) = command.first_mut() else {
        return;
    };
    if is_bare_name(program) || Path::new(program).is_absolute() {
        return;
    }
    *program = base.join(&*program).display().to_string();
}

/// The setting `key` = `path`.
pub(super) fn file_setting(key: impl Into<String>, path: &Path) -> PathSetting {
    PathSetting {
        key: key.into(),
        path: path.to_owned(),
        on_path: false,
    }
}

/// The setting `key` = `path`, when set.
pub(super) fn optional_setting(
    key: impl Into<String>,
    path: &Option<PathBuf>,
) -> Option<PathSetting> {
    path.as_deref().map(|path| file_setting(key, path))
}

/// The program of the command `key`, when there is one.
pub(super) fn program_setting(key: impl Into<String>, command: &[String]) -> Option<PathSetting> {
    let program = command.first()?;
    Some(PathSetting {
        key: key.into(),
        path: PathBuf::from(program),
        on_path: is_bare_name(program),
    })
}

fn is_bare_name(program: &str) -> bool {
    !program.contains('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(words: &[&str]) -> Vec<String> {
        words.iter().map(|word| (*word).to_owned()).collect()
    }

    #[test]
    fn a_relative_file_joins_the_base_and_an_absolute_one_stays() {
        let mut relative = PathBuf::from("certs/key.pem");
        resolve_file(Path::new("/etc/acs"), &mut relative);
        assert_eq!(relative, Path::new("/etc/acs/certs/key.pem"));
        let mut absolute = PathBuf::from("/var/key.pem");
        resolve_file(Path::new("/etc/acs"), &mut absolute);
        assert_eq!(absolute, Path::new("/var/key.pem"));
    }

    #[test]
    fn only_a_program_path_follows_the_base() {
        let base = Path::new("/srv/conf");
        let mut relative = command(&["../bin/server", "data/x"]);
        resolve_program(base, &mut relative);
        assert_eq!(relative, command(&["/srv/conf/../bin/server", "data/x"]));
        let mut bare = command(&["npx", "-y", "pkg"]);
        resolve_program(base, &mut bare);
        assert_eq!(bare, command(&["npx", "-y", "pkg"]));
        let mut absolute = command(&["/usr/bin/server"]);
        resolve_program(base, &mut absolute);
        assert_eq!(absolute, command(&["/usr/bin/server"]));
        resolve_program(base, &mut []);
    }

    #[test]
    fn a_bare_program_is_reported_as_looked_up_on_path() {
        let bare = program_setting("upstream.a.command", &command(&["npx"])).unwrap();
        assert_eq!(
            bare.to_string(),
            "upstream.a.command: npx (looked up on PATH)"
        );
        let path = program_setting("upstream.a.command", &command(&["/bin/srv"])).unwrap();
        assert_eq!(path.to_string(), "upstream.a.command: /bin/srv");
        assert_eq!(program_setting("guardian.command", &[]), None);
    }
}
