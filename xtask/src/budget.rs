//! The wall time and CPU time of each stage of a long command (build, each
//! install, each test pass), printed as one table when the command ends,
//! failed or not, so a stage that grew shows in every run's log. CPU time
//! (user + sys of the processes the stage waited for) is what to compare
//! across machines: wall time depends on the cores.

use std::sync::Mutex;
use std::time::Instant;

/// One stage as it ended.
struct Stage {
    name: String,
    seconds: f64,
    /// User + sys seconds of the child processes that ended during the
    /// stage (process-wide: a stage beside others shares theirs).
    cpu_seconds: f64,
    /// `ok`, `failed` or `skipped: <why>`.
    outcome: String,
    /// Whether it ran beside another stage (its time overlaps theirs).
    beside: bool,
}

/// The stages of one command, in the order they ended. Shared by the threads
/// that run stages side by side.
pub struct Budget {
    started: Instant,
    cpu_at_start: f64,
    stages: Mutex<Vec<Stage>>,
}

impl Budget {
    /// Starts the command's clock.
    pub fn new() -> Self {
        Self { started: Instant::now(), cpu_at_start: children_cpu_seconds(), stages: Mutex::new(Vec::new()) }
    }

    /// Runs `work` as the stage `name` and records its wall time and outcome.
    pub fn time<T>(&self, name: &str, work: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
        self.timed(name, false, work)
    }

    /// Like [`Budget::time`], for a stage that runs beside others (on
    /// another thread), so its time is not part of the sum of the sequence.
    pub fn time_beside<T>(&self, name: &str, work: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
        self.timed(name, true, work)
    }

    fn timed<T>(&self, name: &str, beside: bool, work: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
        let started = Instant::now();
        let cpu_before = children_cpu_seconds();
        let result = work();
        let outcome = if result.is_ok() { "ok".to_owned() } else { "failed".to_owned() };
        let cpu_seconds = children_cpu_seconds() - cpu_before;
        self.record(Stage { name: name.to_owned(), seconds: started.elapsed().as_secs_f64(), cpu_seconds, outcome, beside });
        result
    }

    /// Records a stage that did not run, with the reason.
    pub fn skipped(&self, name: &str, reason: &str) {
        self.record(Stage { name: name.to_owned(), seconds: 0.0, cpu_seconds: 0.0, outcome: format!("skipped: {reason}"), beside: false });
    }

    fn record(&self, stage: Stage) {
        // A poisoned lock only means another stage panicked; its records are still good.
        self.stages.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(stage);
    }

    /// The table: one line per stage (wall time, then CPU time), then the
    /// command's totals.
    pub fn table(&self, command: &str) -> String {
        let stages = self.stages.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let width = stages.iter().map(|s| s.name.len()).max().unwrap_or(0).max(5);
        let mut out = format!("==> {command}: wall time and CPU time (user + sys of its processes) per stage\n");
        for stage in stages.iter() {
            let mark = if stage.beside { " (beside the build)" } else { "" };
            out.push_str(&format!(
                "    {:<width$}  {:>9}  cpu {:>9}  {}{mark}\n",
                stage.name,
                clock(stage.seconds),
                clock(stage.cpu_seconds),
                stage.outcome
            ));
        }
        out.push_str(&format!(
            "    {:<width$}  {:>9}  cpu {:>9}\n",
            "total",
            clock(self.started.elapsed().as_secs_f64()),
            clock(children_cpu_seconds() - self.cpu_at_start)
        ));
        out
    }
}

impl Default for Budget {
    fn default() -> Self {
        Self::new()
    }
}

/// User + sys seconds of every child process this one has waited for
/// (and theirs, as each waited): `getrusage(RUSAGE_CHILDREN)`.
fn children_cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) } != 0 {
        return 0.0;
    }
    let seconds = |time: libc::timeval| time.tv_sec as f64 + time.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// `m:ss.s`, or `h:mm:ss` past an hour.
fn clock(seconds: f64) -> String {
    let whole = seconds as u64;
    if whole >= 3600 {
        format!("{}:{:02}:{:02}", whole / 3600, whole / 60 % 60, whole % 60)
    } else {
        format!("{}:{:04.1}", whole / 60, seconds - (whole / 60 * 60) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_reads_as_minutes_and_seconds() {
        assert_eq!(clock(0.0), "0:00.0");
        assert_eq!(clock(75.25), "1:15.2");
        assert_eq!(clock(3725.0), "1:02:05");
    }

    #[test]
    fn a_failed_stage_is_recorded_and_its_error_returned() {
        let budget = Budget::new();
        assert!(budget.time("good", || Ok(())).is_ok());
        assert!(budget.time("bad", || -> anyhow::Result<()> { anyhow::bail!("no") }).is_err());
        budget.skipped("spin", "no Spin CLI");
        let table = budget.table("test");
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[1].contains("good") && lines[1].ends_with("ok"), "{table}");
        assert!(lines[2].contains("bad") && lines[2].ends_with("failed"), "{table}");
        assert!(lines[3].ends_with("skipped: no Spin CLI"), "{table}");
        assert!(lines[4].trim_start().starts_with("total"), "{table}");
    }

    #[test]
    fn a_stage_counts_the_cpu_time_of_the_processes_it_waited_for() {
        let budget = Budget::new();
        // A child that spins for about a quarter of a second of CPU.
        let spin = "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done";
        budget
            .time("spin", || {
                let status = std::process::Command::new("sh").args(["-c", spin]).status()?;
                anyhow::ensure!(status.success(), "sh failed");
                Ok(())
            })
            .expect("the stage runs");
        let cpu = budget.stages.lock().expect("no other thread")[0].cpu_seconds;
        assert!(cpu > 0.05, "the child's CPU time was not counted: {cpu}");
    }
}
