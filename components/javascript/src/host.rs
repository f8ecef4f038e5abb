//! The functions of this crate the prelude builds the globals over.
//!
//! They reach the prelude as one object, `host`, an argument of its
//! function and never a global: a cell cannot call them but through the
//! globals the prelude made.

use rquickjs::function::Func;
use rquickjs::promise::PromiseState;
use rquickjs::{Array, Ctx, Object, Result, TypedArray, Value};

use crate::output::{self, Stream};
use crate::{fs, timers};

/// The `host` object.
pub fn object<'js>(ctx: &Ctx<'js>) -> Result<Object<'js>> {
    let host = Object::new(ctx.clone())?;
    host.set(
        "write",
        Func::from(|stream: u32, text: String| output::write(Stream::from_number(stream), &text)),
    )?;
    host.set("schedule", Func::from(timers::schedule))?;
    host.set("cancel", Func::from(timers::cancel))?;
    host.set("promiseState", Func::from(promise_state))?;
    host.set(
        "encodeUtf8",
        Func::from(|ctx: Ctx<'js>, text: String| TypedArray::<u8>::new(ctx, text.into_bytes())),
    )?;
    host.set("decodeUtf8", Func::from(decode_utf8))?;
    fs::install(ctx, &host)?;
    Ok(host)
}

/// `['pending']`, `['fulfilled', value]` or `['rejected', reason]` for a
/// promise (what `inspect` shows of it, and JavaScript cannot see); nothing
/// for another value.
fn promise_state<'js>(ctx: Ctx<'js>, value: Value<'js>) -> Result<Option<Array<'js>>> {
    let Some(promise) = value.as_promise() else {
        return Ok(None);
    };
    let state = Array::new(ctx.clone())?;
    match promise.state() {
        PromiseState::Pending => state.set(0, "pending")?,
        PromiseState::Resolved => {
            state.set(0, "fulfilled")?;
            state.set(1, promise.result::<Value>().transpose()?)?;
        }
        PromiseState::Rejected => {
            state.set(0, "rejected")?;
            // Reading a rejected promise's result throws its reason; it is
            // caught here at once, and the promise stays as it was.
            let _ = promise.result::<Value>();
            state.set(1, ctx.catch())?;
        }
    }
    Ok(Some(state))
}

/// UTF-8 bytes as text; an invalid sequence becomes U+FFFD, or with
/// `fatal` throws a `TypeError` (as `TextDecoder` does).
fn decode_utf8<'js>(ctx: Ctx<'js>, bytes: TypedArray<'js, u8>, fatal: bool) -> Result<String> {
    let bytes = bytes.as_bytes().unwrap_or_default();
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(text.to_owned()),
        Err(_) if fatal => Err(rquickjs::Exception::throw_type(
            &ctx,
            "The encoded data was not valid for encoding utf-8",
        )),
        Err(_) => Ok(String::from_utf8_lossy(bytes).into_owned()),
    }
}
