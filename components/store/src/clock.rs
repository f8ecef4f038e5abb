//! The store's clocks: short waits while another writer finishes, and the
//! wall time a transaction's lock records.

/// Blocks this request for `ms` milliseconds.
pub fn pause_ms(ms: u64) {
    wasi::clocks::monotonic_clock::subscribe_duration(ms * 1_000_000).block();
}

/// Wall-clock milliseconds.
pub fn now_ms() -> u64 {
    let now = wasi::clocks::wall_clock::now();
    now.seconds * 1000 + u64::from(now.nanoseconds / 1_000_000)
}
