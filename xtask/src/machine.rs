//! What a benchmark says about the machine it ran on, so its figures can be
//! judged: the cores this process may use and the load average.

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
