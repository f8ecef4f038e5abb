//! One cell: its code evaluated as a REPL line, its jobs and timers run,
//! its value, output and error reported.
//!
//! Every cell is evaluated as a global script with top-level `await`, so
//! its top-level declarations stay for later cells and its value is the
//! script's completion value. The evaluation gives a promise, settled once
//! the cell's jobs (and, while it waits on them, its timers) have run.

use std::cell::Cell as StdCell;

use rquickjs::context::EvalOptions;
use rquickjs::promise::PromiseState;
use rquickjs::{Ctx, Persistent, Promise, Value};

use crate::anypath::runner::types::{
    CapturedOutput, CellInput, CellOutput, CellResult, ExceptionInfo,
};
use crate::engine::{self, Engine};
use crate::prelude::FILENAME_PREFIX;
use crate::results::Results;
use crate::{instance, interrupt, output, rejections, timers};

/// Set by the host, with no code, as the first call of an instance a saved
/// state is about to be restored into: only the first-call work is done,
/// since the state replaces the rest of memory.
const PROLOGUE_MARK: &str = "ANYPATH_STATE_PROLOGUE";
/// Set by the host, with no code, just before it saves the session's state.
/// Nothing a cell opens stays open between cells, so there is nothing to
/// close.
const PARK_MARK: &str = "ANYPATH_STATE_PARK";
/// Set by the host, with no code, in the instance whose state becomes the
/// runtime's template (new sessions map it instead of starting QuickJS and
/// its globals themselves): the engine is made, and no cell is counted.
const WARM_MARK: &str = "ANYPATH_STATE_WARM";

thread_local! {
    /// The cells run so far in this instance (naming each `<cell-N>`).
    static CELLS_RUN: StdCell<u32> = const { StdCell::new(0) };
}

/// Runs one cell (or answers one of the host's marks).
pub fn run(input: CellInput) -> CellOutput {
    instance::start();
    if input
        .env
        .iter()
        .any(|(key, _)| key == PROLOGUE_MARK || key == PARK_MARK)
    {
        return outcome(output::empty(), Vec::new(), None, 0);
    }
    if input.env.iter().any(|(key, _)| key == WARM_MARK) {
        let error = engine::with(|_| ()).err().map(|why| ExceptionInfo {
            type_name: "InternalError".to_owned(),
            message: why.clone(),
            traceback: format!("InternalError: {why}"),
        });
        let code = i32::from(error.is_some());
        return outcome(output::empty(), Vec::new(), error, code);
    }
    match engine::with(|engine| Run::new(engine, &input).execute(&input)) {
        Ok(output) => output,
        Err(why) => {
            let info = ExceptionInfo {
                type_name: "InternalError".to_owned(),
                message: why.clone(),
                traceback: why,
            };
            outcome(output::empty(), Vec::new(), Some(info), 1)
        }
    }
}

/// The reply `run-cell` gives.
fn outcome(
    output: CapturedOutput,
    results: Vec<CellResult>,
    error: Option<ExceptionInfo>,
    exit_code: i32,
) -> CellOutput {
    CellOutput {
        output,
        results,
        error,
        exit_code,
    }
}

/// How a cell ended, when not with a success.
enum Ending {
    /// It (or a job or timer of it) threw.
    Failed(ExceptionInfo),
    /// It called `process.exit(code)`.
    Exited(i32),
}

/// A cell while it runs.
struct Run<'e> {
    engine: &'e Engine,
    results: Results,
    /// The first failure or exit; later ones are not reported.
    ending: Option<Ending>,
}

impl<'e> Run<'e> {
    /// A cell about to run in `engine`.
    fn new(engine: &'e Engine, input: &CellInput) -> Self {
        Self {
            engine,
            results: Results::new(input.result_bytes, input.stdout_bytes, input.live),
            ending: None,
        }
    }

