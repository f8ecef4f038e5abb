//! The book under `docs/`: built with a pinned mdbook (installed from
//! crates.io into `target/tools/` once), then checked by [`crate::doc_links`].

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::bail;

use crate::shell::{cargo_command, root, run, step};

/// The mdbook release the book is built with.
pub const MDBOOK_VERSION: &str = "0.5.4";

/// The pinned mdbook, installed on first use. Only its `search` feature:
/// `serve` and `watch` would compile a web server for nothing here. An
/// unoptimised build: it compiles in a fraction of a release build's CPU
/// time (it is built beside the host on the same cores), and the book
/// still builds in seconds.
pub fn ensure_mdbook() -> anyhow::Result<PathBuf> {
    let tools = root().join(format!("target/tools/mdbook-{MDBOOK_VERSION}"));
    let mdbook = tools.join("bin/mdbook");
    if !mdbook.is_file() {
        step(&format!("installing mdbook {MDBOOK_VERSION} into {} (once; a few minutes)", relative(&tools)));
        // Without debug info: nobody steps through mdbook, and it is a
        // good part of a debug build's time.
        run(cargo_command()
            .env("CARGO_PROFILE_DEV_DEBUG", "false")
            .args(["install", "--locked", "--debug", "mdbook", "--version", MDBOOK_VERSION, "--no-default-features", "--features", "search", "--root"])
            .arg(&tools))?;
    }
    Ok(mdbook)
}

/// `cargo xtask docs`: builds the host, then the book into `target/book/`,
/// and checks its links, the README's, and its code blocks.
pub fn build() -> anyhow::Result<()> {
    let mdbook = ensure_mdbook()?;
    step("building the native host (for its configuration reference)");
    run(cargo_command().args(crate::build::APP_BUILD))?;
    build_with(&mdbook, &root().join("target/release/anypath"))
}

/// Builds the book with `mdbook`, its configuration page written by the
/// already-built `anypath`, and checks it.
pub fn build_with(mdbook: &Path, anypath: &Path) -> anyhow::Result<()> {
    generate_configuration_reference(anypath)?;
    step("building the book (docs/ into target/book/)");
    run(Command::new(mdbook).args(["build", "docs"]))?;
    step("checking the links and code blocks of the book and README.md");
    let problems = crate::doc_links::check(&root())?;
    if !problems.is_empty() {
        for problem in &problems {
            eprintln!("{problem}");
        }
        bail!("{} problem(s) in the book or README.md", problems.len());
    }
    Ok(())
}

/// The page the configuration reference lives on, written from the code's
/// own definitions (`anypath config-reference`); `tests/configuration_reference.rs`
/// fails when it is out of date.
pub const CONFIGURATION_PAGE: &str = "docs/src/configuration.md";

fn generate_configuration_reference(anypath: &Path) -> anyhow::Result<()> {
    step(&format!("writing {CONFIGURATION_PAGE} from the variables and flags the code defines"));
    let output = Command::new(anypath).arg("config-reference").current_dir(root()).output()?;
    if !output.status.success() {
        bail!("anypath config-reference failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    std::fs::write(root().join(CONFIGURATION_PAGE), &output.stdout)?;
    Ok(())
}

fn relative(path: &std::path::Path) -> String {
    path.strip_prefix(root()).unwrap_or(path).display().to_string()
}
