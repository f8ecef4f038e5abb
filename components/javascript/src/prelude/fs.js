// Node's `fs` module, synchronous, over the host's file operations (each
// opens and closes what it touches within the call); `fs.promises` and the
// callback forms run the same operations.
//
// Evaluated once, before any cell, as a function of `host` (this crate's
// functions) and `parts` (what the prelude's earlier files gave).
(function (host, parts) {
  'use strict';

  const uncurry = Function.prototype.bind.bind(Function.prototype.call);
  const ReflectApply = Reflect.apply;
  const ObjectKeys = Object.keys;
  const ArrayPush = uncurry(Array.prototype.push);
  const StringSlice = uncurry(String.prototype.slice);
  const Uint8ArrayCtor = Uint8Array;
  const DateCtor = Date;
  const PromiseResolve = Promise.resolve.bind(Promise);
  const PromiseThen = uncurry(Promise.prototype.then);
  const { invalidArgType } = parts.inspect;
  const { bytesOf, encode, decode, normalizeEncoding, toBuffer } = parts.bytes;
  const fsOps = host.fs;

  // A path argument as a string: a string, a `file:` URL or a Buffer.
  function pathArg(value, name = 'path') {
    if (typeof value === 'string') return value;
    if (value instanceof Uint8ArrayCtor) return host.decodeUtf8(value, false);
    if (value !== null && typeof value === 'object' && value.protocol === 'file:' && typeof value.pathname === 'string') {
      return decodeURIComponent(value.pathname);
    }
    throw invalidArgType(name, 'of type string or an instance of Buffer or URL', value);
  }

  function encodingOf(options) {
    if (typeof options === 'string') return options;
    if (options !== null && typeof options === 'object' && options.encoding) return options.encoding;
    return null;
  }

  function readFileSync(file, options) {
    const encoding = encodingOf(options);
    const name = pathArg(file);
    if (encoding === null || encoding === 'buffer') return toBuffer(fsOps.readBytes(name));
    if (normalizeEncoding(encoding) === 'utf8') return fsOps.readText(name);
    return decode(fsOps.readBytes(name), encoding);
  }

  function writeData(file, data, options, append) {
    const name = pathArg(file);
    if (typeof data === 'string') {
      const encoding = encodingOf(options);
      if (encoding === null || normalizeEncoding(encoding) === 'utf8') return fsOps.writeText(name, data, append);
      return fsOps.writeBytes(name, encode(data, encoding), append);
    }
    const bytes = bytesOf(data);
    if (bytes === undefined) {
      throw invalidArgType('data', 'of type string or an instance of Buffer, TypedArray, or DataView', data);
    }
    return fsOps.writeBytes(name, bytes, append);
  }

  // What a file is, as `Stats` and `Dirent` answer it.
  class FileKind {
    #kind;
    constructor(kind) {
      this.#kind = kind;
    }
    isFile() { return this.#kind === 'file'; }
    isDirectory() { return this.#kind === 'dir'; }
    isSymbolicLink() { return this.#kind === 'symlink'; }
    isFIFO() { return false; }
    isSocket() { return false; }
    isBlockDevice() { return false; }
    isCharacterDevice() { return false; }
  }

  class Stats extends FileKind {
    constructor(raw) {
      super(raw.kind);
      this.size = raw.size;
      this.mode = raw.kind === 'dir' ? 0o40755 : 0o100644;
      this.atimeMs = raw.atimeMs;
      this.mtimeMs = raw.mtimeMs;
      this.ctimeMs = raw.mtimeMs;
      this.birthtimeMs = raw.birthtimeMs;
      this.atime = new DateCtor(raw.atimeMs);
      this.mtime = new DateCtor(raw.mtimeMs);
      this.ctime = new DateCtor(raw.mtimeMs);
      this.birthtime = new DateCtor(raw.birthtimeMs);
    }
  }

  class Dirent extends FileKind {
    constructor(name, kind, parentPath) {
      super(kind);
      this.name = name;
      this.parentPath = parentPath;
      this.path = parentPath;
    }
  }

  function statWith(follow) {
    return (file, options) => {
      try {
        return new Stats(fsOps.stat(pathArg(file), follow));
      } catch (err) {
        if (options && options.throwIfNoEntry === false && err && err.code === 'ENOENT') return undefined;
        throw err;
      }
    };
  }

  const fs = {
    readFileSync,
    writeFileSync: (file, data, options) => writeData(file, data, options, false),
    appendFileSync: (file, data, options) => writeData(file, data, options, true),
    existsSync: (file) => {
      try {
        return fsOps.exists(pathArg(file));
      } catch {
        return false;
      }
    },
    readdirSync: (dir, options) => {
      const name = pathArg(dir);
      const entries = fsOps.readdir(name);
      const withFileTypes = options !== null && typeof options === 'object' && options.withFileTypes;
      const result = [];
      for (let i = 0; i < entries.length; i++) {
        ArrayPush(result, withFileTypes ? new Dirent(entries[i].name, entries[i].kind, name) : entries[i].name);
      }
      return result;
    },
    mkdirSync: (dir, options) => {
      const recursive = !!(options !== null && typeof options === 'object' && options.recursive);
      fsOps.mkdir(pathArg(dir), recursive);
      return undefined;
    },
    unlinkSync: (file) => fsOps.unlink(pathArg(file)),
    rmSync: (file, options) => {
      const opts = options !== null && typeof options === 'object' ? options : {};
      fsOps.rm(pathArg(file), !!opts.recursive, !!opts.force);
    },
    rmdirSync: (dir, options) => {
      fsOps.rmdir(pathArg(dir), !!(options !== null && typeof options === 'object' && options.recursive));
    },
    renameSync: (from, to) => fsOps.rename(pathArg(from, 'oldPath'), pathArg(to, 'newPath')),
    copyFileSync: (from, to) => fsOps.copyFile(pathArg(from, 'src'), pathArg(to, 'dest')),
    statSync: statWith(true),
    lstatSync: statWith(false),
    Stats,
    Dirent,
  };
  // The promise forms run the same operations, already done when awaited.
  const promises = {};
  const syncNames = ObjectKeys(fs);
  for (let i = 0; i < syncNames.length; i++) {
    const syncName = syncNames[i];
    if (!syncName.endsWith('Sync') || syncName === 'existsSync') continue;
    const operation = fs[syncName];
    const asyncName = StringSlice(syncName, 0, -4);
    promises[asyncName] = (...args) => {
      try {
        return PromiseResolve(ReflectApply(operation, undefined, args));
      } catch (err) {
        return Promise.reject(err);
      }
    };
    // The callback forms: the callback runs once the cell's jobs run.
    fs[asyncName] = (...args) => {
      const callback = args.length && typeof args[args.length - 1] === 'function' ? args.pop() : undefined;
      if (callback === undefined) throw invalidArgType('cb', 'of type function', undefined);
      let result;
      let error = null;
      try {
        result = ReflectApply(operation, undefined, args);
      } catch (err) {
        error = err;
      }
      PromiseThen(PromiseResolve(), () => callback(error, result));
    };
  }
  promises.access = (file) => (fs.existsSync(file) ? PromiseResolve() : promises.stat(file).then(() => undefined));
  fs.promises = promises;
  fs.constants = { F_OK: 0, R_OK: 4, W_OK: 2, X_OK: 1 };
  fs.accessSync = (file) => {
    fs.statSync(file);
  };

  return { fs, promises };
})
