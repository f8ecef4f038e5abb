// `setTimeout`, `setInterval`, `setImmediate` and their `clear...`: the
// callbacks wait here under their ids, the host orders the ids by due time
// and calls `runTimer` when one is due (the cell runs them all before it
// ends).
//
// Evaluated once, before any cell, as a function of `host` (this crate's
// functions) and `parts` (what the prelude's earlier files gave).
(function (host, parts) {
  'use strict';

  const uncurry = Function.prototype.bind.bind(Function.prototype.call);
  const MapCtor = Map;
  const MapGet = uncurry(Map.prototype.get);
  const MapSet = uncurry(Map.prototype.set);
  const MapDelete = uncurry(Map.prototype.delete);
  const MapClear = uncurry(Map.prototype.clear);
  const MapKeys = uncurry(Map.prototype.keys);
  const ObjectDefineProperty = Object.defineProperty;
  const ObjectKeys = Object.keys;
  const { invalidArgType } = parts.inspect;
  const define = (target, name, value) =>
    ObjectDefineProperty(target, name, { value, writable: true, configurable: true, enumerable: false });

  // Each waiting timer: its callback, arguments, delay and whether it repeats.
  const pending = new MapCtor();
  let lastTimerId = 0;

  function schedule(callback, delay, args, repeat) {
    if (typeof callback !== 'function') throw invalidArgType('callback', 'of type function', callback);
    delay = +delay;
    if (!(delay >= 1 && delay <= 2147483647)) delay = 1;
    const id = ++lastTimerId;
    MapSet(pending, id, { callback, args, delay, repeat });
    host.schedule(id, delay);
    return id;
  }

  function clear(id) {
    if (typeof id === 'number' && MapDelete(pending, id)) host.cancel(id);
  }

  const timers = {
    setTimeout: function setTimeout(callback, delay, ...args) {
      return schedule(callback, delay, args, false);
    },
    setInterval: function setInterval(callback, delay, ...args) {
      return schedule(callback, delay, args, true);
    },
    setImmediate: function setImmediate(callback, ...args) {
      return schedule(callback, 0, args, false);
    },
    clearTimeout: function clearTimeout(id) { clear(id); },
    clearInterval: function clearInterval(id) { clear(id); },
    clearImmediate: function clearImmediate(id) { clear(id); },
  };
  const names = ObjectKeys(timers);
  for (let i = 0; i < names.length; i++) define(globalThis, names[i], timers[names[i]]);

  // Runs timer `id`'s callback (the host calls it when the timer is due);
  // an interval is scheduled again first, so it can clear itself.

  function runTimer(id) {
    const timer = MapGet(pending, id);
    if (timer === undefined) return;
    if (timer.repeat) host.schedule(id, timer.delay);
    else MapDelete(pending, id);
    // Called directly, so a traceback starts at the callback.
    const { callback, args } = timer;
    if (args.length === 0) callback();
    else callback(...args);
  }

  // Forgets every timer (the host does when a cell ends early).
  function clearTimers() {
    const ids = MapKeys(pending);
    for (let step = ids.next(); !step.done; step = ids.next()) host.cancel(step.value);
    MapClear(pending);
  }

  return { runTimer, clearTimers, timers };
})
