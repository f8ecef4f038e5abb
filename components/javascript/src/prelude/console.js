// `console` (and `print`, its `log`): Node's methods, each argument shown
// as `util.format` shows it, stdout for `log`, `info`, `debug`, `dir`,
// `table`, stderr for `error`, `warn`, `trace`, `assert`.
//
// Evaluated once, before any cell, as a function of `host` (this crate's
// functions) and `parts` (what the prelude's earlier files gave).
(function (host, parts) {
  'use strict';

  const uncurry = Function.prototype.bind.bind(Function.prototype.call);
  const ArrayJoin = uncurry(Array.prototype.join);
  const ArraySlice = uncurry(Array.prototype.slice);
  const StringCtor = String;
  const StringSlice = uncurry(String.prototype.slice);
  const StringSplit = uncurry(String.prototype.split);
  const RegExpReplace = uncurry(RegExp.prototype[Symbol.replace]);
  const MapCtor = Map;
  const MapGet = uncurry(Map.prototype.get);
  const MapSet = uncurry(Map.prototype.set);
  const MapHas = uncurry(Map.prototype.has);
  const MapDelete = uncurry(Map.prototype.delete);
  const ErrorCtor = Error;
  const ObjectDefineProperty = Object.defineProperty;
  const DateCtor = Date;
  const now = typeof performance === 'object' && typeof performance.now === 'function'
    ? performance.now.bind(performance)
    : DateCtor.now;
  const { inspect, format } = parts.inspect;
  const define = (target, name, value) =>
    ObjectDefineProperty(target, name, { value, writable: true, configurable: true, enumerable: false });

  let groupIndent = '';

  function write(stream, text) {
    if (groupIndent !== '') text = groupIndent + RegExpReplace(/\n(?=.)/g, text, `\n${groupIndent}`);
    host.write(stream, text);
  }

  const toStdout = (...args) => write(1, `${format(args)}\n`);
  const toStderr = (...args) => write(2, `${format(args)}\n`);
  const counts = new MapCtor();
  const timers = new MapCtor();

  const console = {
    log: toStdout,
    info: toStdout,
    debug: toStdout,
    error: toStderr,
    warn: toStderr,
    dir: (value, options) => write(1, `${inspect(value, options)}\n`),
    dirxml: toStdout,
    table: toStdout,
    trace: (...args) => {
      const stack = StringCtor(new ErrorCtor().stack || '');
      // The first frame is this function's.
      const frames = ArrayJoin(ArraySlice(StringSplit(stack, '\n'), 1), '\n');
      write(2, `Trace${args.length ? `: ${format(args)}` : ''}\n${frames}${frames.endsWith('\n') ? '' : '\n'}`);
    },
    assert: (condition, ...args) => {
      if (!condition) write(2, `Assertion failed${args.length ? `: ${format(args)}` : ''}\n`);
    },
    group: (...args) => {
      if (args.length) toStdout(...args);
      groupIndent += '  ';
    },
    groupEnd: () => {
      groupIndent = StringSlice(groupIndent, 0, -2);
    },
    count: (label = 'default') => {
      label = `${label}`;
      const count = (MapGet(counts, label) || 0) + 1;
      MapSet(counts, label, count);
      write(1, `${label}: ${count}\n`);
    },
    countReset: (label = 'default') => {
      MapDelete(counts, `${label}`);
    },
    time: (label = 'default') => {
      MapSet(timers, `${label}`, now());
    },
    timeLog: (label = 'default', ...args) => {
      label = `${label}`;
      if (!MapHas(timers, label)) {
        write(2, `Warning: No such label '${label}' for console.timeLog()\n`);
        return;
      }
      const extra = args.length ? ` ${format(args)}` : '';
      write(1, `${label}: ${(now() - MapGet(timers, label)).toFixed(3)}ms${extra}\n`);
    },
    timeEnd: (label = 'default') => {
      label = `${label}`;
      if (!MapHas(timers, label)) {
        write(2, `Warning: No such label '${label}' for console.timeEnd()\n`);
        return;
      }
      write(1, `${label}: ${(now() - MapGet(timers, label)).toFixed(3)}ms\n`);
      MapDelete(timers, label);
    },
  };
  console.groupCollapsed = console.group;
  define(globalThis, 'console', console);
  define(globalThis, 'print', console.log);

  return {};
})
