// Node's `path` module, POSIX flavour: `join`, `resolve`, `normalize`,
// `dirname`, `basename`, `extname`, `relative`, `isAbsolute`, `parse`,
// `format`.
//
// Evaluated once, before any cell, as a function of `host` (this crate's
// functions) and `parts` (what the prelude's earlier files gave).
(function (host, parts) {
  'use strict';

  const uncurry = Function.prototype.bind.bind(Function.prototype.call);
  const ArrayPush = uncurry(Array.prototype.push);
  const ArrayJoin = uncurry(Array.prototype.join);
  const ArraySlice = uncurry(Array.prototype.slice);
  const StringSlice = uncurry(String.prototype.slice);
  const StringSplit = uncurry(String.prototype.split);
  const StringLastIndexOf = uncurry(String.prototype.lastIndexOf);
  const { invalidArgType } = parts.inspect;

  function assertPath(path) {
    if (typeof path !== 'string') throw invalidArgType('path', 'of type string', path);
  }

  // The segments of `path` with `.` and `..` resolved (a relative path
  // keeps its leading `..`s).
  function normalizeParts(path, absolute) {
    const kept = [];
    const segments = StringSplit(path, '/');
    for (let i = 0; i < segments.length; i++) {
      const segment = segments[i];
      if (segment === '' || segment === '.') continue;
      if (segment === '..') {
        if (kept.length && kept[kept.length - 1] !== '..') kept.length--;
        else if (!absolute) ArrayPush(kept, '..');
      } else {
        ArrayPush(kept, segment);
      }
    }
    return kept;
  }

  const path = {
    sep: '/',
    delimiter: ':',
    normalize(p) {
      assertPath(p);
      if (p === '') return '.';
      const absolute = p[0] === '/';
      const trailing = p[p.length - 1] === '/';
      let result = ArrayJoin(normalizeParts(p, absolute), '/');
      if (result === '' && !absolute) result = '.';
      if (result !== '' && trailing) result += '/';
      return absolute ? `/${result}` : result;
    },
    join(...pieces) {
      for (let i = 0; i < pieces.length; i++) assertPath(pieces[i]);
      const joined = ArrayJoin(pieces.filter((part) => part !== ''), '/');
      return joined === '' ? '.' : path.normalize(joined);
    },
    resolve(...pieces) {
      let resolved = '';
      for (let i = pieces.length - 1; i >= -1 && resolved[0] !== '/'; i--) {
        const part = i >= 0 ? pieces[i] : host.fs.cwd();
        assertPath(part);
        if (part !== '') resolved = resolved === '' ? part : `${part}/${resolved}`;
      }
      const normalized = ArrayJoin(normalizeParts(resolved, true), '/');
      return `/${normalized}`;
    },
    isAbsolute(p) {
      assertPath(p);
      return p[0] === '/';
    },
    dirname(p) {
      assertPath(p);
      if (p === '') return '.';
      let end = p.length;
      while (end > 1 && p[end - 1] === '/') end--;
      const slash = StringLastIndexOf(StringSlice(p, 0, end), '/');
      if (slash === -1) return '.';
      if (slash === 0) return '/';
      let dirEnd = slash;
      while (dirEnd > 1 && p[dirEnd - 1] === '/') dirEnd--;
      return StringSlice(p, 0, dirEnd);
    },
    basename(p, ext) {
      assertPath(p);
      let end = p.length;
      while (end > 0 && p[end - 1] === '/') end--;
      const trimmed = StringSlice(p, 0, end);
      let base = StringSlice(trimmed, StringLastIndexOf(trimmed, '/') + 1);
      if (typeof ext === 'string' && ext !== base && base.endsWith(ext)) base = StringSlice(base, 0, base.length - ext.length);
      return base;
    },
    extname(p) {
      const base = path.basename(p);
      const dot = StringLastIndexOf(base, '.');
      return dot <= 0 ? '' : StringSlice(base, dot);
    },
    relative(from, to) {
      const fromParts = normalizeParts(path.resolve(from), true);
      const toParts = normalizeParts(path.resolve(to), true);
      let common = 0;
      while (common < fromParts.length && common < toParts.length && fromParts[common] === toParts[common]) common++;
      const up = [];
      for (let i = common; i < fromParts.length; i++) ArrayPush(up, '..');
      return ArrayJoin([...up, ...ArraySlice(toParts, common)], '/');
    },
    parse(p) {
      assertPath(p);
      const root = p[0] === '/' ? '/' : '';
      const base = path.basename(p);
      const ext = path.extname(p);
      let dir = path.dirname(p);
      if (dir === '.' && !StringSlice(p, 0, p.length - base.length).includes('.')) dir = '';
      return { root, dir, base, ext, name: StringSlice(base, 0, base.length - ext.length) };
    },
    format(parts) {
      const dir = parts.dir || parts.root || '';
      const base = parts.base || `${parts.name || ''}${parts.ext || ''}`;
      return dir === '' ? base : dir === parts.root ? `${dir}${base}` : `${dir}/${base}`;
    },
  };
  path.posix = path;

  return { path };
})
