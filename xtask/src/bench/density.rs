//! The density section of `cargo xtask bench` (`--only density`, and part
//! of the full run): how many idle sessions one host keeps live, and what
//! each costs. For each runtime, a host of its own with the service's
//! defaults (idle hibernation off, so only the memory budget hibernates)
//! opens `--density-sessions` sessions, each set up with variables
//! (`python`) or a small DataFrame too (`python-data`), then reads every one
//! back. The host's memory before and after gives each session's cost: its
//! proportional set size (`Pss`, every page once, the runtime image's pages
//! split between the instances that map them), which is what the host
//! really holds, beside `VmRSS`, which counts an image page at every
//! instance that maps it. `/healthz` gives what the budget counts.

use std::path::Path;

use anyhow::Context;

use crate::bench::hosts::{Calls, FleetConfig, Host, HostOptions};
use crate::bench::machine::Memory;
use crate::bench::many_sessions::{Sessions, Workload};
use crate::bench::table::{Row, print_table, warnings};
use crate::shell::{ScratchDir, step};

/// How long the sessions are left idle before they are measured: past the
/// service's ten seconds after which an idle session gives back pages.
const IDLE_FOR: std::time::Duration = std::time::Duration::from_secs(12);

/// Runs the section on `sessions` sessions per runtime and prints it; an
/// error, after printing, when a session was read back wrong or not at all.
pub fn run_density_bench(binary: &Path, runner: &Path, sessions: usize) -> anyhow::Result<()> {
    anyhow::ensure!(sessions > 0, "--density-sessions must be at least 1");
    // Bound first, so dropped last: after the hosts that write into it were killed.
    let scratch = ScratchDir::in_temp("anypath-density-bench");
    let section = crate::bench::machine::Section::start();
    let config = FleetConfig::local(binary, runner, &scratch.0);
    let calls = Calls::new()?;
    let mut measured = Vec::new();
    for (workload, prefix) in [(Workload::Variables, "density-python"), (Workload::DataFrame, "density-data")] {
        step(&format!("density: {sessions} `{}` sessions on one host", workload.runtime()));
        measured.push(measure(&config, &calls, workload, prefix, sessions)?);
    }

    println!("\nsessions per host: for each runtime, one anypath sandbox serve with the service's defaults (a 2 GiB session memory");
    println!("budget) and idle hibernation off; {sessions} sessions opened one after another, each set up, then each read back, checked;");
    println!("`python`: x, s and l; `python-data`: those and a DataFrame of l; request to answer, one client, one call at a time");
    println!("{}", section.describe());
    print_table(measured.iter().flat_map(|m| &m.rows));
    for m in &measured {
        m.notes.iter().for_each(|line| println!("{line}"));
    }
    let bad: usize = measured.iter().map(|m| m.bad).sum();
    anyhow::ensure!(bad == 0, "{bad} sessions were read back wrong or not at all");
    Ok(())
}

/// One runtime's rows and notes.
struct Measured {
    rows: Vec<Row>,
    notes: Vec<String>,
    bad: usize,
}

/// Opens, sets up and reads back `n` sessions of `workload` on a host of their own.
fn measure(config: &FleetConfig, calls: &Calls, workload: Workload, prefix: &'static str, n: usize) -> anyhow::Result<Measured> {
    let runtime = workload.runtime();
    let host = Host::start(config, prefix, HostOptions { never_idle: true, ..HostOptions::default() })?;
    // The runtime's first instance loads its compiled code and maps its
    // image: paid once per host, not per session.
    Sessions::of("warm-up", 1, workload).set_up(calls, |_| host.base.as_str())?;
    let before = host.memory().context("the host's memory")?;
    let many = Sessions::of(prefix, n, workload);
    let set_up = many.set_up(calls, |_| host.base.as_str())?;
    // Idle sessions: a session idle for ten seconds gives back the pages
    // its runs left as the runtime's image had them.
    std::thread::sleep(IDLE_FOR);
    let after = host.memory().context("the host's memory")?;
    let sessions = calls.health(&host.base)?["sessions"].clone();
    let read = many.read_back(calls, |_| host.base.as_str());

    let count = |field: &str| sessions[field].as_u64().unwrap_or_default();
    let (live, live_bytes, budget) = (count("live"), count("live_bytes"), count("memory_budget_bytes"));
    let mut notes = vec![format!("`{runtime}`, {n} sessions (and the warm-up one): {live} live, {} hibernated by the budget", count("hibernated"))];
    notes.push(format!("  the host's memory before the {n}: {before}; after: {after}"));
    notes.push(format!("  per session: {}", per_session(&before, &after, n)));
    if live > 0 {
        let counted = live_bytes / live;
        notes.push(format!(
            "  the budget counts {:.0} KiB per live session ({:.1} MiB for {live}): the default {:.0} MiB keeps about {} such sessions live",
            counted as f64 / 1024.0,
            live_bytes as f64 / 1048576.0,
            budget as f64 / 1048576.0,
            budget / counted.max(1)
        ));
    }
    notes.push(format!("  read back: {}", read.verdict()));
    notes.extend(read.named());
    notes.extend(warnings(&host));
    let goal = match workload {
        Workload::Variables => "",
        Workload::DataFrame => "<= 3 ms (1,000 sessions)",
    };
    let rows = vec![
        Row::of(&format!("{n} `{runtime}` sessions: open + set-up run"), set_up.per_session, ""),
        Row::new(&format!("{n} `{runtime}` sessions, live: {}", workload.read_cell()), &read.right, goal),
    ];
    Ok(Measured { rows, notes, bad: read.bad() })
}

/// What one session added to the host's memory, on average: `Pss` against
/// its goal, then `VmRSS` and the page tables.
fn per_session(before: &Memory, after: &Memory, n: usize) -> String {
    let each = |from: u64, to: u64| to.saturating_sub(from) as f64 / n as f64 / 1024.0;
    let pss = match (before.pss_kib, after.pss_kib) {
        (Some(from), Some(to)) => format!("Pss {:.2} MiB (goal: <= 4 MiB `python`, <= 8 MiB `python-data`)", each(from, to)),
        _ => "Pss unknown".to_owned(),
    };
    let tables = match (before.page_tables_kib, after.page_tables_kib) {
        (Some(from), Some(to)) => format!("; page tables (in neither) {:.2} MiB", each(from, to)),
        _ => String::new(),
    };
    format!("{pss}; VmRSS {:.2} MiB (an image page counted at each instance that maps it){tables}", each(before.rss_kib, after.rss_kib))
}
