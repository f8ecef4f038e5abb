//! What a benchmark says about the machine it ran on, so its figures can be
//! judged: the cores this process may use and the load average; and the
//! memory a process it started holds.

/// The cores this process may use.
pub fn cores() -> String {
    std::thread::available_parallelism().map_or_else(|_| "unknown".to_owned(), |n| n.to_string())
}

/// The load average over 1, 5 and 15 minutes, from Linux's `/proc/loadavg`
/// (elsewhere "unknown").
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|text| text.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .filter(|load| !load.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// A benchmark section's span: the load average when it began and how
/// long it took, for its `machine:` line.
pub struct Section {
    load_before: String,
    started: std::time::Instant,
}

impl Section {
    /// Begins now.
    pub fn start() -> Self {
        Self { load_before: load_average(), started: std::time::Instant::now() }
    }

    /// `machine: N cores, load average ... before the section, ... after; the section took S s`.
    pub fn describe(&self) -> String {
        format!(
            "machine: {} cores, load average (1, 5, 15 min) {} before the section, {} after; the section took {:.0} s",
            cores(),
            self.load_before,
            load_average(),
            self.started.elapsed().as_secs_f64()
        )
    }
}

/// A process's memory, as Linux's `/proc/<pid>/status` and
/// `/proc/<pid>/smaps_rollup` give it.
#[derive(Clone, Copy, Debug)]
pub struct Memory {
    /// `VmRSS`: resident now, in KiB. A page mapped at several addresses
    /// (an image every instance maps copy-on-write) counts at each.
    pub rss_kib: u64,
    /// `VmHWM`: the most it was resident at once, in KiB.
    pub peak_kib: u64,
    /// `Pss`: resident now with each page counted once, shared ones split
    /// between their mappings, in KiB; what the process really holds.
    pub pss_kib: Option<u64>,
    /// `VmPTE`: its page tables, in KiB (in neither of the above).
    pub page_tables_kib: Option<u64>,
}

impl std::fmt::Display for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VmRSS {:.0} MiB (VmHWM {:.0} MiB)", mib(self.rss_kib), mib(self.peak_kib))?;
        if let Some(pss) = self.pss_kib {
            write!(f, ", Pss {:.0} MiB", mib(pss))?;
        }
        if let Some(tables) = self.page_tables_kib {
            write!(f, ", page tables {:.0} MiB", mib(tables))?;
        }
        Ok(())
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The memory of process `pid`; `None` when it is gone or this is not Linux.
pub fn memory(pid: u32) -> Option<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    Some(Memory {
        rss_kib: kib_field(&status, "VmRSS:")?,
        peak_kib: kib_field(&status, "VmHWM:")?,
        pss_kib: kib_field(&rollup, "Pss:"),
        page_tables_kib: kib_field(&status, "VmPTE:"),
    })
}

/// The value of the line `name  123 kB` in a `/proc` file.
fn kib_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|line| line.starts_with(name))?;
    line[name.len()..].trim().trim_end_matches("kB").trim().parse().ok()
}
