//! The rule every face decides a request's id by: the caller's
//! `x-request-id` is kept when it is 1-64 letters, digits or `-_.` (it goes
//! into logs and headers), otherwise the request gets a new one. The native
//! service, its app gate and the Spin components all follow it from here;
//! each draws the new id from its own platform's randomness (a UUID v4
//! natively, 128 random bits in hex in a component).

/// The header naming a request's id, on the request and on its answer.
pub const HEADER: &str = "x-request-id";

/// The longest caller-chosen id kept: it is logged and echoed on every answer.
pub const MAX_LEN: usize = 64;

/// Whether a caller's id may be kept: not empty, at most [`MAX_LEN`]
/// characters, letters, digits and `-_.` only.
pub fn is_usable(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_LEN && id.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// The caller's id (the [`HEADER`]'s value) when usable.
pub fn usable(given: Option<&str>) -> Option<String> {
    given.filter(|id| is_usable(id)).map(str::to_owned)
}

/// The request's id: the caller's when usable, else `fresh()`.
pub fn decide(given: Option<&str>, fresh: impl FnOnce() -> String) -> String {
    usable(given).unwrap_or_else(fresh)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_printable_id_is_kept_and_any_other_is_not() {
        assert_eq!(usable(Some("abc-1")).as_deref(), Some("abc-1"));
        assert_eq!(usable(Some("a b")), None);
        assert_eq!(usable(Some("")), None);
        assert_eq!(usable(None), None);
        assert!(is_usable("req-1.a_B") && is_usable(&"x".repeat(MAX_LEN)));
        assert!(!is_usable(&"x".repeat(MAX_LEN + 1)) && !is_usable("semi;colon"));
        assert_eq!(decide(Some("given-1"), || "new".into()), "given-1");
        assert_eq!(decide(Some("has space"), || "new".into()), "new");
    }
}
