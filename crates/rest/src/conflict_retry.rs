//! One policy for running a request again when the data it read changed
//! before its journal landed: the gateway's blocks and the store's direct
//! path both follow it.

/// Runs after a conflict before the client hears 409.
pub const MAX_CONFLICT_RETRIES: usize = 64;

/// The pause before run `attempt` (1 is the first re-run), in nanoseconds:
/// a uniform share of `2 * attempt` ms, at most 20 ms, so writers that
/// conflicted spread out instead of colliding again. `random` is any
/// uniformly random number.
pub fn back_off_ns(attempt: usize, random: u64) -> u64 {
    let ceiling_ns = (2 * attempt as u64).min(20) * 1_000_000;
    random % (ceiling_ns + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_grow_with_the_attempt_and_stop_at_20_ms() {
        assert_eq!(back_off_ns(1, u64::MAX - 1), (u64::MAX - 1) % 2_000_001);
        assert!((0..1000u64).all(|r| back_off_ns(3, r.wrapping_mul(0x9e37_79b9_7f4a_7c15)) <= 6_000_000));
        assert_eq!(back_off_ns(50, 20_000_000), 20_000_000, "the ceiling is reachable");
        assert_eq!(back_off_ns(50, 20_000_001), 0, "and never passed");
        assert_eq!(back_off_ns(0, 12345), 0, "no pause before the first run");
    }
}
