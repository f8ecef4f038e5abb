//! Promises rejected with no handler, which a cell reports as Node reports
//! an unhandled rejection: as the cell's error.

use std::cell::RefCell;

use rquickjs::{Ctx, Persistent, Runtime, Value};

/// A rejected promise and its reason.
type Rejection = (Persistent<Value<'static>>, Persistent<Value<'static>>);

thread_local! {
    /// The rejections still unhandled, oldest first.
    static UNHANDLED: RefCell<Vec<Rejection>> = const { RefCell::new(Vec::new()) };
}

/// Has `runtime` tell this module of every rejection left unhandled, and of
/// every handler added to a rejected promise later.
pub fn track(runtime: &Runtime) {
    runtime.set_host_promise_rejection_tracker(Some(Box::new(
        |ctx, promise, reason, is_handled| {
            if is_handled {
                forget(&ctx, &promise);
            } else {
                let entry = (
                    Persistent::save(&ctx, promise),
                    Persistent::save(&ctx, reason),
                );
                UNHANDLED.with(|unhandled| unhandled.borrow_mut().push(entry));
            }
        },
    )));
}

/// Drops `promise` from the unhandled ones.
fn forget<'js>(ctx: &Ctx<'js>, promise: &Value<'js>) {
    let entries = UNHANDLED.with(|unhandled| std::mem::take(&mut *unhandled.borrow_mut()));
    let mut kept = Vec::with_capacity(entries.len());
    for (saved, reason) in entries {
        match saved.clone().restore(ctx) {
            Ok(value) if value == *promise => {}
            _ => kept.push((saved, reason)),
        }
    }
    // Rejections recorded meanwhile (none: restoring runs no code) stay.
    UNHANDLED.with(|unhandled| {
        let mut unhandled = unhandled.borrow_mut();
        kept.append(&mut unhandled);
        *unhandled = kept;
    });
}

/// Takes the reason of the oldest rejection still unhandled, but that of
/// `own` (the cell's own promise, whose rejection is the cell's error), and
/// forgets them all.
pub fn take_first<'js>(ctx: &Ctx<'js>, own: Option<&Value<'js>>) -> Option<Value<'js>> {
    let entries = UNHANDLED.with(|unhandled| std::mem::take(&mut *unhandled.borrow_mut()));
    let mut first = None;
    for (promise, reason) in entries {
        let Ok(promise) = promise.restore(ctx) else {
            continue;
        };
        let Ok(reason) = reason.restore(ctx) else {
            continue;
        };
        if first.is_none() && own != Some(&promise) {
            first = Some(reason);
        }
    }
    first
}
