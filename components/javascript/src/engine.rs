//! The instance's one QuickJS runtime and context, made for its first cell
//! and kept for every later one.

use std::cell::RefCell;

use rquickjs::{CatchResultExt, Context, Runtime};

use crate::prelude::{self, Hooks};
use crate::rejections;

/// What every cell of the instance runs in.
pub struct Engine {
    // Fields drop in order: the hooks hold values of the runtime, so they
    // go before it.
    pub hooks: Hooks,
    pub context: Context,
    pub runtime: Runtime,
}

thread_local! {
    static ENGINE: RefCell<Option<Engine>> = const { RefCell::new(None) };
}

/// Calls `f` with the engine, made first if this is the instance's first
/// cell. Fails (with why) when the engine cannot be made.
pub fn with<R>(f: impl FnOnce(&Engine) -> R) -> Result<R, String> {
    ENGINE.with(|slot| {
        if slot.borrow().is_none() {
            let engine = make()?;
            *slot.borrow_mut() = Some(engine);
        }
        // Nothing a cell runs reaches this slot again, so the borrow held
        // over the cell never meets another.
        let engine = slot.borrow();
        match engine.as_ref() {
            Some(engine) => Ok(f(engine)),
            None => Err("the JavaScript engine is missing".to_owned()),
        }
    })
}

/// A runtime and context with the prelude's globals installed.
fn make() -> Result<Engine, String> {
    let runtime = Runtime::new().map_err(|error| format!("cannot start QuickJS: {error}"))?;
    let context = Context::full(&runtime)
        .map_err(|error| format!("cannot make a JavaScript context: {error}"))?;
    rejections::track(&runtime);
    runtime.set_interrupt_handler(Some(Box::new(crate::interrupt::take)));
    let hooks = context.with(|ctx| {
        prelude::install(&ctx)
            .catch(&ctx)
            .map_err(|error| format!("the prelude failed: {error}"))
    })?;
    Ok(Engine {
        hooks,
        context,
        runtime,
    })
}
