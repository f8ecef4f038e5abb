//! E2B's paths and the session's: a sandbox's session directory is the
//! whole filesystem its code sees (`/`), so every absolute path a client
//! names is a path in that one tree. Relative paths and `~` start from
//! the user's home (`/home/user`, or `/root` for the user `root`), as
//! envd resolves them; `/mnt/data` (where the code interpreter's own
//! sessions keep their files) still names the home, which the code also
//! sees there.
//!
//! `..` is resolved in the path itself, as a kernel resolves it at `/`:
//! it never climbs above the tree's root, so no path leaves the session's
//! directory (the tree below checks every component again and follows no
//! symlink). Folders the runtime lays over the tree for the code (`/data`'s
//! datasets, the data runtime's `/usr/local/lib`) are not the tree's: a
//! file written there by path is kept, but the code sees the overlay.

use anypath_sandbox::layout::{ROOT_HOME, SANDBOX_HOME};

use super::error::E2bError;

/// E2B's user home, where its SDKs put files by default.
pub(crate) const HOME: &str = SANDBOX_HOME;

/// The old name of the home, from the code interpreter's own layout.
const OLD_HOME: &str = "/mnt/data";

/// The home of `user`: `/root` for `root`, `/home/user` for anyone else.
pub(crate) fn home_of(user: Option<&str>) -> &'static str {
    if user == Some("root") { ROOT_HOME } else { HOME }
}

/// The path in the session's tree (relative to its root, `""` for the root
/// itself) that the client's `path` names, for `user`.
pub(crate) fn to_session(path: &str, user: Option<&str>) -> Result<String, E2bError> {
    let path = path.trim();
    if path.contains('\0') {
        return Err(E2bError::bad_request("a path may not hold NUL"));
    }
    let home = home_of(user);
    let absolute = if path.is_empty() || path == "~" {
        home.to_owned()
    } else if let Some(rest) = path.strip_prefix("~/") {
        format!("{home}/{rest}")
    } else if let Some(rest) = below(path, OLD_HOME) {
        format!("{HOME}/{rest}")
    } else if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{home}/{path}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in absolute.split('/') {
        match part {
            "" | "." => {}
            // `..` at the root stays at the root, as it does on Linux.
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    Ok(parts.join("/"))
}

/// The path E2B's clients see for a path of the session's tree.
pub(crate) fn to_client(relative: &str) -> String {
    format!("/{relative}")
}

/// What `path` names below `root` (`""` for `root` itself), when it is there.
fn below<'a>(path: &'a str, root: &str) -> Option<&'a str> {
    let rest = path.strip_prefix(root)?;
    if rest.is_empty() { Some("") } else { rest.strip_prefix('/') }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_a_home_path_names_the_same_file() {
        for path in ["/home/user/a/b.txt", "a/b.txt", "~/a/b.txt", "/mnt/data/a/b.txt", "./a/b.txt", "/home/user/a/b.txt/", "/home/user/./a//b.txt"] {
            assert_eq!(to_session(path, None).expect(path), "home/user/a/b.txt", "{path}");
        }
        for home in ["/home/user", "/home/user/", "~", "", "/mnt/data"] {
            assert_eq!(to_session(home, None).expect(home), "home/user", "{home}");
        }
        assert_eq!(to_client("home/user/a/b.txt"), "/home/user/a/b.txt");
        assert_eq!(to_client(""), "/");
    }

    #[test]
    fn roots_home_is_root_and_other_paths_are_the_trees() {
        assert_eq!(to_session("x.txt", Some("root")).expect("relative"), "root/x.txt");
        assert_eq!(to_session("~/x.txt", Some("root")).expect("tilde"), "root/x.txt");
        assert_eq!(to_session("x.txt", Some("user")).expect("user"), "home/user/x.txt");
        for (path, inside) in [("/tmp/x", "tmp/x"), ("/opt/x", "opt/x"), ("/etc/passwd", "etc/passwd"), ("/root", "root"), ("/", ""), ("/home/username/x", "home/username/x")] {
            assert_eq!(to_session(path, None).expect(path), inside, "{path}");
        }
    }

    /// Boundary: `..` never climbs out of the sandbox's tree, however many
    /// there are; it stops at the tree's root, as `/..` is `/` on Linux.
    #[test]
    fn dot_dot_stops_at_the_trees_root() {
        for (path, inside) in [
            ("/home/user/../../etc/passwd", "etc/passwd"),
            ("../../../../../../etc/passwd", "etc/passwd"),
            ("/../../x", "x"),
            ("~/../../../..", ""),
            ("/mnt/data/../../../../x", "x"),
            ("../user/a.txt", "home/user/a.txt"),
        ] {
            let relative = to_session(path, None).expect(path);
            assert_eq!(relative, inside, "{path}");
            assert!(!relative.split('/').any(|part| part == ".."), "{path}");
        }
        assert!(to_session("a\0b", None).is_err());
    }
}
