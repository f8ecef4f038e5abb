//! Time per `check`, for a one-line block and a 30-line block (allowed and
//! refused). Build it optimised, as the host is:
//!
//! ```text
//! cargo run --release -p anypath-block-gate --example timing
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use anypath_block_gate::check;

const ONE_LINE: &str = "REPLY = {'status': 200, 'body': store.get(ctx['segments'][1])}";

/// A create with validation, as a planner writes one: 30 lines.
const THIRTY_LINES: &str = r#"payload = ctx.get('body_json')
if not isinstance(payload, dict):
    REPLY = {'status': 400, 'body': {'error': {'code': 'bad_request', 'message': 'the body must be a JSON object'}}}
else:
    obj = dict(payload)
    errors = []
    name = obj.get('name')
    if not isinstance(name, str) or not name.strip():
        errors.append('name is required')
    age = obj.get('age')
    if age is not None and (not isinstance(age, int) or age < 0):
        errors.append('age must be a non-negative integer')
    tags = [t.strip().lower() for t in obj.get('tags', []) if isinstance(t, str) and t.strip()]
    obj['tags'] = sorted(set(tags))
    existing = store.search({'name': name}) if isinstance(name, str) else []
    if existing:
        errors.append(f"{name!r} already exists")
    if errors:
        REPLY = {'status': 422, 'body': {'error': {'code': 'invalid', 'message': '; '.join(errors)}}}
    else:
        try:
            new_id = store.insert(obj)
        except ValueError as exc:
            REPLY = {'status': 409, 'body': {'error': {'code': 'conflict', 'message': str(exc)}}}
        else:
            total = len(store.get_all())
            REPLY = {
                'status': 201,
                'headers': {'Location': '/members/' + quote_segment(new_id), 'X-Total': str(total)},
                'body': obj,
            }"#;

fn main() {
    let thirty_refused = THIRTY_LINES.replace("str(total)", "str(total.__class__)");
    for (label, source) in [
        ("one line, allowed", ONE_LINE.to_owned()),
        (
            "one line, refused",
            "REPLY = {'status': 200, 'body': store._journal}".to_owned(),
        ),
        ("30 lines, allowed", THIRTY_LINES.to_owned()),
        ("30 lines, refused on line 28", thirty_refused),
    ] {
        let verdict = check(&source);
        let (fastest, median) = time(|| {
            black_box(check(black_box(&source)));
        });
        println!(
            "{label:30} {:>8.2} µs per check (median round {:>8.2} µs)   {verdict:?}",
            fastest.as_secs_f64() * 1e6,
            median.as_secs_f64() * 1e6,
        );
    }
}

/// The mean time of one call in the fastest of 51 rounds of about 10 ms
/// each, and in the median round. The fastest round is the figure for an
/// idle machine: on a busy one most rounds also count time the thread spent
/// descheduled.
fn time(mut f: impl FnMut()) -> (Duration, Duration) {
    let start = Instant::now();
    let mut calibration = 0u32;
    while start.elapsed() < Duration::from_millis(10) {
        f();
        calibration += 1;
    }
    let per_round = calibration.max(10);
    let mut rounds: Vec<Duration> = (0..51)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..per_round {
                f();
            }
            start.elapsed() / per_round
        })
        .collect();
    rounds.sort();
    (rounds[0], rounds[rounds.len() / 2])
}
