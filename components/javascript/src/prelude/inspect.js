// How values are shown: Node's `util.inspect` (as its REPL shows a value)
// and `util.format` (as `console.log` prints its arguments), with Node's
// defaults: depth 2, 100 array items, 10000 string characters, lines broken
// at 80 columns, at most 3 inner levels on one line.
//
// Evaluated once, before any cell, as a function of `host` (this crate's
// functions). It takes every intrinsic it uses now, so a cell that replaces
// `Object.prototype.toString`, `Array.prototype.join` or `JSON.stringify`
// changes what its own code does, not how values are shown.
(function (host) {
  'use strict';

  // `uncurry(f)(self, ...args)` calls `f` on `self`, whatever the cell
  // later does to `Function.prototype.call` or to `f`'s prototype.
  const uncurry = Function.prototype.bind.bind(Function.prototype.call);
  const getter = (proto, name) => uncurry(Object.getOwnPropertyDescriptor(proto, name).get);

  const ObjectKeys = Object.keys;
  const ObjectGetOwnPropertySymbols = Object.getOwnPropertySymbols;
  const ObjectGetOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  const ObjectGetPrototypeOf = Object.getPrototypeOf;
  const ObjectIs = Object.is;
  const ReflectApply = Reflect.apply;
  const ObjectToString = uncurry(Object.prototype.toString);
  const HasOwn = uncurry(Object.prototype.hasOwnProperty);
  const PropertyIsEnumerable = uncurry(Object.prototype.propertyIsEnumerable);
  const ArrayIsArray = Array.isArray;
  const ArrayPush = uncurry(Array.prototype.push);
  const ArrayPop = uncurry(Array.prototype.pop);
  const ArrayJoin = uncurry(Array.prototype.join);
  const ArrayIncludes = uncurry(Array.prototype.includes);
  const ArrayMap = uncurry(Array.prototype.map);
  const ArrayFilter = uncurry(Array.prototype.filter);
  const FunctionToString = uncurry(Function.prototype.toString);
  const FunctionHasInstance = uncurry(Function.prototype[Symbol.hasInstance]);
  const StringCtor = String;
  const StringSlice = uncurry(String.prototype.slice);
  const StringIncludes = uncurry(String.prototype.includes);
  const StringStartsWith = uncurry(String.prototype.startsWith);
  const StringEndsWith = uncurry(String.prototype.endsWith);
  const StringRepeat = uncurry(String.prototype.repeat);
  const StringPadStart = uncurry(String.prototype.padStart);
  const StringPadEnd = uncurry(String.prototype.padEnd);
  const StringCharCodeAt = uncurry(String.prototype.charCodeAt);
  const StringToUpperCase = uncurry(String.prototype.toUpperCase);
  const StringValueOf = uncurry(String.prototype.valueOf);
  const NumberValueOf = uncurry(Number.prototype.valueOf);
  const NumberToString = uncurry(Number.prototype.toString);
  const BooleanValueOf = uncurry(Boolean.prototype.valueOf);
  const BigIntValueOf = uncurry(BigInt.prototype.valueOf);
  const SymbolValueOf = uncurry(Symbol.prototype.valueOf);
  const SymbolToString = uncurry(Symbol.prototype.toString);
  const RegExpTest = uncurry(RegExp.prototype.test);
  const RegExpToString = uncurry(RegExp.prototype.toString);
  const RegExpSource = getter(RegExp.prototype, 'source');
  const RegExpSplit = uncurry(RegExp.prototype[Symbol.split]);
  const RegExpReplace = uncurry(RegExp.prototype[Symbol.replace]);
  const DateGetTime = uncurry(Date.prototype.getTime);
  const DateToISOString = uncurry(Date.prototype.toISOString);
  const MapCtor = Map;
  const MapGet = uncurry(Map.prototype.get);
  const MapSet = uncurry(Map.prototype.set);
  const MapForEach = uncurry(Map.prototype.forEach);
  const MapSize = getter(Map.prototype, 'size');
  const SetForEach = uncurry(Set.prototype.forEach);
  const SetSize = getter(Set.prototype, 'size');
  const WeakMapHas = uncurry(WeakMap.prototype.has);
  const WeakSetHas = uncurry(WeakSet.prototype.has);
  const TypedArrayPrototype = ObjectGetPrototypeOf(Uint8Array.prototype);
  const TypedArrayTag = getter(TypedArrayPrototype, Symbol.toStringTag);
  const TypedArrayLength = getter(TypedArrayPrototype, 'length');
  const ArrayBufferByteLength = getter(ArrayBuffer.prototype, 'byteLength');
  const Uint8ArrayCtor = Uint8Array;
  const ArrayBufferIsView = ArrayBuffer.isView;
  const JSONStringify = JSON.stringify;
  const MathMin = Math.min;
  const MathMax = Math.max;
  const MathSqrt = Math.sqrt;
  const MathRound = Math.round;
  const MathFloor = Math.floor;
  const NumberParseInt = Number.parseInt;
  const NumberParseFloat = Number.parseFloat;
  const NumberCtor = Number;
  const SymbolToStringTag = Symbol.toStringTag;
  // Node's `util.inspect.custom`: an object's own way to be shown.
  const customInspectSymbol = Symbol.for('nodejs.util.inspect.custom');
  const ErrorCtor = Error;
  const TypeErrorCtor = TypeError;
  const promiseState = host.promiseState;

  const defaults = {
    depth: 2,
    maxArrayLength: 100,
    maxStringLength: 10000,
    breakLength: 80,
    compact: 3,
  };
  const kObjectType = 0;
  const kArrayExtrasType = 2;

  // What `brand(value)` tells apart, without trusting `Symbol.toStringTag`.
  const attempt = (check, value) => {
    try {
      check(value);
      return true;
    } catch {
      return false;
    }
  };
  const isMap = (value) => attempt(MapSize, value);
  const isSet = (value) => attempt(SetSize, value);
  const isDate = (value) => attempt(DateGetTime, value);
  const isRegExp = (value) => value !== RegExp.prototype && attempt(RegExpSource, value);
  const isWeakMap = (value) => attempt((v) => WeakMapHas(v, {}), value);
  const isWeakSet = (value) => attempt((v) => WeakSetHas(v, {}), value);
  const isArrayBuffer = (value) => attempt(ArrayBufferByteLength, value);
  const isError = (value) => ObjectToString(value) === '[object Error]' || FunctionHasInstance(ErrorCtor, value);
  const typedArrayName = (value) => TypedArrayTag(value);
  const boxedPrimitive = (value) => {
    const kinds = [['Number', NumberValueOf], ['String', StringValueOf], ['Boolean', BooleanValueOf],
      ['BigInt', BigIntValueOf], ['Symbol', SymbolValueOf]];
    for (let i = 0; i < kinds.length; i++) {
      try {
        return [kinds[i][0], kinds[i][1](value)];
      } catch {
        // Not this kind of box.
      }
    }
    return undefined;
  };

  // Characters a quoted string shows as escapes (as Node's `meta` table).
  const escapeOf = (code) => {
    switch (code) {
      case 8: return '\\b';
      case 9: return '\\t';
      case 10: return '\\n';
      case 12: return '\\f';
      case 13: return '\\r';
      case 92: return '\\\\';
      default: return `\\x${StringPadStart(StringToUpperCase(NumberToString(code, 16)), 2, '0')}`;
    }
  };
  const needsEscape = /[\x00-\x1f\x5c\x7f-\x9f\ud800-\udfff]/;

  // A string quoted as Node quotes it: single quotes, or double quotes when
  // it holds a single one, or backticks when it holds both.
  function strEscape(str) {
    let quote = "'";
    if (StringIncludes(str, "'")) {
      if (!StringIncludes(str, '"')) quote = '"';
      else if (!StringIncludes(str, '`') && !StringIncludes(str, '${')) quote = '`';
    }
    if (!RegExpTest(needsEscape, str) && (quote !== "'" || !StringIncludes(str, "'"))) {
      return quote + str + quote;
    }
    let result = '';
    let last = 0;
    for (let i = 0; i < str.length; i++) {
      const code = StringCharCodeAt(str, i);
      let escaped;
      if (code === 39 && quote === "'") {
        escaped = "\\'";
      } else if (code < 0x20 || code === 92 || (code >= 0x7f && code <= 0x9f)) {
        escaped = escapeOf(code);
      } else if (code >= 0xd800 && code <= 0xdfff) {
        const next = i + 1 < str.length ? StringCharCodeAt(str, i + 1) : 0;
        if (code <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
          i++;
          continue;
        }
        escaped = `\\u${StringToUpperCase(NumberToString(code, 16))}`;
      } else {
        continue;
      }
      result += StringSlice(str, last, i) + escaped;
      last = i + 1;
    }
    return quote + result + StringSlice(str, last) + quote;
  }

  const identifier = /^[a-zA-Z_][a-zA-Z_0-9]*$/;
  const afterNewline = /(?<=\n)/;

  function formatValue(ctx, value, recurseTimes) {
    if (typeof value !== 'object' && typeof value !== 'function') {
      return formatPrimitive(ctx, value);
    }
    if (value === null) return 'null';
    return formatRaw(ctx, value, recurseTimes);
  }

  function formatNumber(value) {
    return ObjectIs(value, -0) ? '-0' : `${value}`;
  }

  function formatPrimitive(ctx, value) {
    switch (typeof value) {
      case 'string': {
        let trailer = '';
        if (value.length > ctx.maxStringLength) {
          const remaining = value.length - ctx.maxStringLength;
          value = StringSlice(value, 0, ctx.maxStringLength);
          trailer = `... ${remaining} more character${remaining > 1 ? 's' : ''}`;
        }
        // A long string with line breaks shows one line per line.
        if (value.length > 16 && value.length > ctx.breakLength - ctx.indentationLvl - 4) {
          const lines = RegExpSplit(afterNewline, value);
          if (lines.length > 1) {
            return ArrayJoin(ArrayMap(lines, strEscape), ` +\n${StringRepeat(' ', ctx.indentationLvl + 2)}`) + trailer;
          }
        }
        return strEscape(value) + trailer;
      }
      case 'number': return formatNumber(value);
      case 'bigint': return `${value}n`;
      case 'boolean': return `${value}`;
      case 'undefined': return 'undefined';
      case 'symbol': return SymbolToString(value);
      default: return StringCtor(value);
    }
  }

  // The name of the nearest constructor on the prototype chain that the
  // value is an instance of; null for a null-prototype object.
  function getConstructorName(obj) {
    const original = obj;
    let first = true;
    while (obj !== null && obj !== undefined) {
      const descriptor = ObjectGetOwnPropertyDescriptor(obj, 'constructor');
      if (descriptor !== undefined && typeof descriptor.value === 'function') {
        const nameDescriptor = ObjectGetOwnPropertyDescriptor(descriptor.value, 'name');
        const name = nameDescriptor && nameDescriptor.value;
        if (typeof name === 'string' && name !== '' && FunctionHasInstance(descriptor.value, original)) {
          return name;
        }
      }
      obj = ObjectGetPrototypeOf(obj);
      if (first && obj === null) return null;
      first = false;
    }
    return 'Object';
  }

  function getPrefix(constructor, tag, fallback, size = '') {
    if (constructor === null) {
      if (tag !== '' && fallback !== tag) return `[${fallback}${size}: null prototype] [${tag}] `;
      return `[${fallback}${size}: null prototype] `;
    }
    if (tag !== '' && constructor !== tag) return `${constructor}${size} [${tag}] `;
    return `${constructor}${size} `;
  }

  // Own enumerable keys, symbols last; for arrays and the like, only the
  // keys that are not indices.
  function getKeys(value, nonIndex) {
    let keys = ObjectKeys(value);
    if (nonIndex) keys = ArrayFilter(keys, (key) => !RegExpTest(/^(0|[1-9][0-9]*)$/, key) || NumberCtor(key) >= 2 ** 32 - 1);
    const symbols = ObjectGetOwnPropertySymbols(value);
    for (let i = 0; i < symbols.length; i++) {
      if (PropertyIsEnumerable(value, symbols[i])) ArrayPush(keys, symbols[i]);
    }
    return keys;
  }

  function ownName(value) {
    const descriptor = ObjectGetOwnPropertyDescriptor(value, 'name');
    return descriptor && typeof descriptor.value === 'string' ? descriptor.value : '';
  }

  function getFunctionBase(value, constructor, tag) {
    const source = FunctionToString(value);
    if (StringStartsWith(source, 'class') && StringEndsWith(source, '}')) {
      const name = ownName(value) || '(anonymous)';
      let base = `class ${name}`;
      if (constructor !== 'Function' && constructor !== null) base += ` [${constructor}]`;
      if (tag !== '' && constructor !== tag) base += ` [${tag}]`;
      if (constructor !== null) {
        const parent = ObjectGetPrototypeOf(value);
        const superName = parent && ownName(parent);
        if (superName) base += ` extends ${superName}`;
      } else {
        base += ' extends [null prototype]';
      }
      return `[${base}]`;
    }
    let type = 'Function';
    if (constructor === 'AsyncFunction' || constructor === 'GeneratorFunction' || constructor === 'AsyncGeneratorFunction') {
      type = constructor;
    }
    let base = `[${type}`;
    if (constructor === null) base += ' (null prototype)';
    const name = ownName(value);
    base += name === '' ? ' (anonymous)' : `: ${name}`;
    base += ']';
    if (constructor !== type && constructor !== null) base += ` ${constructor}`;
    if (tag !== '' && constructor !== tag) base += ` [${tag}]`;
    return base;
  }

  // Reads a property a cell's getter or proxy may throw from.
  function safeGet(object, key) {
    try {
      return object[key];
    } catch {
      return undefined;
    }
  }

  // The frames of an error's stack, without a header: QuickJS's `stack`
  // holds the frames only, Node's starts with `Name: message`.
  function stackFrames(err, header) {
    let stack = safeGet(err, 'stack');
    if (typeof stack !== 'string') return '';
    if (StringStartsWith(stack, header)) stack = StringSlice(stack, header.length);
    while (StringEndsWith(stack, '\n')) stack = StringSlice(stack, 0, -1);
    while (StringStartsWith(stack, '\n')) stack = StringSlice(stack, 1);
    return stack;
  }

  // An error's type name: its `name`, or its class's when it left the
  // inherited `Error` (as `class MyError extends Error {}` does).
  function errorName(err) {
    const name = safeGet(err, 'name');
    let text = name === undefined || name === null ? 'Error' : toText(name);
    if (text === 'Error') {
      const constructor = getConstructorName(err);
      if (constructor !== null && constructor !== 'Error' && constructor !== 'Object') text = constructor;
    }
    return text;
  }

  function toText(value) {
    try {
      return typeof value === 'symbol' ? SymbolToString(value) : StringCtor(value);
    } catch {
      return formatValue(newContext(), value, 0);
    }
  }

  function errorHeader(err) {
    const name = errorName(err);
    const message = safeGet(err, 'message');
    const text = message === undefined ? '' : toText(message);
    return text === '' ? name : `${name}: ${text}`;
  }

  function formatError(ctx, err) {
    const header = errorHeader(err);
    const frames = stackFrames(err, header);
    let stack = frames === '' ? `[${header}]` : `${header}\n${frames}`;
    if (ctx.indentationLvl !== 0) {
      stack = RegExpReplace(/\n/g, stack, `\n${StringRepeat(' ', ctx.indentationLvl)}`);
    }
    return stack;
  }

  function formatRaw(ctx, value, recurseTimes) {
    if (ArrayIncludes(ctx.seen, value)) {
      let index = 1;
      if (ctx.circular === undefined) {
        ctx.circular = new MapCtor();
        MapSet(ctx.circular, value, index);
      } else {
        index = MapGet(ctx.circular, value);
        if (index === undefined) {
          index = MapSize(ctx.circular) + 1;
          MapSet(ctx.circular, value, index);
        }
      }
      return `[Circular *${index}]`;
    }

    const custom = safeGet(value, customInspectSymbol);
    if (typeof custom === 'function' && custom !== inspect) {
      const depth = ctx.depth - recurseTimes;
      const shown = ReflectApply(custom, value, [depth, { depth, breakLength: ctx.breakLength }, inspect]);
      if (shown !== value) {
        if (typeof shown === 'string') return RegExpReplace(/\n/g, shown, `\n${StringRepeat(' ', ctx.indentationLvl)}`);
        return formatValue(ctx, shown, recurseTimes);
      }
    }

    const constructor = getConstructorName(value);
    let tag = safeGet(value, SymbolToStringTag);
    if (typeof tag !== 'string' || (tag !== '' && PropertyIsEnumerable(value, SymbolToStringTag))) tag = '';
    let base = '';
    let formatter = formatObjectEntries;
    let braces;
    let keys;
    let extrasType = kObjectType;
    let typedName;

    if (ArrayIsArray(value)) {
      const prefix = (constructor !== 'Array' || tag !== '') ? getPrefix(constructor, tag, 'Array', `(${value.length})`) : '';
      keys = getKeys(value, true);
      braces = [`${prefix}[`, ']'];
      if (value.length === 0 && keys.length === 0) return `${braces[0]}]`;
      extrasType = kArrayExtrasType;
      formatter = formatArray;
    } else if (isSet(value)) {
      const size = SetSize(value);
      const prefix = getPrefix(constructor, tag, 'Set', `(${size})`);
      keys = getKeys(value, false);
      formatter = formatSet;
      if (size === 0 && keys.length === 0) return `${prefix}{}`;
      braces = [`${prefix}{`, '}'];
    } else if (isMap(value)) {
      const size = MapSize(value);
      const prefix = getPrefix(constructor, tag, 'Map', `(${size})`);
      keys = getKeys(value, false);
      formatter = formatMap;
      if (size === 0 && keys.length === 0) return `${prefix}{}`;
      braces = [`${prefix}{`, '}'];
    } else if ((typedName = typedArrayName(value)) !== undefined) {
      const length = TypedArrayLength(value);
      const prefix = getPrefix(constructor, tag === typedName ? '' : tag, typedName, `(${length})`);
      keys = getKeys(value, true);
      braces = [`${prefix}[`, ']'];
      if (length === 0 && keys.length === 0) return `${braces[0]}]`;
      formatter = formatTypedArray;
      extrasType = kArrayExtrasType;
    } else {
      keys = getKeys(value, false);
      braces = ['{', '}'];
      if (typeof value === 'function') {
        base = getFunctionBase(value, constructor, tag);
        if (keys.length === 0) return base;
      } else if (constructor === 'Object' && !isError(value) && boxedPrimitive(value) === undefined) {
        if (tag !== '') braces[0] = `${getPrefix(constructor, tag, 'Object')}{`;
        if (keys.length === 0) return `${braces[0]}}`;
      } else if (isRegExp(value)) {
        base = RegExpToString(value);
        const prefix = getPrefix(constructor, tag, 'RegExp');
        if (prefix !== 'RegExp ') base = `${prefix}${base}`;
        if (keys.length === 0 || recurseTimes > ctx.depth) return base;
      } else if (isDate(value)) {
        const time = DateGetTime(value);
        base = time !== time ? 'Invalid Date' : DateToISOString(value);
        const prefix = getPrefix(constructor, tag, 'Date');
        if (prefix !== 'Date ') base = `${prefix}${base}`;
        if (keys.length === 0) return base;
      } else if (isError(value)) {
        // The keys the header already shows.
        keys = ArrayFilter(keys, (key) => key !== 'name' && key !== 'message' && key !== 'stack');
        base = formatError(ctx, value);
        if (keys.length === 0) return base;
      } else if (isArrayBuffer(value)) {
        const prefix = getPrefix(constructor, tag, 'ArrayBuffer');
        formatter = formatArrayBuffer;
        braces[0] = `${prefix}{`;
      } else if (isWeakMap(value) || isWeakSet(value)) {
        braces[0] = `${getPrefix(constructor, tag, isWeakMap(value) ? 'WeakMap' : 'WeakSet')}{`;
        formatter = () => ['<items unknown>'];
      } else if (promiseState(value) !== undefined) {
        braces[0] = `${getPrefix(constructor, tag, 'Promise')}{`;
        formatter = formatPromise;
      } else {
        const boxed = boxedPrimitive(value);
        if (boxed !== undefined) {
          const type = boxed[0];
          const primitive = boxed[1];
          if (type === 'String') keys = ArrayFilter(keys, (key) => typeof key === 'symbol' || !RegExpTest(/^(0|[1-9][0-9]*)$/, key));
          base = `[${type}`;
          if (type !== constructor) base += constructor === null ? ' (null prototype)' : ` (${constructor})`;
          base += `: ${formatPrimitive(newContext(), primitive)}]`;
          if (tag !== '' && tag !== constructor) base += ` [${tag}]`;
          if (keys.length === 0) return base;
        } else {
          const prefix = getPrefix(constructor, tag, 'Object');
          if (keys.length === 0) return `${prefix}{}`;
          braces[0] = `${prefix}{`;
        }
      }
    }

    if (recurseTimes > ctx.depth) {
      let name = StringSlice(getPrefix(constructor, tag, 'Object'), 0, -1);
      if (constructor !== null) name = `[${name}]`;
      return name;
    }
    recurseTimes += 1;
    ArrayPush(ctx.seen, value);
    ctx.currentDepth = recurseTimes;
    const output = formatter(ctx, value, recurseTimes);
    for (let i = 0; i < keys.length; i++) {
      ArrayPush(output, formatProperty(ctx, value, recurseTimes, keys[i], extrasType));
    }
    if (ctx.circular !== undefined) {
      const index = MapGet(ctx.circular, value);
      if (index !== undefined) {
        const reference = `<ref *${index}>`;
        base = base === '' ? reference : `${reference} ${base}`;
      }
    }
    ArrayPop(ctx.seen);
    return reduceToSingleString(ctx, output, base, braces, extrasType, recurseTimes, value);
  }

  function formatObjectEntries() {
    return [];
  }

  function formatProperty(ctx, value, recurseTimes, key, type) {
    let str;
    const descriptor = ObjectGetOwnPropertyDescriptor(value, key) || { value: safeGet(value, key), enumerable: true };
    if (descriptor.value !== undefined) {
      ctx.indentationLvl += 2;
      str = formatValue(ctx, descriptor.value, recurseTimes);
      ctx.indentationLvl -= 2;
    } else if (descriptor.get !== undefined) {
      str = descriptor.set !== undefined ? '[Getter/Setter]' : '[Getter]';
    } else if (descriptor.set !== undefined) {
      str = '[Setter]';
    } else {
      str = 'undefined';
    }
    if (type === kArrayExtrasType && typeof key === 'number') return str;
    let name;
    if (typeof key === 'symbol') {
      name = `[${SymbolToString(key)}]`;
    } else if (key === '__proto__') {
      name = "['__proto__']";
    } else if (descriptor.enumerable === false) {
      name = `[${key}]`;
    } else if (RegExpTest(identifier, key)) {
      name = key;
    } else {
      name = strEscape(key);
    }
    return `${name}: ${str}`;
  }

  function remainingText(remaining) {
    return `... ${remaining} more item${remaining > 1 ? 's' : ''}`;
  }

  function formatArray(ctx, value, recurseTimes) {
    const length = value.length;
    const output = [];
    let shown = 0;
    let i = 0;
    while (i < length && shown < ctx.maxArrayLength) {
      if (!HasOwn(value, i)) {
        let holes = 0;
        while (i < length && !HasOwn(value, i)) {
          holes++;
          i++;
        }
        ArrayPush(output, `<${holes} empty item${holes > 1 ? 's' : ''}>`);
      } else {
        ArrayPush(output, formatProperty(ctx, value, recurseTimes, i, kArrayExtrasType));
        i++;
      }
      shown++;
    }
    if (i < length) ArrayPush(output, remainingText(length - i));
    return output;
  }

  function formatTypedArray(ctx, value) {
    const length = TypedArrayLength(value);
    const shown = MathMin(ctx.maxArrayLength, length);
    const output = [];
    for (let i = 0; i < shown; i++) {
      const element = value[i];
      ArrayPush(output, typeof element === 'bigint' ? `${element}n` : formatNumber(element));
    }
    if (length > shown) ArrayPush(output, remainingText(length - shown));
    return output;
  }

  function formatArrayBuffer(ctx, value) {
    const bytes = new Uint8ArrayCtor(value);
    const shown = MathMin(50, bytes.length);
    let contents = '';
    for (let i = 0; i < shown; i++) {
      contents += (i === 0 ? '' : ' ') + StringPadStart(NumberToString(bytes[i], 16), 2, '0');
    }
    if (bytes.length > shown) contents += ` ... ${bytes.length - shown} more byte${bytes.length - shown > 1 ? 's' : ''}`;
    return [`[Uint8Contents]: <${contents}>`, `byteLength: ${ArrayBufferByteLength(value)}`];
  }

  function formatSet(ctx, value, recurseTimes) {
    const output = [];
    ctx.indentationLvl += 2;
    SetForEach(value, (entry) => {
      if (output.length < ctx.maxArrayLength) ArrayPush(output, formatValue(ctx, entry, recurseTimes));
    });
    ctx.indentationLvl -= 2;
    const size = SetSize(value);
    if (size > output.length) ArrayPush(output, remainingText(size - output.length));
    return output;
  }

  function formatMap(ctx, value, recurseTimes) {
    const output = [];
    ctx.indentationLvl += 2;
    MapForEach(value, (entry, key) => {
      if (output.length < ctx.maxArrayLength) {
        ArrayPush(output, `${formatValue(ctx, key, recurseTimes)} => ${formatValue(ctx, entry, recurseTimes)}`);
      }
    });
    ctx.indentationLvl -= 2;
    const size = MapSize(value);
    if (size > output.length) ArrayPush(output, remainingText(size - output.length));
    return output;
  }

  function formatPromise(ctx, value, recurseTimes) {
    const state = promiseState(value);
    if (state[0] === 'pending') return ['<pending>'];
    ctx.indentationLvl += 2;
    const shown = formatValue(ctx, state[1], recurseTimes);
    ctx.indentationLvl -= 2;
    return [state[0] === 'rejected' ? `<rejected> ${shown}` : shown];
  }

  // Short array items side by side, in columns (Node's `groupArrayElements`).
  function groupArrayElements(ctx, output, value) {
    let totalLength = 0;
    let maxLength = 0;
    let outputLength = output.length;
    if (ctx.maxArrayLength < output.length) {
      // The "... more items" entry is not grouped.
      outputLength--;
    }
    const separatorSpace = 2;
    const dataLen = [];
    for (let i = 0; i < outputLength; i++) {
      const len = output[i].length;
      dataLen[i] = len;
      totalLength += len + separatorSpace;
      if (maxLength < len) maxLength = len;
    }
    const actualMax = maxLength + separatorSpace;
    if (actualMax * 3 + ctx.indentationLvl < ctx.breakLength &&
        (totalLength / actualMax > 5 || maxLength <= 6)) {
      const averageBias = MathSqrt(actualMax - totalLength / output.length);
      const biasedMax = MathMax(actualMax - 3 - averageBias, 1);
      const columns = MathMin(
        MathRound(MathSqrt(2.5 * biasedMax * outputLength) / biasedMax),
        MathFloor((ctx.breakLength - ctx.indentationLvl) / actualMax),
        ctx.compact * 4,
        15,
      );
      if (columns <= 1) return output;
      const tmp = [];
      const maxLineLength = [];
      for (let i = 0; i < columns; i++) {
        let lineLength = 0;
        for (let j = i; j < outputLength; j += columns) {
          if (dataLen[j] > lineLength) lineLength = dataLen[j];
        }
        ArrayPush(maxLineLength, lineLength + separatorSpace);
      }
      // Numbers are aligned right, anything else left.
      let pad = StringPadStart;
      if (value !== undefined) {
        for (let i = 0; i < outputLength; i++) {
          if (typeof value[i] !== 'number' && typeof value[i] !== 'bigint') {
            pad = StringPadEnd;
            break;
          }
        }
      }
      for (let i = 0; i < outputLength; i += columns) {
        const max = MathMin(i + columns, outputLength);
        let str = '';
        let j = i;
        for (; j < max - 1; j++) {
          str += pad(`${output[j]}, `, maxLineLength[j - i], ' ');
        }
        if (pad === StringPadStart) {
          str += StringPadStart(output[j], maxLineLength[j - i] - separatorSpace, ' ');
        } else {
          str += output[j];
        }
        ArrayPush(tmp, str);
      }
      if (outputLength < output.length) ArrayPush(tmp, output[outputLength]);
      output = tmp;
    }
    return output;
  }

  function isBelowBreakLength(ctx, output, start, base) {
    let totalLength = output.length + start;
    if (totalLength + output.length > ctx.breakLength) return false;
    for (let i = 0; i < output.length; i++) {
      totalLength += output[i].length;
      if (totalLength > ctx.breakLength) return false;
    }
    return base === '' || !StringIncludes(base, '\n');
  }

  function reduceToSingleString(ctx, output, base, braces, extrasType, recurseTimes, value) {
    const entries = output.length;
    if (extrasType === kArrayExtrasType && entries > 6) {
      output = groupArrayElements(ctx, output, value);
    }
    if (ctx.currentDepth - recurseTimes < ctx.compact && entries === output.length) {
      const start = output.length + ctx.indentationLvl + braces[0].length + base.length + 10;
      if (isBelowBreakLength(ctx, output, start, base)) {
        const joined = ArrayJoin(output, ', ');
        if (!StringIncludes(joined, '\n')) {
          return `${base ? `${base} ` : ''}${braces[0]} ${joined} ${braces[1]}`;
        }
      }
    }
    const indentation = `\n${StringRepeat(' ', ctx.indentationLvl)}`;
    return `${base ? `${base} ` : ''}${braces[0]}${indentation}  ${ArrayJoin(output, `,${indentation}  `)}${indentation}${braces[1]}`;
  }

  function newContext(options) {
    const ctx = {
      seen: [],
      circular: undefined,
      indentationLvl: 0,
      currentDepth: 0,
      depth: defaults.depth,
      maxArrayLength: defaults.maxArrayLength,
      maxStringLength: defaults.maxStringLength,
      breakLength: defaults.breakLength,
      compact: defaults.compact,
    };
    if (options !== null && typeof options === 'object') {
      const names = ['depth', 'maxArrayLength', 'maxStringLength', 'breakLength'];
      for (let i = 0; i < names.length; i++) {
        const name = names[i];
        const option = safeGet(options, name);
        if (typeof option === 'number') ctx[name] = option;
        else if (option === null || option === Infinity) ctx[name] = Infinity;
      }
    }
    return ctx;
  }

  // `util.inspect(value, options)`: `depth`, `maxArrayLength`,
  // `maxStringLength`, `breakLength` are honoured.
  function inspect(value, options) {
    return formatValue(newContext(options), value, 0);
  }

  function tryStringify(value) {
    try {
      return JSONStringify(value);
    } catch (err) {
      return '[Circular]';
    }
  }

  // `util.format(...args)`: `%s %d %i %f %j %o %O %c %%` in a first string
  // argument, then the rest joined by spaces, strings as they are.
  function format(args) {
    const first = args[0];
    let a = 0;
    let str = '';
    let join = '';
    if (typeof first === 'string') {
      if (args.length === 1) return first;
      let lastPos = 0;
      let tempStr;
      for (let i = 0; i < first.length - 1; i++) {
        if (StringCharCodeAt(first, i) !== 37) continue;
        const nextChar = StringCharCodeAt(first, ++i);
        if (a + 1 !== args.length) {
          switch (nextChar) {
            case 115: { // 's'
              const arg = args[++a];
              if (typeof arg === 'number') tempStr = formatNumber(arg);
              else if (typeof arg === 'bigint') tempStr = `${arg}n`;
              else if (typeof arg !== 'object' || arg === null) tempStr = toText(arg);
              else tempStr = inspect(arg, { depth: 0 });
              break;
            }
            case 106: tempStr = tryStringify(args[++a]); break; // 'j'
            case 100: { // 'd'
              const arg = args[++a];
              if (typeof arg === 'bigint') tempStr = `${arg}n`;
              else if (typeof arg === 'symbol') tempStr = 'NaN';
              else tempStr = formatNumber(NumberCtor(arg));
              break;
            }
            case 79: tempStr = inspect(args[++a]); break; // 'O'
            case 111: tempStr = inspect(args[++a], { depth: 4 }); break; // 'o'
            case 105: { // 'i'
              const arg = args[++a];
              if (typeof arg === 'bigint') tempStr = `${arg}n`;
              else if (typeof arg === 'symbol') tempStr = 'NaN';
              else tempStr = formatNumber(NumberParseInt(arg));
              break;
            }
            case 102: { // 'f'
              const arg = args[++a];
              tempStr = typeof arg === 'symbol' ? 'NaN' : formatNumber(NumberParseFloat(arg));
              break;
            }
            case 99: a += 1; tempStr = ''; break; // 'c'
            case 37: str += StringSlice(first, lastPos, i); lastPos = i + 1; continue; // '%'
            default: continue;
          }
          if (lastPos !== i - 1) str += StringSlice(first, lastPos, i - 1);
          str += tempStr;
          lastPos = i + 1;
        } else if (nextChar === 37) {
          str += StringSlice(first, lastPos, i);
          lastPos = i + 1;
        }
      }
      if (lastPos !== 0) {
        a++;
        join = ' ';
        if (lastPos < first.length) str += StringSlice(first, lastPos);
      }
    }
    while (a < args.length) {
      const value = args[a];
      str += join;
      str += typeof value !== 'string' ? inspect(value) : value;
      join = ' ';
      a++;
    }
    return str;
  }

  // What a cell's error is reported as: [type name, message, traceback].
  // A thrown value that is not an error is named `Error`, its message the
  // value as `inspect` shows it.
  function describeError(err) {
    if (err === null || typeof err !== 'object' || !isError(err)) {
      const message = inspect(err);
      return ['Error', message, `Error: ${message}`];
    }
    const name = errorName(err);
    const rawMessage = safeGet(err, 'message');
    const message = rawMessage === undefined ? '' : toText(rawMessage);
    const header = message === '' ? name : `${name}: ${message}`;
    const frames = stackFrames(err, header);
    return [name, message, frames === '' ? header : `${header}\n${frames}`];
  }

  // The value as JSON, for a result's `application/json`; undefined for a
  // value JSON does not describe (a primitive, a function, a collection or
  // an error, whose JSON would be `{}`), or that JSON refuses.
  function toJson(value) {
    if (value === null || typeof value !== 'object') return undefined;
    if (isMap(value) || isSet(value) || isWeakMap(value) || isWeakSet(value) || isError(value) ||
        isRegExp(value) || promiseState(value) !== undefined || ArrayBufferIsView(value) || isArrayBuffer(value)) {
      return undefined;
    }
    try {
      const text = JSONStringify(value);
      return typeof text === 'string' ? text : undefined;
    } catch {
      return undefined;
    }
  }

  // A cell's completion value: the `value` the evaluation's result object
  // holds as its own data property. The engine sets it by assignment, so a
  // cell that puts an accessor named `value` on `Object.prototype` diverts
  // it; the cell then shows no value, and no getter of the cell's runs
  // while it is reported.
  function completionValue(completion) {
    if (completion === null || typeof completion !== 'object') return undefined;
    const own = ObjectGetOwnPropertyDescriptor(completion, 'value');
    return own !== undefined && HasOwn(own, 'value') ? own.value : undefined;
  }

  // Node's error for an argument of the wrong type: a TypeError with a `code`.
  function invalidArgType(name, expected, actual) {
    const err = new TypeErrorCtor(`The "${name}" argument must be ${expected}. Received ${inspect(actual)}`);
    err.code = 'ERR_INVALID_ARG_TYPE';
    return err;
  }

  inspect.custom = customInspectSymbol;
  return { inspect, format, describeError, toJson, completionValue, invalidArgType };
})
