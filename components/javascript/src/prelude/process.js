// `process`: `env` (the run's environment, replaced every cell), `cwd`,
// `chdir`, `exit`, `nextTick`, `hrtime`, `stdout`/`stderr` and Node's
// descriptive fields.
//
// Evaluated once, before any cell, as a function of `host` (this crate's
// functions) and `parts` (what the prelude's earlier files gave).
(function (host, parts) {
  'use strict';

  const ReflectApply = Reflect.apply;
  const ArrayIsArray = Array.isArray;
  const queueMicrotask = globalThis.queueMicrotask;
  const fsOps = host.fs;
  const ObjectDefineProperty = Object.defineProperty;
  const ObjectFreeze = Object.freeze;
  const DateCtor = Date;
  const now = typeof performance === 'object' && typeof performance.now === 'function'
    ? performance.now.bind(performance)
    : DateCtor.now;
  const { invalidArgType } = parts.inspect;
  const define = (target, name, value) =>
    ObjectDefineProperty(target, name, { value, writable: true, configurable: true, enumerable: false });

  // What `process.exit()` throws: the host ends the cell with its code.
  class ProcessExit {
    constructor(code) {
      this.code = code;
    }
  }

  const process = {
    env: {},
    argv: ['node'],
    argv0: 'node',
    execArgv: [],
    platform: 'wasi',
    arch: 'wasm32',
    version: 'v0.0.0',
    versions: {},
    pid: 1,
    exitCode: undefined,
    cwd: () => fsOps.cwd(),
    chdir: (directory) => {
      if (typeof directory !== 'string') throw invalidArgType('directory', 'of type string', directory);
      fsOps.chdir(directory);
    },
    exit: (code) => {
      throw new ProcessExit(code === undefined ? process.exitCode : code);
    },
    nextTick: (callback, ...args) => {
      if (typeof callback !== 'function') throw invalidArgType('callback', 'of type function', callback);
      queueMicrotask(() => ReflectApply(callback, undefined, args));
    },
    hrtime: Object.assign((previous) => {
      const ns = BigInt(Math.round(now() * 1e6));
      let seconds = Number(ns / 1000000000n);
      let nanos = Number(ns % 1000000000n);
      if (ArrayIsArray(previous)) {
        seconds -= previous[0];
        nanos -= previous[1];
        if (nanos < 0) {
          seconds -= 1;
          nanos += 1e9;
        }
      }
      return [seconds, nanos];
    }, { bigint: () => BigInt(Math.round(now() * 1e6)) }),
    uptime: () => now() / 1000,
    memoryUsage: () => ({ rss: 0, heapTotal: 0, heapUsed: 0, external: 0, arrayBuffers: 0 }),
    stdout: { write: (text) => { host.write(1, `${text}`); return true; }, isTTY: false },
    stderr: { write: (text) => { host.write(2, `${text}`); return true; }, isTTY: false },
  };
  ObjectFreeze(process.versions);
  define(globalThis, 'process', process);

  // The exit code `err` asks for when it is `process.exit()`'s; undefined
  // for any other thrown value.
  function exitCode(err) {
    if (!(err instanceof ProcessExit)) return undefined;
    const code = +err.code;
    // `exit()` and `exit(undefined)` (no `exitCode` set) are a success.
    return code === code ? code | 0 : 0;
  }

  // Makes `env` the whole of `process.env` (the host does, every cell).
  function setEnv(env) {
    process.env = env;
  }

  return { process, setEnv, exitCode };
})