    /// Runs the cell to its end: its code, its jobs and timers; reports
    /// its output, value and error.
    fn execute(mut self, input: &CellInput) -> CellOutput {
        let number = CELLS_RUN.with(|count| {
            count.set(count.get().saturating_add(1));
            count.get()
        });
        output::begin(input.stdout_bytes, input.stderr_bytes, input.live);
        interrupt::reset();
        let promise = self.evaluate(input, number);
        if let Some(promise) = &promise {
            self.settle(promise);
            self.report(promise);
        }
        self.run_timers();
        self.engine.context.with(|ctx| {
            let own = promise
                .and_then(|promise| promise.restore(&ctx).ok())
                .map(Promise::into_value);
            if let Some(reason) = rejections::take_first(&ctx, own.as_ref()) {
                self.fail(&ctx, reason);
            }
        });
        if interrupt::was_taken() {
            // Whatever the interrupted code left (QuickJS's own uncatchable
            // error, a wait cut short) says less than this.
            let message = "the cell was interrupted";
            self.ending = Some(Ending::Failed(ExceptionInfo {
                type_name: "Interrupted".to_owned(),
                message: message.to_owned(),
                traceback: format!("Interrupted: {message}"),
            }));
        }
        let (error, exit_code) = match self.ending {
            None => (None, 0),
            Some(Ending::Failed(info)) => (Some(info), 1),
            Some(Ending::Exited(0)) => (None, 0),
            Some(Ending::Exited(code)) => (
                Some(ExceptionInfo {
                    type_name: "ProcessExit".to_owned(),
                    message: code.to_string(),
                    traceback: String::new(),
                }),
                code,
            ),
        };
        outcome(
            output::finish(),
            self.results.into_entries(),
            error,
            exit_code,
        )
    }

    /// Sets `process.env` and evaluates the code; gives the promise of its
    /// completion, or none when it did not even start (a syntax error).
    fn evaluate(&mut self, input: &CellInput, number: u32) -> Option<Persistent<Promise<'static>>> {
        self.engine.context.with(|ctx| {
            if let Err(error) = self.engine.hooks.set_env(&ctx, &input.env) {
                let value = thrown(&ctx, error);
                self.fail(&ctx, value);
                return None;
            }
            let mut options = EvalOptions::default();
            options.global = true;
            options.promise = true;
            options.strict = false;
            options.backtrace_barrier = true;
            options.filename = Some(format!("<cell-{number}>"));
            match ctx.eval_with_options::<Promise, _>(input.code.as_str(), options) {
                Ok(promise) => Some(Persistent::save(&ctx, promise)),
                Err(error) => {
                    let value = thrown(&ctx, error);
                    self.fail(&ctx, value);
                    None
                }
            }
        })
    }

    /// Runs the cell's jobs, and its timers while it waits, until its
    /// promise settles, or nothing is left that could settle it.
    fn settle(&mut self, promise: &Persistent<Promise<'static>>) {
        loop {
            self.run_jobs();
            if self.ended_by_exit() || self.state(promise) != Some(PromiseState::Pending) {
                return;
            }
            match timers::next_due() {
                Some(id) => self.run_timer(id),
                None => return,
            }
        }
    }

    /// The promise's state; none if it cannot be read.
    fn state(&self, promise: &Persistent<Promise<'static>>) -> Option<PromiseState> {
        self.engine.context.with(|ctx| {
            promise
                .clone()
                .restore(&ctx)
                .ok()
                .map(|promise| promise.state())
        })
    }

    /// Reports how the cell's promise settled: its value as a result, or
    /// its rejection as the cell's error.
    fn report(&mut self, promise: &Persistent<Promise<'static>>) {
        self.engine.context.with(|ctx| {
            let Ok(promise) = promise.clone().restore(&ctx) else { return };
            match promise.state() {
                PromiseState::Resolved => {
                    // The evaluation's promise resolves to `{ value }`, the
                    // script's completion value.
                    let value = promise
                        .result::<Value>()
                        .and_then(Result::ok)
                        .and_then(|completion| self.engine.hooks.completion_value(&ctx, completion).ok());
                    if let Some(value) = value.filter(|value| !value.is_undefined()) {
                        self.show(&ctx, value);
                    }
                }
                PromiseState::Rejected => {
                    if let Some(Err(error)) = promise.result::<Value>() {
                        let value = thrown(&ctx, error);
                        self.fail(&ctx, value);
                    }
                }
                PromiseState::Pending => {
                    if self.ending.is_none() {
                        let message = "the cell's top-level await never settled: it waits on a promise nothing resolves";
                        self.ending = Some(Ending::Failed(ExceptionInfo {
                            type_name: "Error".to_owned(),
                            message: message.to_owned(),
                            traceback: format!("Error: {message}"),
                        }));
                    }
                }
            }
        });
    }

    /// Adds the cell's value as a result.
    fn show<'js>(&mut self, ctx: &Ctx<'js>, value: Value<'js>) {
        let hooks = &self.engine.hooks;
        let (text, error) = match hooks.inspect(ctx, value.clone()) {
            Ok(text) => (text, None),
            Err(error) => {
                let why = describe_quietly(self.engine, ctx, thrown(ctx, error));
                (
                    "[a value that could not be shown]".to_owned(),
                    Some(format!("inspecting the value raised {why}")),
                )
            }
        };
        let json = match hooks.to_json(ctx, value) {
            Ok(json) => json,
            Err(error) => {
                // Only a cell's proxy or getter gets here; the text stands.
                let _ = thrown(ctx, error);
                None
            }
        };
        let forms = json
            .map(|json| vec![("application/json".to_owned(), json)])
            .unwrap_or_default();
        self.results.value(&text, forms, error);
    }

    /// Runs the timers still waiting once the cell settled, in due order,
    /// as Node runs a script's before it exits.
    fn run_timers(&mut self) {
        loop {
            self.run_jobs();
            if self.ended_by_exit() {
                break;
            }
            match timers::next_due() {
                Some(id) => self.run_timer(id),
                None => break,
            }
        }
        // None outlives the cell: an exit or a throwing timer leaves some.
        timers::clear();
        self.engine.context.with(|ctx| {
            if let Err(error) = self.engine.hooks.clear_timers(&ctx) {
                let _ = thrown(&ctx, error);
            }
        });
        self.run_jobs();
    }

    /// Runs timer `id`. One that throws ends the cell's timers, as an
    /// uncaught exception ends a Node process.
    fn run_timer(&mut self, id: u32) {
        self.engine.context.with(|ctx| {
            if let Err(error) = self.engine.hooks.run_timer(&ctx, id) {
                let value = thrown(&ctx, error);
                self.fail(&ctx, value);
                timers::clear();
                if let Err(error) = self.engine.hooks.clear_timers(&ctx) {
                    let _ = thrown(&ctx, error);
                }
            }
        });
    }

    /// Runs every pending job (promise reactions, microtasks), and those
    /// they queue, to the end.
    fn run_jobs(&mut self) {
        // Outside `Context::with`: the runtime's own call takes its lock,
        // and says when a job threw. The host's fuel bounds a job queue
        // that never empties.
        loop {
            match self.engine.runtime.execute_pending_job() {
                Ok(true) => {}
                Ok(false) => break,
                Err(_) => self.engine.context.with(|ctx| {
                    let value = ctx.catch();
                    self.fail(&ctx, value);
                }),
            }
        }
    }

    /// Whether the cell called `process.exit()`, after which nothing of it runs.
    fn ended_by_exit(&self) -> bool {
        matches!(self.ending, Some(Ending::Exited(_)))
    }

    /// Records what the cell threw, unless it already failed or exited.
    fn fail<'js>(&mut self, ctx: &Ctx<'js>, thrown: Value<'js>) {
        if self.ending.is_some() {
            return;
        }
        let hooks = &self.engine.hooks;
        if let Ok(Some(code)) = hooks.exit_code(ctx, thrown.clone()) {
            self.ending = Some(Ending::Exited(code));
            return;
        }
        self.ending = Some(Ending::Failed(describe(self.engine, ctx, thrown)));
    }
}

