// E2B's JavaScript SDK (`e2b`, from tests/frontends' lockfile) against
// anypath's E2B API: the sandbox's files as envd serves them, each check one
// behaviour of E2B's own tests (e2b-dev/E2B's packages/js-sdk/tests/sandbox/files).
//
// Usage: node tests/frontends/e2b_files_checks.mjs API_URL KEY
//
// Every check runs; each prints `PASS name` or `FAIL name` with its error,
// and the exit status is 1 when any failed.

const [apiUrl, key] = process.argv.slice(2);
process.env.E2B_API_URL = apiUrl;
process.env.E2B_SANDBOX_URL = apiUrl;
process.env.E2B_API_KEY = key;

const { Sandbox } = await import('@e2b/code-interpreter');
const { FilesystemEventType, FileType } = await import('e2b');

// The sandbox user root's home.
const rootHome = '/root';
const { assert, check, runChecks, sandboxes, sleep } = await import('./sdk_checks.mjs');
const sandbox = async (opts = {}) => {
  const created = await Sandbox.create({ timeoutMs: 120_000, ...opts });
  sandboxes.push(created);
  return created;
};
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

/// Resolves with the first event `wanted` picks, or rejects after `ms`.
const eventWaiter = (ms) => {
  let resolve;
  const waits = [];
  const seen = [];
  const onEvent = (event) => {
    seen.push(event);
    for (const wait of waits) {
      if (!wait.done && wait.wanted(event)) {
        wait.done = true;
        wait.resolve(event);
      }
    }
  };
  const waitFor = (wanted, what) =>
    new Promise((ok, fail) => {
      const found = seen.find(wanted);
      if (found) return ok(found);
      const wait = { wanted, resolve: ok, done: false };
      waits.push(wait);
      setTimeout(() => {
        if (!wait.done) fail(new Error(`no ${what} within ${ms} ms: ${JSON.stringify(seen.map((e) => [e.type, e.name]))}`));
      }, ms);
    });
  return { onEvent, waitFor, resolve };
};

check('metadata', async () => {
  const sbx = await sandbox();
  const metadata = { author: 'mish', purpose: 'upload' };
  const info = await sbx.files.write('meta.txt', 'with metadata', { metadata });
  assert(same(info.metadata, metadata), `written: ${JSON.stringify(info)}`);
  assert(same((await sbx.files.getInfo('meta.txt')).metadata, metadata), 'getInfo');
  await sbx.files.makeDir('listed');
  await sbx.files.write('listed/a.txt', 'x', { metadata: { tag: 'listed' } });
  const listed = await sbx.files.list('listed');
  assert(same(listed.map((e) => e.metadata), [{ tag: 'listed' }]), `listed: ${JSON.stringify(listed)}`);
  const renamed = await sbx.files.rename('meta.txt', 'renamed.txt');
  assert(same(renamed.metadata, metadata), `renamed: ${JSON.stringify(renamed)}`);
  await sbx.files.write('renamed.txt', 'over');
  assert(!(await sbx.files.getInfo('renamed.txt')).metadata, 'an overwrite clears it');
});

check('modes_and_quiet_remove', async () => {
  const sbx = await sandbox();
  await sbx.files.write('f.txt', 'test');
  const file = await sbx.files.getInfo('f.txt');
  assert(file.mode === 0o644 && file.permissions === '-rw-r--r--' && file.type === FileType.FILE, `file: ${JSON.stringify(file)}`);
  await sbx.files.makeDir('d');
  const dir = await sbx.files.getInfo('d');
  assert(dir.mode === 0o755 && dir.permissions === 'drwxr-xr-x' && dir.type === FileType.DIR, `dir: ${JSON.stringify(dir)}`);
  await sbx.files.remove('non_existing_file.txt');
});

check('expired_signature', async () => {
  const sbx = await sandbox({ secure: true });
  await sbx.files.write('signed.txt', 'content');
  const expired = await sbx.downloadUrl('signed.txt', { useSignatureExpiration: -120 });
  const answer = await fetch(expired);
  assert(answer.status === 401, `status ${answer.status}`);
  assert(same(await answer.json(), { code: 401, message: 'signature is already expired' }), 'envd words');
  const fresh = await fetch(await sbx.downloadUrl('signed.txt', { useSignatureExpiration: 120 }));
  assert(fresh.status === 200 && (await fresh.text()) === 'content', 'a fresh link works');
});

