//! The scale section of `cargo xtask bench` (`--only scale`, never part of
//! the full run): many `python` sessions ([`crate::bench::many_sessions`]) on one
//! `anypath sandbox serve` with the service's defaults over a fresh data
//! directory ([`FleetConfig::local`]); the host stopped gracefully (which
//! hibernates its live sessions) and started again on that directory; then
//! every session read back and checked. It prints what that cost in time,
//! in the host's memory and on disk, and asserts nothing about time.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use anyhow::bail;

use crate::bench::hosts::{Calls, FleetConfig, Host, HostOptions};
use crate::bench::many_sessions::{READ, SET_UP, Sessions};
use crate::bench::table::{Row, print_table, warnings};
use crate::shell::{ScratchDir, step};

/// The file a hibernated session's state is kept in, in its home (the
/// interpreter's local session store names it so).
const STATE_IMAGE: &str = "state.img";

/// Runs the section on `sessions` sessions and prints it; an error, after
/// printing, when a session was read back wrong or not at all.
pub fn run_scale_bench(binary: &Path, runner: &Path, sessions: usize) -> anyhow::Result<()> {
    anyhow::ensure!(sessions > 0, "--scale-sessions must be at least 1");
    // Bound first, so dropped last: after the host that writes into it was killed.
    let scratch = ScratchDir::in_temp("anypath-scale-bench");
    let section = crate::bench::machine::Section::start();
    let config = FleetConfig::local(binary, runner, &scratch.0);
    let calls = Calls::new()?;
    step("scale: starting one host");
    let mut host = Host::start(&config, "scale", HostOptions::default())?;
    let many = Sessions::new("scale", sessions);
    step(&format!("scale: {sessions} sessions opened and set up"));
    let set_up = many.set_up(&calls, |_| host.base.as_str())?;
    let after_set_up = host.memory();
    step("scale: the host stopped with SIGTERM and started again");
    let stopped = host.stop()?;
    let disk = DiskUsage::of(host.data_dir())?;
    let restarted = host.start_again(&config)?;
    step("scale: every session read back");
    let read = many.read_back(&calls, |_| host.base.as_str());
    let after_read = host.memory();

    println!("\nsessions at scale: {sessions} `python` sessions on one host (anypath sandbox serve with the service's defaults,");
    println!("no object store or Redis) over a fresh data directory;");
    println!("each opened and `{SET_UP}` run, the host stopped with SIGTERM and started again, then `{READ}` in each, checked;");
    println!("one client, one call at a time, request to answer");
    println!("{}", section.describe());
    let rows = [
        Row::of(&format!("{sessions} sessions: open + set-up run"), set_up.per_session, ""),
        Row::new(&format!("{sessions} sessions after the restart: {READ}"), &read.right, "0 wrong"),
    ];
    print_table(&rows);
    println!("set up: {:.1} s in all, {:.1} ms per session on average", set_up.total.as_secs_f64(), per_session_ms(set_up.total, sessions));
    let counted = host.last_stop().map_or_else(String::new, |s| format!(" ({} live sessions hibernated in {} ms, as the host logged)", s.hibernated, s.elapsed_ms));
    println!(
        "stop: SIGTERM to exit {:.2} s{counted}; started again on the same directory and serving in {:.2} s",
        stopped.as_secs_f64(),
        restarted.as_secs_f64()
    );
    println!(
        "read back after the restart: {:.1} s in all, {:.1} ms per session on average; {}",
        read.total.as_secs_f64(),
        per_session_ms(read.total, sessions),
        read.verdict()
    );
    read.named().for_each(|line| println!("{line}"));
    let memory = |m: Option<crate::bench::machine::Memory>| m.map_or_else(|| "unknown".to_owned(), |m| m.to_string());
    println!("host memory after the set-up: {}; after the read-back (the restarted process): {}", memory(after_set_up), memory(after_read));
    println!("{}", disk.describe(sessions));
    let logged = warnings(&host);
    if logged.is_empty() {
        println!("the host logged no warning or error");
    }
    logged.iter().for_each(|line| println!("{line}"));
    if read.bad() > 0 {
        bail!("{} of {sessions} sessions were read back wrong or not at all", read.bad());
    }
    Ok(())
}

fn per_session_ms(total: Duration, sessions: usize) -> f64 {
    total.as_secs_f64() * 1e3 / sessions as f64
}

/// What a directory holds, as allocated on disk and as its sizes add up.
#[derive(Default)]
struct DiskUsage {
    images: Tally,
    other_files: Tally,
    /// Directories and symbolic links.
    directories: Tally,
}

/// Some of a directory's entries.
#[derive(Default)]
struct Tally {
    entries: u64,
    /// Allocated (`st_blocks`).
    disk: u64,
    /// The sizes (`st_size`).
    apparent: u64,
}

impl Tally {
    fn add(&mut self, metadata: &std::fs::Metadata) {
        self.entries += 1;
        self.disk += metadata.blocks() * 512;
        self.apparent += metadata.len();
    }
}

impl DiskUsage {
    /// Everything under `dir` (links not followed); state images are files named [`STATE_IMAGE`].
    fn of(dir: &Path) -> anyhow::Result<Self> {
        let mut usage = Self::default();
        let mut pending = vec![dir.to_owned()];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir)? {
                let entry = entry?;
                let metadata = entry.path().symlink_metadata()?;
                if metadata.is_dir() {
                    pending.push(entry.path());
                    usage.directories.add(&metadata);
                } else if metadata.is_symlink() {
                    usage.directories.add(&metadata);
                } else if entry.file_name() == STATE_IMAGE {
                    usage.images.add(&metadata);
                } else {
                    usage.other_files.add(&metadata);
                }
            }
        }
        Ok(usage)
    }

    /// The report's line: the whole, then each part, per session.
    fn describe(&self, sessions: usize) -> String {
        let kib = |bytes: u64| bytes as f64 / 1024.0 / sessions as f64;
        let (disk, apparent) = [&self.images, &self.other_files, &self.directories].iter().fold((0, 0), |(d, a), t| (d + t.disk, a + t.apparent));
        format!(
            "data directory after the stop: {:.1} MiB on disk ({:.1} MiB apparent), {:.1} KiB per session: \
             state images {:.1} KiB ({} images, {:.1} KiB apparent), other files {:.1} KiB ({} files), \
             directories and links {:.1} KiB ({}) per session",
            disk as f64 / 1048576.0,
            apparent as f64 / 1048576.0,
            kib(disk),
            kib(self.images.disk),
            self.images.entries,
            kib(self.images.apparent),
            kib(self.other_files.disk),
            self.other_files.entries,
            kib(self.directories.disk),
            self.directories.entries
        )
    }
}
