//! The many-sessions part of the fleet benchmark: sessions spread
//! round-robin over the hosts, each host stopped gracefully (which hands
//! its sessions to the store) and started again in turn, then every
//! session's `x` read back through a host other than the one that made it.

use std::time::Instant;

use crate::fleet::{Calls, FleetConfig, Host, Latencies};
use crate::fleet_bench::{Part, Row};

fn name(i: usize) -> String {
    format!("many-{i}")
}

/// Runs the part on `hosts` (running, restarted in place): the read-back
/// row, and lines on the set-up, the restarts and the reads that went wrong.
pub fn run(config: &FleetConfig, calls: &Calls, hosts: &mut [Host], sessions: usize) -> anyhow::Result<Part> {
    let mut notes = Vec::new();
    let started = Instant::now();
    let mut setup = Vec::with_capacity(sessions);
    for i in 0..sessions {
        let host = &hosts[i % hosts.len()].base;
        let one = Instant::now();
        calls.open(host, &name(i))?;
        calls.run_ok(host, &name(i), &format!("x = {i}"))?;
        setup.push(one.elapsed());
    }
    let setup = (started.elapsed(), Latencies::of(&setup));
    notes.push(format!(
        "{sessions} sessions round-robin over {} hosts, each opened and x = i run: {:.1} s ({:.1} ms p50, {:.1} ms p99 per session)",
        hosts.len(),
        setup.0.as_secs_f64(),
        setup.1.p50(),
        setup.1.p99()
    ));
    for host in hosts.iter_mut() {
        let stopped = host.stop()?;
        let started = host.start_again(config)?;
        let line = host.log().into_iter().rev().find(|l| l.message == "sessions hibernated for the stop");
        let counted = line.map_or_else(String::new, |l| format!(" ({} hibernated, {} handed over)", l.line["hibernated"], l.line["handed_over"]));
        notes.push(format!("host {} restarted: SIGTERM to exit {:.2} s{counted}, started again and serving in {:.2} s", host.name, stopped.as_secs_f64(), started.as_secs_f64()));
    }
    let (mut read, mut wrong, mut failed) = (Vec::new(), Vec::new(), Vec::new());
    let reading = Instant::now();
    for i in 0..sessions {
        let host = &hosts[(i + 1) % hosts.len()].base;
        match calls.run(host, &name(i), "print(x)") {
            Ok(timed) => {
                let right = timed.answer["exit_code"] == 0 && timed.answer["state_reset"] != true && timed.answer["stdout"] == format!("{i}\n");
                if right {
                    read.push(timed.elapsed);
                } else {
                    wrong.push(format!("{}: {}", name(i), timed.answer));
                }
            }
            Err(error) => failed.push(format!("{}: {error:#}", name(i))),
        }
    }
    notes.push(format!(
        "read back through another host after the restarts: {:.1} s; {} wrong and {} failed of {sessions} (must be 0)",
        reading.elapsed().as_secs_f64(),
        wrong.len(),
        failed.len()
    ));
    for bad in wrong.iter().chain(&failed).take(5) {
        notes.push(format!("  {bad}"));
    }
    let read_back = Row::new(&format!("{sessions} sessions after restarts: print(x) on another host"), &read, "0 wrong");
    Ok(Part { rows: vec![read_back], notes, logged: Vec::new() })
}
