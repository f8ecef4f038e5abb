//! Interrupts: the host raises one while a cell runs (a Jupyter interrupt,
//! a client gone), and the cell ends with an `Interrupted` error while the
//! session's state stays, as Python's `KeyboardInterrupt` leaves it.
//!
//! QuickJS asks [`take`] every few thousand instructions; a timer's wait
//! asks between short sleeps. The first answer of yes is latched for the
//! rest of the cell, so the runtime's own code that reports the cell (which
//! runs JavaScript too) is not interrupted in turn.

use std::cell::Cell;

thread_local! {
    /// Whether this cell was interrupted.
    static TAKEN: Cell<bool> = const { Cell::new(false) };
}

/// Forgets the last cell's interrupt, at the start of a cell.
pub fn reset() {
    TAKEN.with(|taken| taken.set(false));
}

/// Whether the engine should stop the running code now: yes once, when
/// the host raised an interrupt; no for the rest of the cell.
pub fn take() -> bool {
    TAKEN.with(|taken| {
        if taken.get() || !crate::interrupted() {
            return false;
        }
        taken.set(true);
        true
    })
}

/// Whether this cell was interrupted (by the engine's check or a wait's).
pub fn was_taken() -> bool {
    TAKEN.with(Cell::get)
}
