//! The many-sessions part of the fleet benchmark: sessions
//! ([`crate::bench::many_sessions`]) spread round-robin over the hosts, each host
//! stopped gracefully (which hands its sessions to the store) and started
//! again in turn, then every session read back through a host other than
//! the one that made it.

use crate::bench::hosts::{Calls, FleetConfig, Host};
use crate::bench::many_sessions::{SET_UP, Sessions};
use crate::bench::table::{Part, Row};

/// Runs the part on `hosts` (running, restarted in place): the read-back
/// row, and lines on the set-up, the restarts and the reads that went wrong.
pub fn run(config: &FleetConfig, calls: &Calls, hosts: &mut [Host], sessions: usize) -> anyhow::Result<Part> {
    let many = Sessions::new("many", sessions);
    let mut notes = Vec::new();
    let set_up = {
        let hosts = &*hosts;
        many.set_up(calls, |i| hosts[i % hosts.len()].base.as_str())?
    };
    notes.push(format!(
        "{sessions} sessions round-robin over {} hosts, each opened and {SET_UP} run: {:.1} s ({:.1} ms p50, {:.1} ms p99 per session)",
        hosts.len(),
        set_up.total.as_secs_f64(),
        set_up.per_session.p50(),
        set_up.per_session.p99()
    ));
    for host in hosts.iter_mut() {
        let stopped = host.stop()?;
        let started = host.start_again(config)?;
        let counted = host.last_stop().map_or_else(String::new, |s| format!(" ({} hibernated, {} handed over)", s.hibernated, s.handed_over));
        notes.push(format!(
            "host {} restarted: SIGTERM to exit {:.2} s{counted}, started again and serving in {:.2} s",
            host.name,
            stopped.as_secs_f64(),
            started.as_secs_f64()
        ));
    }
    let read = {
        let hosts = &*hosts;
        many.read_back(calls, |i| hosts[(i + 1) % hosts.len()].base.as_str())
    };
    notes.push(format!("read back through another host after the restarts: {:.1} s; {}", read.total.as_secs_f64(), read.verdict()));
    notes.push(store_held(calls, hosts, sessions)?);
    notes.extend(read.named());
    let read_back = Row::new(&format!("{sessions} sessions after restarts: read back on another host"), &read.right, "0 wrong");
    Ok(Part { rows: vec![read_back], notes, logged: Vec::new() })
}

/// What the store holds per session, as the first sweep after the reads
/// counted it (the hosts sweep every 15 s), and how long that sweep took.
fn store_held(calls: &Calls, hosts: &[Host], sessions: usize) -> anyhow::Result<String> {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis() as f64;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        for host in hosts {
            if calls.metric(&host.base, "store_sweep_finished_unix_ms")? < since {
                continue;
            }
            let (mut bytes, mut objects) = (0.0, 0.0);
            for kind in ["images", "packs", "files", "blobs"] {
                bytes += calls.metric(&host.base, &format!("store_{kind}_bytes"))?;
                objects += calls.metric(&host.base, &format!("store_{kind}_objects"))?;
            }
            let swept = calls.metric(&host.base, "store_sweep_duration_ms")?;
            return Ok(format!(
                "the store after the reads: {:.1} MiB in {objects:.0} objects, {:.1} KiB per session (manifests, packs, file lists and contents); host {}'s sweep of it took {swept:.0} ms",
                bytes / 1048576.0,
                bytes / 1024.0 / sessions.max(1) as f64,
                host.name
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    Ok("the store after the reads: no host swept within a minute".to_owned())
}
