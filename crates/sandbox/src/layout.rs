//! How a session's files directory appears to its code: as `/mnt/data`
//! (the code interpreter's own sessions), or as the whole filesystem of a
//! sandbox (E2B's), where the code works in `/home/user`.
//!
//! In the sandbox layout ([`FilesLayout::Root`]) the session directory is
//! preopened at `/`, so any absolute path the code names lands in that one
//! tree and nowhere else: WASI resolves every path below a preopen and
//! refuses `..` past it. `/mnt/data` is kept as a second name for
//! `/home/user` (code written for the other layout still finds its files),
//! and the data runtime's `/tmp` is the tree's own `tmp/`, so a file the
//! code leaves there is one its clients can read.

use std::path::{Path, PathBuf};

/// The working directory and home of a sandbox's code, inside its tree.
pub const SANDBOX_HOME: &str = "/home/user";

/// The home of the sandbox's `root` user, inside its tree.
pub const ROOT_HOME: &str = "/root";

/// Where a sandbox's kernel boot id is, as on Linux: written when the
/// sandbox's tree is first laid out, and anew when it boots without its
/// memory (E2B's filesystem-only pause).
pub const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// A new boot id, in the kernel's form (a UUID and a newline).
pub fn new_boot_id() -> String {
    format!("{}\n", uuid::Uuid::new_v4().hyphenated())
}

/// What a session's code sees of its files directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FilesLayout {
    /// The directory is `/mnt/data`, the code's working directory.
    #[default]
    MntData,
    /// The directory is the sandbox's whole tree, `/`; the code works in
    /// `/home/user`, which `/mnt/data` also names.
    Root,
}

impl FilesLayout {
    /// The host directories the guest's paths resolve to, for the session
    /// directory `dir`.
    pub(crate) fn guest_dirs(self, dir: &Path) -> TreeDirs {
        match self {
            Self::MntData => TreeDirs { mnt_data: dir.to_path_buf(), root: None },
            Self::Root => TreeDirs { mnt_data: home_of(dir), root: Some(dir.to_path_buf()) },
        }
    }

    /// Makes the folders the layout needs in the session directory `dir`
    /// (the sandbox's `home/user`, `root` and `tmp`; they are the guest's
    /// preopens, so they must exist before an instance starts), and the
    /// sandbox's first boot id.
    pub fn prepare(self, dir: &Path) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        if self == Self::Root {
            for folder in ["/home", SANDBOX_HOME, ROOT_HOME, "/tmp", "/proc", "/proc/sys", "/proc/sys/kernel", "/proc/sys/kernel/random"] {
                let path = dir.join(folder.trim_start_matches('/'));
                if !path.is_dir() {
                    std::fs::create_dir_all(&path)?;
                    // As a Linux user's folders are, whatever the host's umask.
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
                }
            }
            let boot_id = dir.join(BOOT_ID.trim_start_matches('/'));
            if !boot_id.exists() {
                std::fs::write(&boot_id, new_boot_id())?;
            }
        }
        Ok(())
    }

    /// The code the layout runs in a fresh instance before any of the
    /// session's own (in the data runtime's start turn, or as a first cell
    /// of the runner's): the working directory. `None` for `/mnt/data`,
    /// which the cell code enters by itself.
    pub(crate) fn setup_cell(self) -> Option<String> {
        match self {
            Self::MntData => None,
            // The session's globals are made first (which enters
            // /mnt/data), the home after; the cell counter goes back, so
            // the session's first cell is still `<cell-1>`.
            Self::Root => Some(format!(
                "__import__('cell')._session_namespace()\n__import__('os').chdir({SANDBOX_HOME:?})\nsetattr(__import__('cell'), '_cells_run', 0)\n"
            )),
        }
    }
}

/// Where the guest's session paths go on the host.
pub(crate) struct TreeDirs {
    /// What the guest sees at `/mnt/data`.
    pub(crate) mnt_data: PathBuf,
    /// What it sees at `/`, in the sandbox layout.
    pub(crate) root: Option<PathBuf>,
}

/// The sandbox home inside the tree at `dir`.
fn home_of(dir: &Path) -> PathBuf {
    dir.join(SANDBOX_HOME.trim_start_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_layout_makes_its_folders_and_names_its_home() {
        let dir = tempfile::tempdir().expect("a directory");
        FilesLayout::Root.prepare(dir.path()).expect("prepared");
        for folder in ["home/user", "root", "tmp"] {
            assert!(dir.path().join(folder).is_dir(), "{folder}");
        }
        let dirs = FilesLayout::Root.guest_dirs(dir.path());
        assert_eq!(dirs.mnt_data, dir.path().join("home/user"));
        assert_eq!(dirs.root.as_deref(), Some(dir.path()));
        let plain = FilesLayout::MntData.guest_dirs(dir.path());
        assert_eq!((plain.mnt_data.as_path(), plain.root), (dir.path(), None));
        assert!(FilesLayout::MntData.setup_cell().is_none());
    }
}
