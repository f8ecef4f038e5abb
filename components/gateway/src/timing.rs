//! Durations of the phases of one request, for the `Server-Timing` header.

use std::time::Instant;

/// Accumulated wall time per phase; a phase run twice (a conflict re-run) adds up.
#[derive(Default)]
pub struct Timings {
    phases: Vec<(&'static str, f64)>,
}

impl Timings {
    /// Runs `f`, adding its duration to `phase`.
    pub fn time<T>(&mut self, phase: &'static str, f: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let value = f();
        self.add(phase, started.elapsed().as_secs_f64() * 1e3);
        value
    }

    /// Adds `ms` measured elsewhere (the sandbox's own run time) to `phase`.
    pub fn add(&mut self, phase: &'static str, ms: f64) {
        match self.phases.iter_mut().find(|(name, _)| *name == phase) {
            Some((_, total)) => *total += ms,
            None => self.phases.push((phase, ms)),
        }
    }

    /// Adds each `name;dur=ms` entry of a called component's
    /// `Server-Timing` to its phase (a phase called twice adds up).
    pub fn add_entries(&mut self, header: &str) {
        for entry in header.split(',') {
            let Some((name, duration)) = entry.trim().split_once(";dur=") else { continue };
            let (Ok(ms), Some(phase)) = (duration.parse::<f64>(), known_phase(name)) else { continue };
            self.add(phase, ms);
        }
    }

    /// `plan;dur=0.41, load;dur=0.83, ...` (milliseconds, as the header defines).
    pub fn header(&self) -> String {
        self.phases.iter().map(|(name, ms)| format!("{name};dur={ms:.2}")).collect::<Vec<_>>().join(", ")
    }
}

/// The callee phases the gateway passes on (a phase name is `'static`).
fn known_phase(name: &str) -> Option<&'static str> {
    ["store-handler", "store-read", "store-ids", "store-write", "store-commit"].into_iter().find(|known| *known == name)
}
