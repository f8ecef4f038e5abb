// E2B's JavaScript SDK (`@e2b/code-interpreter`, from tests/frontends'
// lockfile) against anypath's E2B API, as an agent builder's code uses it.
//
// Usage: node tests/frontends/e2b_sdk_checks.mjs API_URL KEY OTHER_KEY
//
// Every check runs; each prints `PASS name` or `FAIL name` with its error,
// and the exit status is 1 when any failed.

const [apiUrl, key, otherKey] = process.argv.slice(2);
process.env.E2B_API_URL = apiUrl;
process.env.E2B_SANDBOX_URL = apiUrl;
process.env.E2B_API_KEY = key;

const { Sandbox } = await import('@e2b/code-interpreter');

const { assert, check, runChecks, sandboxes, sleep } = await import('./sdk_checks.mjs');
const sandbox = async (opts = {}, template = undefined) => {
  const options = { timeoutMs: 120_000, metadata: { suite: 'e2b_sdk_checks' }, ...opts };
  const created = template ? await Sandbox.create(template, options) : await Sandbox.create(options);
  sandboxes.push(created);
  return created;
};

check('basic_state_and_callbacks', async () => {
  const sbx = await sandbox();
  assert((await sbx.runCode('x = 1; x')).text === '1', 'the value of x');
  assert((await sbx.runCode('x += 1; x')).text === '2', 'state kept');
  const stdout = [];
  const stderr = [];
  const execution = await sbx.runCode('import sys\nprint("out")\nprint("err", file=sys.stderr)', {
    onStdout: (m) => stdout.push(m.line),
    onStderr: (m) => stderr.push(m.line),
  });
  assert(stdout.join('') === 'out\n' && stderr.join('') === 'err\n', `callbacks: ${stdout} ${stderr}`);
  assert(execution.logs.stdout.join('') === 'out\n', 'logs');
});

check('results_and_errors', async () => {
  const sbx = await sandbox();
  const frame = (await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2, 3]})')).results[0];
  assert(frame.data && frame.data.a.length === 3 && frame.html.includes('<table'), 'a DataFrame');
  const figure = (await sbx.runCode('import matplotlib.pyplot as plt\nplt.bar(["a", "b"], [1, 2])\nplt.show()')).results[0];
  assert(figure.png && figure.png.length > 100, 'a figure as PNG');
  const failed = await sbx.runCode('1 / 0');
  assert(failed.error.name === 'ZeroDivisionError' && failed.error.traceback.includes('ZeroDivisionError'), 'an error');
  assert((await sbx.runCode("import os; os.getenv('FOO')", { envs: { FOO: 'bar' } })).text === 'bar', 'env vars');
});

check('files', async () => {
  const sbx = await sandbox();
  await sbx.files.write('/home/user/dir/a.txt', 'hello');
  assert((await sbx.files.read('/home/user/dir/a.txt')) === 'hello', 'read back');
  assert((await sbx.runCode("open('dir/a.txt').read()")).text === 'hello', 'the code sees it');
  assert(await sbx.files.exists('/home/user/dir/a.txt'), 'exists');
  assert(!(await sbx.files.exists('/home/user/nope')), 'does not exist');
  assert(await sbx.files.makeDir('/home/user/made'), 'made a directory');
  const names = (await sbx.files.list('/home/user')).map((e) => e.name).sort();
  assert(JSON.stringify(names) === JSON.stringify(['dir', 'made']), `listing: ${names}`);
  const info = await sbx.files.getInfo('/home/user/dir/a.txt');
  assert(info.size === 5 && info.type === 'file', `info: ${JSON.stringify(info)}`);
  await sbx.files.rename('/home/user/dir/a.txt', '/home/user/b.txt');
  assert((await sbx.files.read('/home/user/b.txt')) === 'hello', 'renamed');
  await sbx.files.remove('/home/user/dir');
  assert(!(await sbx.files.exists('/home/user/dir')), 'removed');
  const download = await fetch(await sbx.downloadUrl('/home/user/b.txt'));
  assert(download.status === 200 && (await download.text()) === 'hello', 'a signed download link');
});

check('watch_dir_streams_events', async () => {
  const sbx = await sandbox();
  const events = [];
  const handle = await sbx.files.watchDir('/home/user', (event) => events.push(event));
  await sbx.files.write('/home/user/watched.txt', '1');
  for (let i = 0; i < 40 && !events.some((e) => e.name === 'watched.txt'); i++) await sleep(100);
  await handle.stop();
  assert(events.some((e) => e.name === 'watched.txt' && e.type === 'create'), `events: ${JSON.stringify(events)}`);
});

check('contexts', async () => {
  const sbx = await sandbox();
  const context = await sbx.createCodeContext();
  await sbx.runCode('x = 1');
  const inContext = await sbx.runCode('x', { context });
  assert(inContext.error && inContext.error.name === 'NameError', 'contexts keep their own variables');
  const listed = await sbx.listCodeContexts();
  assert(listed.some((c) => c.id === context.id), 'listed');
  await sbx.removeCodeContext(context);
  assert(!(await sbx.listCodeContexts()).some((c) => c.id === context.id), 'removed');
});

