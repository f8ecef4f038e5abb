//! Pinned pure-Python wheels, each checked against its sha256:
//!
//! - the data runtime ships pytest and what it imports beside its
//!   standard-library zip, for the agent's `run_tests` tool, and `installer`,
//!   for `pip` in the shell (`packaging`, which both need, is in the zip
//!   already). They are unpacked into `lib/site-packages/`, which the guest
//!   sees read-only at `/usr/local/lib/site-packages`; the directory is not
//!   on the runtime's `sys.path`: the code that runs the tests or `pip` adds
//!   it, so nothing else changes for a session;
//! - the standard-library runner (componentize-py keeps only the modules its
//!   build imports) carries `packaging` and `installer` for `pip`, unpacked
//!   into `target/python-runner/packages/`, a source path of its build. It
//!   has no pytest: there `run_tests` runs unittest and says so;
//! - the tests' wheelhouse (`target/wheelhouse/`), the operator's folder of
//!   wheels that `pip install` resolves from: small pure-Python packages,
//!   one with a dependency (the data runtime bundles `tabulate`, so there
//!   pip answers that it is already satisfied).
//!
//! pip downloads them with `--require-hashes --no-deps`, so only these files
//! come in.

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

/// `pip`'s two libraries, in both runtimes (Apache-2.0 or BSD-2-Clause, and MIT).
pub const PIP_LIBRARIES: &[Library] = &[
    Library {
        package: "packaging",
        version: "26.4",
        sha256: &["81383611a09c1bc0b08b76e0fd5829d7c6824c65b27a6aee339da133f4233ea2"],
    },
    Library {
        package: "installer",
        version: "1.1.0",
        sha256: &["f55f5728ff61d3dd54dbc5a397cf3f7307cb64b180c20b72afbebf01c9e2c8a0"],
    },
];

/// The tests' wheelhouse: `python-slugify` and the `text-unidecode` it
/// needs are in neither runtime, `tabulate` only in the data runtime (MIT,
/// MIT, and Artistic or GPL-2.0+).
pub const TEST_WHEELHOUSE: &[Library] = &[
    Library {
        package: "tabulate",
        version: "0.10.0",
        sha256: &["f0b0622e567335c8fabaaa659f1b33bcb6ddfe2e496071b743aa113f8774f2d3"],
    },
    Library {
        package: "python-slugify",
        version: "9.2.0",
        sha256: &["7298dcfc65e9ccdf834b3c398f163af0d09a9a8fc1ee6a7b2dffd8d38bfb756e"],
    },
    Library {
        package: "text-unidecode",
        version: "1.3",
        sha256: &["1311f10e8b895935241623731c2ba64f4c455287888b18189350b67134a822e8"],
    },
];

/// Where the tests' wheelhouse is laid out.
pub const WHEELHOUSE_DIR: &str = "target/wheelhouse";

/// The folder under the runtime's `lib/`.
const SITE_PACKAGES: &str = "site-packages";

/// Lays out `lib/site-packages/` in the data runtime `out`, unless it already
/// holds the pinned wheels.
pub fn install(out: &Path) -> anyhow::Result<()> {
    let target = out.join("lib").join(SITE_PACKAGES);
    let stamp_path = out.join("site-packages.stamp");
    let wheels_pinned: Vec<&Library> = WHEELS.iter().chain(PIP_LIBRARIES.iter().filter(|l| l.package == "installer")).collect();
    let stamp = pins_digest(&wheels_pinned);
    if target.is_dir() && std::fs::read_to_string(&stamp_path).ok().as_deref() == Some(stamp.as_str()) {
        step("python-data's pytest and installer wheels are up to date");
        return Ok(());
    }
    let wheels = download(&wheels_pinned, &root().join("target/python-wheels"))?;
    let partial = out.join("lib").join(format!("{SITE_PACKAGES}.partial"));
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial).with_context(|| format!("creating {}", partial.display()))?;
    step("unpacking pytest, installer and their dependencies into python-data's lib/site-packages");
    unpack(&wheels, &partial)?;
    let _ = std::fs::remove_dir_all(&target);
    std::fs::rename(&partial, &target).with_context(|| format!("moving {} into place", partial.display()))?;
    list_in_origin(&out.join("origin.json"), &wheels_pinned)?;
    std::fs::write(&stamp_path, stamp)?;
    Ok(())
}

