//! Byte ranges of a memory: which chunks differ from the baseline, and the
//! set operations a capture and a restore need on ascending ranges.

use super::image::CHUNK;

/// Ascending ranges with the touching ones joined.
pub(super) fn merged(ranges: impl IntoIterator<Item = (usize, usize)>) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (start, end) in ranges {
        match out.last_mut() {
            Some(last) if last.1 == start => last.1 = end,
            _ => out.push((start, end)),
        }
    }
    out
}

/// Where two ascending lists of disjoint ranges overlap.
pub(super) fn intersect(a: &[(usize, usize)], b: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        let (start, end) = (a[i].0.max(b[j].0), a[i].1.min(b[j].1));
        if start < end {
            out.push((start, end));
        }
        if a[i].1 < b[j].1 { i += 1 } else { j += 1 }
    }
    out
}

/// The ranges either ascending list covers, ascending and joined.
pub(super) fn union(a: &[(usize, usize)], b: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let mut all: Vec<(usize, usize)> = a.iter().chain(b).copied().collect();
    all.sort_unstable();
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(all.len());
    for (start, end) in all {
        match out.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

/// The ranges of `0..len` that no run covers (runs in ascending order).
pub(super) fn uncovered(len: usize, runs: &[(usize, &[u8])]) -> Vec<(usize, usize)> {
    let mut gaps = Vec::new();
    let mut at = 0;
    for (start, bytes) in runs {
        let start = (*start).min(len);
        if start > at {
            gaps.push((at, start));
        }
        at = at.max((start + bytes.len()).min(len));
    }
    if at < len {
        gaps.push((at, len));
    }
    gaps
}

/// Ranges of `start..end` outside every `protected` range.
pub(super) fn outside(start: usize, end: usize, protected: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let mut pieces = vec![(start, end)];
    for (p_start, p_end) in protected {
        pieces = pieces
            .into_iter()
            .flat_map(|(s, e)| {
                if *p_end <= s || *p_start >= e {
                    vec![(s, e)]
                } else {
                    [(s, (*p_start).max(s)), ((*p_end).min(e), e)].into_iter().filter(|(a, b)| a < b).collect()
                }
            })
            .collect();
    }
    pieces
}

/// The `CHUNK`s within `from..to`, counted from `from`, where `current`
/// differs from `base` (bytes past `base`'s end differ where they are not
/// zero), in order: [`merged`] joins the touching ones.
pub(super) fn differing_chunks<'a>(current: &'a [u8], base: &'a [u8], from: usize, to: usize) -> impl Iterator<Item = (usize, usize)> + 'a {
    let to = to.min(current.len());
    (from..to).step_by(CHUNK).map(move |offset| (offset, (offset + CHUNK).min(to))).filter(move |&(offset, end)| {
        let chunk = &current[offset..end];
        match base.get(offset..end) {
            Some(base_chunk) => chunk != base_chunk,
            None => chunk.iter().any(|b| *b != 0),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_merge_adjacent_chunks_and_skip_protected_ranges() {
        let base = vec![0u8; 5 * CHUNK];
        let mut current = base.clone();
        current[10] = 1;
        current[CHUNK + 5] = 1;
        current[4 * CHUNK] = 1;
        let runs = merged(differing_chunks(&current, &base, 0, current.len()));
        assert_eq!(runs, vec![(0, 2 * CHUNK), (4 * CHUNK, 5 * CHUNK)]);
        let unprotected: Vec<_> = runs.iter().flat_map(|(s, e)| outside(*s, *e, &[(100, CHUNK + 100)])).collect();
        assert_eq!(unprotected, vec![(0, 100), (CHUNK + 100, 2 * CHUNK), (4 * CHUNK, 5 * CHUNK)]);
        assert_eq!(merged(differing_chunks(&current, &base, 2 * CHUNK, 5 * CHUNK)), vec![(4 * CHUNK, 5 * CHUNK)]);
    }

    #[test]
    fn ranges_intersect_and_gaps_are_what_no_run_covers() {
        assert_eq!(intersect(&[(0, 10), (20, 30)], &[(5, 25), (28, 40)]), vec![(5, 10), (20, 25), (28, 30)]);
        assert_eq!(intersect(&[(0, 10)], &[]), vec![]);
        assert_eq!(merged([(0, 4), (4, 8), (12, 16)]), vec![(0, 8), (12, 16)]);
        let chunk = [0u8; 4];
        assert_eq!(uncovered(20, &[(2, &chunk[..]), (10, &chunk[..])]), vec![(0, 2), (6, 10), (14, 20)]);
        assert_eq!(uncovered(8, &[(0, &chunk[..]), (4, &chunk[..])]), vec![]);
    }

    #[test]
    fn bytes_past_the_baseline_count_only_when_not_zero() {
        let base = vec![0u8; CHUNK];
        let mut current = vec![0u8; 3 * CHUNK];
        current[2 * CHUNK + 1] = 7;
        assert_eq!(merged(differing_chunks(&current, &base, 0, current.len())), vec![(2 * CHUNK, 3 * CHUNK)]);
    }

    #[test]
    fn a_union_covers_both_lists_once() {
        assert_eq!(union(&[(0, 4), (10, 12)], &[(2, 6), (12, 14), (20, 21)]), vec![(0, 6), (10, 14), (20, 21)]);
        assert_eq!(union(&[], &[(1, 2)]), vec![(1, 2)]);
    }
}
