//! Open WebUI's Jupyter client, the module its code interpreter runs code
//! blocks with (`open_webui/utils/code_interpreter.py`), at a pinned
//! release, for `tests/open_webui_client.rs`. Only that module is needed,
//! but PyPI ships it inside the whole app's wheel (about 100 MiB): pip
//! downloads the wheel once with its hash pinned (`--require-hashes
//! --no-deps`), the module is taken out of it and checked against its own
//! pin, and the wheel is deleted. What is kept, `target/open-webui/`, is
//! reused until the pins change. Its imports (aiohttp, websockets,
//! pydantic) are in the Jupyter clients' venv already.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

use crate::shell::{root, run, step};
use crate::venv;

/// The release of Open WebUI whose client the tests run.
pub const VERSION: &str = "0.12.4";
/// sha256 of `open_webui-0.12.4-py3-none-any.whl` on PyPI.
const WHEEL_SHA256: &str = "02e9caba96234db3fa17a92e56163b3f7f2b8ca8227fa886b85c178d696483f6";
/// The module, as the wheel holds it.
const MODULE: &str = "open_webui/utils/code_interpreter.py";
/// sha256 of that module in that wheel (also in the wheel's `RECORD`).
const MODULE_SHA256: &str = "cc65ab80f298ce42a6b8ad07a8097f436b13ba9042c645d5092e86cdebb88a08";

/// The directory holding `open_webui/utils/code_interpreter.py` of
/// [`VERSION`], fetching it when it is missing or another.
pub fn ensure() -> anyhow::Result<PathBuf> {
    let dir = root().join("target/open-webui");
    let module = dir.join(MODULE);
    if digest(&module).is_some_and(|hash| hash == MODULE_SHA256) {
        return Ok(dir);
    }
    step(&format!("downloading Open WebUI {VERSION}'s wheel (hash-pinned) for its Jupyter client module"));
    venv::ensure_venv()?;
    let download = dir.join("download");
    let _ = std::fs::remove_dir_all(&download);
    std::fs::create_dir_all(&download).with_context(|| format!("creating {}", download.display()))?;
    let requirements = download.join("requirements.txt");
    std::fs::write(&requirements, format!("open-webui=={VERSION} --hash=sha256:{WHEEL_SHA256}\n")).with_context(|| format!("writing {}", requirements.display()))?;
    run(Command::new(venv::venv_dir().join("bin/pip"))
        .args(["download", "--quiet", "--disable-pip-version-check", "--require-hashes", "--no-deps", "--only-binary=:all:", "-d"])
        .arg(&download)
        .arg("-r")
        .arg(&requirements))?;
    let wheel = download.join(format!("open_webui-{VERSION}-py3-none-any.whl"));
    // zipfile reads the one member; nothing else of the wheel is written.
    let script = "import sys, zipfile\nopen(sys.argv[3], 'wb').write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))\n";
    let partial = dir.join("code_interpreter.py.partial");
    run(Command::new(venv::venv_dir().join("bin/python")).args(["-c", script]).arg(&wheel).arg(MODULE).arg(&partial))?;
    let _ = std::fs::remove_dir_all(&download);
    match digest(&partial) {
        Some(hash) if hash == MODULE_SHA256 => {}
        found => bail!("{MODULE} of open-webui {VERSION} has sha256 {found:?}, not the pinned {MODULE_SHA256}"),
    }
    let parent = module.parent().context("the module's folder")?;
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    std::fs::rename(&partial, &module).with_context(|| format!("moving the module to {}", module.display()))?;
    Ok(dir)
}

/// The sha256 of the file at `path`, when it reads.
fn digest(path: &Path) -> Option<String> {
    std::fs::read(path).ok().map(|bytes| hex::encode(Sha256::digest(&bytes)))
}