/// The value an error from calling into JavaScript carries: the thrown
/// value, or (for an error of this crate's side) an `Error` saying what.
fn thrown<'js>(ctx: &Ctx<'js>, error: rquickjs::Error) -> Value<'js> {
    if error.is_exception() {
        return ctx.catch();
    }
    let message = error.to_string();
    match rquickjs::Exception::from_message(ctx.clone(), &message) {
        Ok(exception) => exception.into_value(),
        Err(_) => Value::new_undefined(ctx.clone()),
    }
}

/// The report of a thrown value: its type name, message and traceback,
/// without the prelude's own frames.
fn describe<'js>(engine: &Engine, ctx: &Ctx<'js>, value: Value<'js>) -> ExceptionInfo {
    match engine.hooks.describe_error(ctx, value) {
        Ok((type_name, message, traceback)) => {
            let traceback: Vec<&str> = traceback
                .lines()
                .filter(|line| !line.contains(FILENAME_PREFIX))
                .collect();
            ExceptionInfo {
                type_name,
                message,
                traceback: traceback.join("\n"),
            }
        }
        Err(error) => {
            // Describing failed (a thrown proxy, say): what is known of it.
            let _ = thrown(ctx, error);
            let message = "the cell threw a value that could not be described".to_owned();
            ExceptionInfo {
                type_name: "Error".to_owned(),
                traceback: format!("Error: {message}"),
                message,
            }
        }
    }
}

/// `name: message` of a thrown value, for a result's error.
fn describe_quietly<'js>(engine: &Engine, ctx: &Ctx<'js>, value: Value<'js>) -> String {
    let info = describe(engine, ctx, value);
    if info.message.is_empty() {
        info.type_name
    } else {
        format!("{}: {}", info.type_name, info.message)
    }
}
