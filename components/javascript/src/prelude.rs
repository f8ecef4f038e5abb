//! The JavaScript half of the runtime: the files under `prelude/`, run once
//! in a new context, making the globals and giving this crate its hooks.
//!
//! The hooks are kept as a [`Persistent`] object no global reaches, so what
//! a cell does to the globals (or to `JSON`, `Object.prototype`...) cannot
//! change how its values and errors are reported.

use rquickjs::context::EvalOptions;
use rquickjs::{Ctx, Function, Object, Persistent, Result, Value};

use crate::host;

/// The prelude's files, in the order they run: each is an expression whose
/// value is a function of `host` and `parts` (what the earlier files gave,
/// under their names), and gives what later files and this crate use.
const PARTS: [(&str, &str); 8] = [
    ("inspect", include_str!("prelude/inspect.js")),
    ("console", include_str!("prelude/console.js")),
    ("timers", include_str!("prelude/timers.js")),
    ("process", include_str!("prelude/process.js")),
    ("bytes", include_str!("prelude/bytes.js")),
    ("path", include_str!("prelude/path.js")),
    ("fs", include_str!("prelude/fs.js")),
    ("modules", include_str!("prelude/modules.js")),
];

/// The hooks this crate calls: (part, name).
const HOOKS: [(&str, &str); 8] = [
    ("inspect", "inspect"),
    ("inspect", "completionValue"),
    ("inspect", "describeError"),
    ("inspect", "toJson"),
    ("timers", "runTimer"),
    ("timers", "clearTimers"),
    ("process", "setEnv"),
    ("process", "exitCode"),
];

/// Marks the frames of the prelude's own code in stack traces, which a
/// cell's traceback leaves out.
pub const FILENAME_PREFIX: &str = "<runtime:";

/// The functions this crate calls in JavaScript.
pub struct Hooks(Persistent<Object<'static>>);

/// Runs the prelude in `ctx`, making the globals; gives the hooks.
pub fn install(ctx: &Ctx<'_>) -> Result<Hooks> {
    let host = host::object(ctx)?;
    let parts = Object::new(ctx.clone())?;
    for (name, source) in PARTS {
        let make: Function = eval(ctx, source, name)?;
        let given: Value = make.call((host.clone(), parts.clone()))?;
        parts.set(name, given)?;
    }
    let hooks = Object::new(ctx.clone())?;
    for (part, name) in HOOKS {
        let part: Object = parts.get(part)?;
        hooks.set(name, part.get::<_, Function>(name)?)?;
    }
    Ok(Hooks(Persistent::save(ctx, hooks)))
}

/// Evaluates one prelude file.
fn eval<'js>(ctx: &Ctx<'js>, source: &str, name: &str) -> Result<Function<'js>> {
    let mut options = EvalOptions::default();
    options.global = true;
    options.strict = true;
    options.promise = false;
    options.filename = Some(format!("{FILENAME_PREFIX}{name}>"));
    ctx.eval_with_options(source, options)
}

impl Hooks {
    /// The hook `name`.
    fn get<'js>(&self, ctx: &Ctx<'js>, name: &str) -> Result<Function<'js>> {
        self.0.clone().restore(ctx)?.get(name)
    }

    /// `value` as Node's REPL shows it.
    pub fn inspect<'js>(&self, ctx: &Ctx<'js>, value: Value<'js>) -> Result<String> {
        self.get(ctx, "inspect")?.call((value,))
    }

    /// The completion value the evaluation's result object holds as its
    /// own data property (never through a cell's accessor).
    pub fn completion_value<'js>(&self, ctx: &Ctx<'js>, completion: Value<'js>) -> Result<Value<'js>> {
        self.get(ctx, "completionValue")?.call((completion,))
    }

    /// `value` as JSON, when it is an object or array JSON describes.
    pub fn to_json<'js>(&self, ctx: &Ctx<'js>, value: Value<'js>) -> Result<Option<String>> {
        self.get(ctx, "toJson")?.call((value,))
    }

    /// A thrown value's type name, message and traceback.
    pub fn describe_error<'js>(
        &self,
        ctx: &Ctx<'js>,
        thrown: Value<'js>,
    ) -> Result<(String, String, String)> {
        let described: Vec<String> = self.get(ctx, "describeError")?.call((thrown,))?;
        let mut parts = described.into_iter();
        let mut next = || parts.next().unwrap_or_default();
        Ok((next(), next(), next()))
    }

    /// The exit code a thrown value asks for, when it is `process.exit()`'s.
    pub fn exit_code<'js>(&self, ctx: &Ctx<'js>, thrown: Value<'js>) -> Result<Option<i32>> {
        self.get(ctx, "exitCode")?.call((thrown,))
    }

    /// Runs timer `id`'s callback; what it throws is the caller's to catch.
    pub fn run_timer(&self, ctx: &Ctx<'_>, id: u32) -> Result<()> {
        self.get(ctx, "runTimer")?.call((id,))
    }

    /// Forgets every timer's callback.
    pub fn clear_timers(&self, ctx: &Ctx<'_>) -> Result<()> {
        self.get(ctx, "clearTimers")?.call(())
    }

    /// Makes `env` the whole of `process.env`.
    pub fn set_env(&self, ctx: &Ctx<'_>, env: &[(String, String)]) -> Result<()> {
        let object = Object::new(ctx.clone())?;
        for (key, value) in env {
            object.set(key.as_str(), value.as_str())?;
        }
        self.get(ctx, "setEnv")?.call((object,))
    }
}
