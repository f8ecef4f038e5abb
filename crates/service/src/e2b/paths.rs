//! E2B's paths and the session's: E2B's user home `/home/user` is the
//! session directory (the code's working directory, `/mnt/data` inside the
//! sandbox). Absolute paths under either name, `~/...` and paths relative
//! to the home all name the same file; anything else is outside what a
//! Python-only sandbox has.

use super::error::E2bError;

/// E2B's user home, where its SDKs put files by default.
pub(crate) const HOME: &str = "/home/user";

/// The path relative to the session directory (`""` for the directory
/// itself) that the client's `path` names.
pub(crate) fn to_session(path: &str) -> Result<String, E2bError> {
    let path = path.trim();
    let relative = if path.is_empty() || path == "~" {
        ""
    } else if let Some(rest) = path.strip_prefix("~/") {
        rest
    } else if let Some(rest) = strip_root(path, HOME).or_else(|| strip_root(path, anypath_sandbox::SESSION_DIR)) {
        rest
    } else if path.starts_with('/') {
        return Err(E2bError::bad_request(format!(
            "{path} is outside this sandbox's files: a Python-only sandbox keeps its files under {HOME} (the code sees them in its working directory)"
        )));
    } else {
        path
    };
    Ok(relative.trim_start_matches("./").trim_end_matches('/').to_owned())
}

/// The path E2B's clients see for a session-relative path.
pub(crate) fn to_client(relative: &str) -> String {
    if relative.is_empty() { HOME.to_owned() } else { format!("{HOME}/{relative}") }
}

/// `path` below `root` (`""` for `root` itself), when it is there.
fn strip_root<'a>(path: &'a str, root: &str) -> Option<&'a str> {
    let rest = path.strip_prefix(root)?;
    if rest.is_empty() {
        Some("")
    } else {
        rest.strip_prefix('/')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_a_home_path_names_the_same_file() {
        for path in ["/home/user/a/b.txt", "a/b.txt", "~/a/b.txt", "/mnt/data/a/b.txt", "./a/b.txt", "/home/user/a/b.txt/"] {
            assert_eq!(to_session(path).expect(path), "a/b.txt", "{path}");
        }
        for home in ["/home/user", "/home/user/", "~", "", "/mnt/data"] {
            assert_eq!(to_session(home).expect(home), "", "{home}");
        }
        assert_eq!(to_client("a/b.txt"), "/home/user/a/b.txt");
        assert_eq!(to_client(""), "/home/user");
    }

    #[test]
    fn paths_elsewhere_are_refused_by_name() {
        for path in ["/etc/passwd", "/home/username/x", "/tmp/x", "/root"] {
            let refused = to_session(path).expect_err(path);
            assert_eq!(refused.status.as_u16(), 400);
            assert!(refused.message.contains("/home/user"), "{}", refused.message);
        }
    }
}
