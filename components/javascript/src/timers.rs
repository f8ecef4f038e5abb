//! When the cell's timers are due.
//!
//! The prelude keeps each timer's callback and arguments under its id; this
//! queue only orders the ids by due time, so the cell's loop knows which to
//! run next and how long to sleep before it. Timers never outlive the cell
//! that set them: the cell runs them all before it returns.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// The longest delay a timer takes, as in Node (a longer one is 1 ms).
const MAX_DELAY_MS: f64 = 2_147_483_647.0;

/// Timers in due order; equal due times keep the order they were set in.
#[derive(Default)]
struct Queue {
    by_due: BTreeMap<(Instant, u64), u32>,
    by_id: HashMap<u32, (Instant, u64)>,
    next_seq: u64,
}

thread_local! {
    static QUEUE: RefCell<Queue> = RefCell::new(Queue::default());
}

/// Schedules timer `id` to be due `delay_ms` from now (replacing any time it had).
pub fn schedule(id: u32, delay_ms: f64) {
    // As Node: a delay that is not a number in 1..=2^31-1 is 1 ms.
    let delay_ms = if (1.0..=MAX_DELAY_MS).contains(&delay_ms) {
        delay_ms
    } else {
        1.0
    };
    let due = Instant::now() + Duration::from_secs_f64(delay_ms / 1000.0);
    QUEUE.with(|queue| {
        let mut queue = queue.borrow_mut();
        if let Some(key) = queue.by_id.remove(&id) {
            queue.by_due.remove(&key);
        }
        let key = (due, queue.next_seq);
        queue.next_seq += 1;
        queue.by_due.insert(key, id);
        queue.by_id.insert(id, key);
    });
}

/// Forgets timer `id`, if it is still waiting.
pub fn cancel(id: u32) {
    QUEUE.with(|queue| {
        let mut queue = queue.borrow_mut();
        if let Some(key) = queue.by_id.remove(&id) {
            queue.by_due.remove(&key);
        }
    });
}

/// Forgets every timer.
pub fn clear() {
    QUEUE.with(|queue| *queue.borrow_mut() = Queue::default());
}

/// Takes the next timer out of the queue, having waited until it is due;
/// none when no timer waits.
pub fn next_due() -> Option<u32> {
    let (due, id) = QUEUE.with(|queue| {
        let mut queue = queue.borrow_mut();
        let ((due, _), id) = queue.by_due.pop_first()?;
        queue.by_id.remove(&id);
        Some((due, id))
    })?;
    // Sleeping is the only way to wait: nothing else can happen meanwhile,
    // since the cell's jobs have all run. The host's time limit bounds it;
    // an interrupt ends it within a slice, and with it the cell's timers.
    loop {
        let wait = due.saturating_duration_since(Instant::now());
        if wait.is_zero() {
            return Some(id);
        }
        if crate::interrupt::take() || crate::interrupt::was_taken() {
            clear();
            return None;
        }
        std::thread::sleep(wait.min(WAIT_SLICE));
    }
}

/// How long a timer's wait sleeps before it asks whether it was interrupted.
const WAIT_SLICE: Duration = Duration::from_millis(20);
