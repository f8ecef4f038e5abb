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

/// A process's resident memory, as Linux's `/proc/<pid>/status` gives it.
#[derive(Clone, Copy, Debug)]
pub struct Memory {
    /// `VmRSS`: resident now, in KiB.
    pub rss_kib: u64,
    /// `VmHWM`: the most it was resident at once, in KiB.
    pub peak_kib: u64,
}

impl std::fmt::Display for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VmRSS {:.0} MiB (VmHWM {:.0} MiB)", self.rss_kib as f64 / 1024.0, self.peak_kib as f64 / 1024.0)
    }
}

/// The memory of process `pid`; `None` when it is gone or this is not Linux.
pub fn memory(pid: u32) -> Option<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        let line = status.lines().find(|line| line.starts_with(name))?;
        line[name.len()..].trim().trim_end_matches("kB").trim().parse().ok()
    };
    Some(Memory { rss_kib: field("VmRSS:")?, peak_kib: field("VmHWM:")? })
}