check('watch_with_entry_and_new_subfolders', async () => {
  const sbx = await sandbox();
  await sbx.files.makeDir('test_watch_dir_entry');
  await sbx.files.write('test_watch_dir_entry/test_watch.txt', 'first');
  const plain = eventWaiter(10_000);
  const handle = await sbx.files.watchDir('test_watch_dir_entry', plain.onEvent, { includeEntry: true, allowNetworkMounts: true });
  await sbx.files.write('test_watch_dir_entry/test_watch.txt', 'modified');
  const event = await plain.waitFor((e) => e.type === FilesystemEventType.WRITE && e.name === 'test_watch.txt', 'write');
  assert(event.entry && event.entry.name === 'test_watch.txt' && event.entry.type === FileType.FILE, `entry: ${JSON.stringify(event.entry)}`);
  assert(event.entry.path === '/home/user/test_watch_dir_entry/test_watch.txt', event.entry.path);
  await handle.stop();

  await sbx.files.makeDir('test_recursive_watch_dir_add');
  const nested = eventWaiter(10_000);
  const recursive = await sbx.files.watchDir('test_recursive_watch_dir_add', nested.onEvent, { recursive: true });
  await sbx.files.makeDir('test_recursive_watch_dir_add/test_nested_watch_dir');
  await nested.waitFor((e) => e.type === FilesystemEventType.CREATE && e.name === 'test_nested_watch_dir', 'folder create');
  await sbx.files.write('test_recursive_watch_dir_add/test_nested_watch_dir/test_watch.txt', 'content');
  await nested.waitFor((e) => e.type === FilesystemEventType.WRITE && e.name === 'test_nested_watch_dir/test_watch.txt', 'nested write');
  await recursive.stop();
});

check('watching_a_missing_folder_is_not_found', async () => {
  const sbx = await sandbox();
  const { FileNotFoundError } = await import('e2b');
  try {
    await sbx.files.watchDir('/home/user/no_such_watch_dir', () => {});
  } catch (error) {
    assert(error instanceof FileNotFoundError, `a FileNotFoundError, not ${error?.constructor?.name}: ${error}`);
    return;
  }
  throw new Error('a watch of a missing folder started');
});

check('files_while_a_cell_runs', async () => {
  const sbx = await sandbox();
  const code = [
    'import os, time',
    'deadline = time.time() + 30',
    "while not os.path.exists('/home/user/during.txt') and time.time() < deadline:",
    '    time.sleep(0.05)',
    "open('during.txt').read()",
  ].join('\n');
  const running = sbx.runCode(code, { timeoutMs: 60_000 });
  await sleep(1500);
  const started = Date.now();
  await Promise.all([0, 1, 2, 3, 4, 5].map((n) => sbx.files.write(`parallel/${n}.txt`, `file ${n}`)));
  await sbx.files.read('parallel/5.txt');
  await sbx.files.write('during.txt', 'seen by the cell');
  const took = Date.now() - started;
  assert(took < 3000, `the files took ${took} ms while a cell ran`);
  const execution = await running;
  assert(!execution.error && execution.text === 'seen by the cell', `cell: ${JSON.stringify(execution.error)} ${execution.text}`);
  assert((await sbx.files.list('parallel')).length === 6, 'every parallel upload landed');
});

check('home_root_and_absolute_paths', async () => {
  const sbx = await sandbox();
  assert((await sbx.runCode('import os; os.getcwd()')).text === '/home/user', 'the working directory');
  // Root's home in the sandbox, spelled as a folder and a name.
  const inRootsHome = `${rootHome}/r.txt`;
  const info = await sbx.files.write('r.txt', "root's", { user: 'root' });
  assert(info.path === inRootsHome, info.path);
  assert((await sbx.runCode(`open('${inRootsHome}').read()`)).text === "root's", "the code sees root's home");
  await sbx.files.write('/tmp/x.txt', 'tmp');
  assert((await sbx.runCode("open('/tmp/x.txt').read()")).text === 'tmp', 'the code sees /tmp');
  await sbx.files.write('/opt/y.txt', 'opt');
  assert((await sbx.files.read('/opt/y.txt')) === 'opt', '/opt');
  await sbx.files.write('a.txt', 'relative');
  assert((await sbx.runCode("open('a.txt').read() + open('/home/user/a.txt').read()")).text === 'relativerelative', 'both spellings');
});

await runChecks();