check('lifecycle', async () => {
  const sbx = await sandbox({ metadata: { owner: 'js-lifecycle' } });
  const info = await sbx.getInfo();
  assert(info.sandboxId === sbx.sandboxId && info.metadata.owner === 'js-lifecycle', 'info');
  await sbx.setTimeout(600_000);
  const listed = await Sandbox.list({ query: { metadata: { owner: 'js-lifecycle' } } }).nextItems();
  assert(listed.length === 1 && listed[0].sandboxId === sbx.sandboxId, 'listed by metadata');
  await sbx.runCode('kept = 7');
  await sbx.pause();
  assert(!(await sbx.isRunning()), 'paused');
  const resumed = await Sandbox.connect(sbx.sandboxId);
  assert((await resumed.runCode('kept * 6')).text === '42', 'state kept over pause and connect');
  const theirs = await Sandbox.list({ apiKey: otherKey }).nextItems();
  assert(!theirs.some((s) => s.sandboxId === sbx.sandboxId), 'another tenant does not see it');
  await resumed.kill();
  assert(!(await resumed.isRunning()), 'killed');
});

check('snapshots', async () => {
  const source = await sandbox();
  await source.runCode('state = 41');
  await source.files.write('/home/user/snap.txt', 'kept');
  const name = `js-snap-${Date.now()}`;
  const snapshot = await source.createSnapshot({ name });
  assert(snapshot.snapshotId && snapshot.names.includes(name), `created: ${JSON.stringify(snapshot)}`);
  await source.runCode('state = 0');
  const started = await sandbox({}, snapshot.snapshotId);
  assert((await started.runCode('state + 1')).text === '42', 'the live state came along');
  assert((await started.files.read('/home/user/snap.txt')) === 'kept', 'the files came along');
  const byName = await sandbox({}, name);
  assert((await byName.runCode('state')).text === '41', 'started by name');
  const listed = await Sandbox.listSnapshots({ sandboxId: source.sandboxId }).nextItems();
  assert(listed.length === 1 && listed[0].snapshotId === snapshot.snapshotId, `listed: ${JSON.stringify(listed)}`);
  const theirs = await Sandbox.listSnapshots({ apiKey: otherKey }).nextItems();
  assert(!theirs.some((s) => s.snapshotId === snapshot.snapshotId), 'another tenant does not see it');
  assert((await Sandbox.deleteSnapshot(snapshot.snapshotId)) === true, 'deleted');
  assert((await Sandbox.deleteSnapshot(snapshot.snapshotId)) === false, 'deleted once');
});

check('list_newest_first', async () => {
  const owner = `js-order-${Date.now()}`;
  const older = await sandbox({ metadata: { owner } });
  const newer = await sandbox({ metadata: { owner } });
  const paginator = Sandbox.list({ query: { metadata: { owner } }, limit: 1 });
  const first = await paginator.nextItems();
  const second = await paginator.nextItems();
  assert(first[0].sandboxId === newer.sandboxId && second[0].sandboxId === older.sandboxId, 'newest first, paged');
  assert(!paginator.hasNext, 'two pages');
});

check('commands_run_and_other_languages_are_refused', async () => {
  const sbx = await sandbox();
  const streamed = [];
  const result = await sbx.commands.run('echo hi; echo oops >&2; printf "a\\nb\\n" | wc -l', { onStdout: (out) => streamed.push(out) });
  assert(result.exitCode === 0 && result.stdout === 'hi\n2\n' && result.stderr === 'oops\n', `commands: ${JSON.stringify(result)}`);
  assert(streamed.join('') === 'hi\n2\n', `streamed: ${JSON.stringify(streamed)}`);
  let failed = null;
  try {
    await sbx.commands.run('exit 3');
  } catch (error) {
    failed = error;
  }
  assert(failed && failed.exitCode === 3, `exit 3: ${failed}`);
  const cat = await sbx.commands.run('cat', { background: true, stdin: true });
  await sbx.commands.sendStdin(cat.pid, 'from js');
  await sbx.commands.closeStdin(cat.pid);
  assert((await cat.wait()).stdout === 'from js', 'stdin reached cat');
  let refused = null;
  try {
    await sbx.runCode("cat('hi')", { language: 'r' });
  } catch (error) {
    refused = error;
  }
  assert(refused && String(refused.message).includes("'r' is not available"), `language: ${refused}`);
});

check('javascript_contexts', async () => {
  const sbx = await sandbox();
  const stdout = [];
  await sbx.runCode('let n = 40; const twice = (x) => x * 2;', { language: 'js' });
  const execution = await sbx.runCode("console.log('n is', n); twice(n) + 2 - n", { language: 'js', onStdout: (m) => stdout.push(m.line) });
  assert(execution.error === undefined && execution.text === '42', `the last value: ${JSON.stringify(execution)}`);
  assert(stdout.join('') === 'n is 40\n', `console.log streamed: ${stdout}`);
  const failed = await sbx.runCode("JSON.parse('{')", { language: 'js' });
  assert(failed.error && failed.error.name === 'SyntaxError' && failed.error.value.length > 0, `an error: ${JSON.stringify(failed.error)}`);
  const js = await sbx.createCodeContext({ language: 'js' });
  await sbx.runCode("require('fs').writeFileSync('from-js.txt', 'written by js')", { context: js });
  const python = await sbx.runCode("open('from-js.txt').read()");
  assert(python.text === 'written by js', `Python reads JavaScript's file: ${python.text}`);
  assert((await sbx.runCode('typeof n', { context: js })).text === 'undefined', 'a new context has its own state');
  assert((await sbx.runCode('n', { language: 'js' })).text === '40', 'the default JavaScript context keeps its state');
});

await runChecks();