/// Lays out `target/python-runner/packages/` (`packaging` and `installer`,
/// unpacked) for the runner's build, unless it already holds the pins, and
/// gives the folder.
pub fn runner_packages() -> anyhow::Result<PathBuf> {
    let out = root().join("target/python-runner");
    let target = out.join("packages");
    let stamp_path = out.join("packages.stamp");
    let pinned: Vec<&Library> = PIP_LIBRARIES.iter().collect();
    let stamp = pins_digest(&pinned);
    if target.is_dir() && std::fs::read_to_string(&stamp_path).ok().as_deref() == Some(stamp.as_str()) {
        return Ok(target);
    }
    let wheels = download(&pinned, &root().join("target/python-wheels"))?;
    let partial = out.join("packages.partial");
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial).with_context(|| format!("creating {}", partial.display()))?;
    step("unpacking packaging and installer for the python runner");
    unpack(&wheels, &partial)?;
    let _ = std::fs::remove_dir_all(&target);
    std::fs::rename(&partial, &target).with_context(|| format!("moving {} into place", partial.display()))?;
    std::fs::write(&stamp_path, stamp)?;
    Ok(target)
}

/// Downloads the tests' wheelhouse into `target/wheelhouse/` (only those
/// wheels, checked) and gives the folder.
pub fn test_wheelhouse() -> anyhow::Result<PathBuf> {
    let dir = root().join(WHEELHOUSE_DIR);
    let pinned: Vec<&Library> = TEST_WHEELHOUSE.iter().collect();
    download(&pinned, &dir)?;
    Ok(dir)
}

/// Unpacks each wheel into `into`.
fn unpack(wheels: &[PathBuf], into: &Path) -> anyhow::Result<()> {
    let python = venv::ensure_venv()?;
    // zipfile's extractall refuses members that would land outside the folder.
    let script = "import sys, zipfile\nfor wheel in sys.argv[2:]:\n    zipfile.ZipFile(wheel).extractall(sys.argv[1])\n";
    run(Command::new(python).args(["-c", script]).arg(into).args(wheels))
}

/// Adds the wheels to the `packages` of `origin.json`, which `/healthz` reports.
fn list_in_origin(path: &Path, wheels: &[&Library]) -> anyhow::Result<()> {
    let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let mut origin: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&text).with_context(|| format!("parsing {}", path.display()))?;
    let packages = origin.entry("packages").or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
    let Some(packages) = packages.as_object_mut() else { bail!("{}: packages is not an object", path.display()) };
    for wheel in wheels {
        packages.insert(wheel.package.to_owned(), serde_json::Value::from(wheel.version));
    }
    std::fs::write(path, serde_json::to_vec_pretty(&origin)?).with_context(|| format!("writing {}", path.display()))
}

/// The `wheels`, downloaded into `dir` (kept, so a rebuild downloads
/// nothing) and checked against their pins.
fn download(wheels: &[&Library], dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut found = find_pinned(wheels, dir)?;
    if found.iter().any(Option::is_none) {
        let names: Vec<&str> = wheels.iter().map(|w| w.package).collect();
        step(&format!("downloading {} (hash-pinned)", names.join(", ")));
        venv::ensure_venv()?;
        let requirements = dir.join("requirements.txt");
        let lines: Vec<String> = wheels
            .iter()
            .map(|w| format!("{}=={} {}\n", w.package, w.version, w.sha256.iter().map(|h| format!("--hash=sha256:{h}")).collect::<Vec<_>>().join(" ")))
            .collect();
        std::fs::write(&requirements, lines.concat()).with_context(|| format!("writing {}", requirements.display()))?;
        run(Command::new(venv::venv_dir().join("bin/pip"))
            .args(["download", "--quiet", "--disable-pip-version-check", "--require-hashes", "--no-deps", "--only-binary=:all:", "-d"])
            .arg(dir)
            .arg("-r")
            .arg(&requirements))?;
        // Only wheels belong in a wheelhouse.
        let _ = std::fs::remove_file(&requirements);
        found = find_pinned(wheels, dir)?;
    }
    wheels
        .iter()
        .zip(found)
        .map(|(wheel, path)| path.with_context(|| format!("{} {} was not downloaded with its pinned hash", wheel.package, wheel.version)))
        .collect()
}

/// For each pinned wheel, the file in `dir` whose sha256 is its pin.
fn find_pinned(wheels: &[&Library], dir: &Path) -> anyhow::Result<Vec<Option<PathBuf>>> {
    let mut by_hash = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "whl") {
            let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            by_hash.push((hex::encode(Sha256::digest(&bytes)), path));
        }
    }
    Ok(wheels
        .iter()
        .map(|wheel| by_hash.iter().find(|(hash, _)| wheel.sha256.contains(&hash.as_str())).map(|(_, path)| path.clone()))
        .collect())
}

/// What `lib/site-packages/` is made from: the pins.
fn pins_digest(wheels: &[&Library]) -> String {
    let mut digest = Sha256::new();
    for wheel in wheels {
        digest.update(format!("{} {} {}\n", wheel.package, wheel.version, wheel.sha256.join(",")));
    }
    format!("{}\n", hex::encode(digest.finalize()))
}

