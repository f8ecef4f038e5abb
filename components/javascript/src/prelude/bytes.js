// Bytes and text: `TextEncoder`, `TextDecoder` (UTF-8), and Node's
// `Buffer` as far as reading and writing files needs it; the encodings
// (`utf8`, `latin1`, `ascii`, `hex`, `base64`) the file functions take.
//
// Evaluated once, before any cell, as a function of `host` (this crate's
// functions) and `parts` (what the prelude's earlier files gave).
(function (host, parts) {
  'use strict';

  const uncurry = Function.prototype.bind.bind(Function.prototype.call);
  const ArrayIsArray = Array.isArray;
  const StringSlice = uncurry(String.prototype.slice);
  const StringCharCodeAt = uncurry(String.prototype.charCodeAt);
  const StringToLowerCase = uncurry(String.prototype.toLowerCase);
  const StringFromCharCode = String.fromCharCode;
  const RegExpReplace = uncurry(RegExp.prototype[Symbol.replace]);
  const Uint8ArrayCtor = Uint8Array;
  const ArrayBufferCtor = ArrayBuffer;
  const ArrayBufferIsView = ArrayBuffer.isView;
  const TypedArrayPrototype = Object.getPrototypeOf(Uint8Array.prototype);
  const TypedArrayBuffer = uncurry(Object.getOwnPropertyDescriptor(TypedArrayPrototype, 'buffer').get);
  const DataViewBuffer = uncurry(Object.getOwnPropertyDescriptor(DataView.prototype, 'buffer').get);
  const TypedArraySet = uncurry(TypedArrayPrototype.set);
  const TypeErrorCtor = TypeError;
  const ObjectDefineProperty = Object.defineProperty;
  const { inspect, invalidArgType } = parts.inspect;
  const define = (target, name, value) =>
    ObjectDefineProperty(target, name, { value, writable: true, configurable: true, enumerable: false });

  // The bytes of a Uint8Array, ArrayBuffer or other view, as a Uint8Array
  // over the same memory; undefined for anything else.
  function bytesOf(data) {
    if (data instanceof Uint8ArrayCtor) return data;
    if (data instanceof ArrayBufferCtor) return new Uint8ArrayCtor(data);
    if (ArrayBufferIsView(data)) {
      const buffer = data instanceof DataView ? DataViewBuffer(data) : TypedArrayBuffer(data);
      return new Uint8ArrayCtor(buffer, data.byteOffset, data.byteLength);
    }
    return undefined;
  }

  const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

  function normalizeEncoding(encoding) {
    const name = StringToLowerCase(`${encoding === undefined || encoding === null ? 'utf8' : encoding}`);
    switch (name) {
      case 'utf8': case 'utf-8': return 'utf8';
      case 'latin1': case 'binary': return 'latin1';
      case 'ascii': case 'hex': case 'base64': return name;
      default: {
        const err = new TypeErrorCtor(`Unknown encoding: ${encoding}`);
        err.code = 'ERR_UNKNOWN_ENCODING';
        throw err;
      }
    }
  }

  function decode(bytes, encoding) {
    switch (normalizeEncoding(encoding)) {
      case 'utf8': return host.decodeUtf8(bytes, false);
      case 'latin1': case 'ascii': {
        let text = '';
        for (let i = 0; i < bytes.length; i++) text += StringFromCharCode(bytes[i]);
        return text;
      }
      case 'hex': {
        let text = '';
        for (let i = 0; i < bytes.length; i++) text += (bytes[i] < 16 ? '0' : '') + bytes[i].toString(16);
        return text;
      }
      default: { // base64
        let text = '';
        for (let i = 0; i < bytes.length; i += 3) {
          const n = (bytes[i] << 16) | ((bytes[i + 1] || 0) << 8) | (bytes[i + 2] || 0);
          text += BASE64[(n >> 18) & 63] + BASE64[(n >> 12) & 63] +
            (i + 1 < bytes.length ? BASE64[(n >> 6) & 63] : '=') + (i + 2 < bytes.length ? BASE64[n & 63] : '=');
        }
        return text;
      }
    }
  }

  function encode(text, encoding) {
    text = `${text}`;
    switch (normalizeEncoding(encoding)) {
      case 'utf8': return host.encodeUtf8(text);
      case 'latin1': case 'ascii': {
        const bytes = new Uint8ArrayCtor(text.length);
        for (let i = 0; i < text.length; i++) bytes[i] = StringCharCodeAt(text, i);
        return bytes;
      }
      case 'hex': {
        const bytes = new Uint8ArrayCtor(text.length >> 1);
        for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(StringSlice(text, 2 * i, 2 * i + 2), 16);
        return bytes;
      }
      default: { // base64 (and base64url's alphabet)
        const clean = RegExpReplace(/[^A-Za-z0-9+/\-_]/g, text, '');
        const bytes = new Uint8ArrayCtor((clean.length * 3) >> 2);
        let n = 0;
        let bits = 0;
        let j = 0;
        for (let i = 0; i < clean.length; i++) {
          const c = clean[i];
          const value = c === '-' ? 62 : c === '_' ? 63 : BASE64.indexOf(c);
          n = (n << 6) | value;
          bits += 6;
          if (bits >= 8) {
            bits -= 8;
            bytes[j++] = (n >> bits) & 255;
          }
        }
        return bytes;
      }
    }
  }

  class TextEncoder {
    get encoding() { return 'utf-8'; }
    encode(text = '') { return host.encodeUtf8(`${text}`); }
  }

  class TextDecoder {
    #fatal;
    constructor(label = 'utf-8', options = {}) {
      if (normalizeEncoding(label) !== 'utf8') throw new RangeError(`The "${label}" encoding is not supported`);
      this.#fatal = !!(options && options.fatal);
    }
    get encoding() { return 'utf-8'; }
    get fatal() { return this.#fatal; }
    decode(data) {
      if (data === undefined) return '';
      const bytes = bytesOf(data);
      if (bytes === undefined) throw invalidArgType('input', 'an instance of ArrayBuffer or ArrayBufferView', data);
      return host.decodeUtf8(bytes, this.#fatal);
    }
  }
  define(globalThis, 'TextEncoder', TextEncoder);
  define(globalThis, 'TextDecoder', TextDecoder);

  // Node's Buffer, as far as reading and writing files needs it: a
  // Uint8Array that decodes itself.
  class Buffer extends Uint8ArrayCtor {
    static from(value, encodingOrOffset, length) {
      if (typeof value === 'string') return toBuffer(encode(value, encodingOrOffset));
      if (value instanceof ArrayBufferCtor) return new Buffer(value, encodingOrOffset || 0, length ?? value.byteLength - (encodingOrOffset || 0));
      const bytes = bytesOf(value);
      if (bytes !== undefined) {
        const copy = new Buffer(bytes.length);
        TypedArraySet(copy, bytes);
        return copy;
      }
      if (ArrayIsArray(value)) {
        const copy = new Buffer(value.length);
        for (let i = 0; i < value.length; i++) copy[i] = value[i];
        return copy;
      }
      throw invalidArgType('first', 'of type string or an instance of Buffer, ArrayBuffer, or Array', value);
    }
    static alloc(size, fill) {
      const buffer = new Buffer(size);
      if (typeof fill === 'number') buffer.fill(fill);
      return buffer;
    }
    static allocUnsafe(size) { return new Buffer(size); }
    static isBuffer(value) { return value instanceof Buffer; }
    static byteLength(value, encoding) {
      return typeof value === 'string' ? encode(value, encoding).length : (bytesOf(value) || { length: 0 }).length;
    }
    static concat(list, totalLength) {
      let total = 0;
      for (let i = 0; i < list.length; i++) total += list[i].length;
      const result = new Buffer(totalLength ?? total);
      let offset = 0;
      for (let i = 0; i < list.length && offset < result.length; i++) {
        const part = list[i].length > result.length - offset ? list[i].subarray(0, result.length - offset) : list[i];
        TypedArraySet(result, part, offset);
        offset += part.length;
      }
      return result;
    }
    toString(encoding, start = 0, end = this.length) {
      return decode(this.subarray(start, end), encoding);
    }
    toJSON() {
      return { type: 'Buffer', data: Array.from(this) };
    }
    // As Node shows a Buffer: `<Buffer 68 69>`.
    [inspect.custom]() {
      const shown = Math.min(this.length, 50);
      let text = '<Buffer';
      for (let i = 0; i < shown; i++) text += ` ${this[i] < 16 ? '0' : ''}${this[i].toString(16)}`;
      if (this.length > shown) text += ` ... ${this.length - shown} more byte${this.length - shown > 1 ? 's' : ''}`;
      return `${text}>`;
    }
    equals(other) {
      if (other.length !== this.length) return false;
      for (let i = 0; i < this.length; i++) if (this[i] !== other[i]) return false;
      return true;
    }
    write(text, offset = 0, length, encoding) {
      const bytes = encode(text, typeof length === 'string' ? length : encoding);
      const count = Math.min(bytes.length, this.length - offset, typeof length === 'number' ? length : Infinity);
      TypedArraySet(this, bytes.subarray(0, count), offset);
      return count;
    }
  }
  define(globalThis, 'Buffer', Buffer);

  function toBuffer(bytes) {
    return new Buffer(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  return { bytesOf, encode, decode, normalizeEncoding, toBuffer, Buffer, TextEncoder, TextDecoder };
})
