// `require(name)`: the built-in modules a cell may ask for (`fs`,
// `fs/promises`, `path`, `util`, `buffer`, `process`, `timers`, each also
// as `node:...`); anything else is not found, as in Node.
//
// Evaluated once, before any cell, as a function of `host` (this crate's
// functions) and `parts` (what the prelude's earlier files gave).
(function (host, parts) {
  'use strict';

  const uncurry = Function.prototype.bind.bind(Function.prototype.call);
  const ReflectApply = Reflect.apply;
  const StringSlice = uncurry(String.prototype.slice);
  const MapCtor = Map;
  const MapGet = uncurry(Map.prototype.get);
  const MapHas = uncurry(Map.prototype.has);
  const ErrorCtor = Error;
  const ObjectDefineProperty = Object.defineProperty;
  const { inspect, format, invalidArgType } = parts.inspect;
  const { fs, promises } = parts.fs;
  const { path } = parts.path;
  const { process } = parts.process;
  const { Buffer, TextEncoder, TextDecoder } = parts.bytes;
  const { timers } = parts.timers;
  const define = (target, name, value) =>
    ObjectDefineProperty(target, name, { value, writable: true, configurable: true, enumerable: false });

  // Node's `util`, as far as a cell commonly uses it.
  const util = {
    inspect,
    format: (...args) => format(args),
    promisify: (original) => (...args) => new Promise((resolve, reject) => {
      ReflectApply(original, undefined, [...args, (err, value) => (err ? reject(err) : resolve(value))]);
    }),
    isDeepStrictEqual: (a, b) => inspect(a, { depth: Infinity }) === inspect(b, { depth: Infinity }),
    types: {},
    TextEncoder,
    TextDecoder,
  };

  // By name, without the `node:` scheme.
  const modules = new MapCtor([
    ['fs', fs],
    ['fs/promises', promises],
    ['path', path],
    ['path/posix', path],
    ['util', util],
    ['buffer', { Buffer }],
    ['process', process],
    ['timers', timers],
  ]);

  define(globalThis, 'require', function require(name) {
    if (typeof name !== 'string') throw invalidArgType('id', 'of type string', name);
    const key = name.startsWith('node:') ? StringSlice(name, 5) : name;
    if (MapHas(modules, key)) return MapGet(modules, key);
    const err = new ErrorCtor(`Cannot find module '${name}'`);
    err.code = 'MODULE_NOT_FOUND';
    throw err;
  });

  return {};
})
