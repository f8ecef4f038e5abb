// Drives anypath's MCP server with the official MCP TypeScript SDK
// (`@modelcontextprotocol/sdk`, pinned by tests/frontends' lockfile), the
// client library of MCP hosts written in TypeScript. The scenarios are those
// of tests/support/mcp_client_checks.py, which runs them with the Python SDK.
//
// Usage:
//   node mcp_ts_checks.mjs SCENARIO http URL KEY [OTHER_KEY]
//   node mcp_ts_checks.mjs SCENARIO stdio COMMAND [ARG ...]
//
// Each scenario asserts what a real client sees and exits non-zero, with the
// reason, on the first difference; `SCENARIO over TRANSPORT: ok` when it
// passed. tests/mcp_clients.rs runs every scenario on both transports.

import { Buffer } from 'node:buffer';
import { createHash } from 'node:crypto';
import http from 'node:http';
import zlib from 'node:zlib';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const TOOLS = [
  'attach_dataset', 'close_session', 'delete_snapshot', 'fork_session', 'fork_session_many', 'list_files', 'list_snapshots', 'load_artifact', 'read_artifact',
  'run_python', 'snapshot_session', 'start_from_snapshot', 'upload_file', 'start_run', 'get_run', 'run_command', 'start_command', 'get_command',
];

const assert = (condition, message) => {
  if (!condition) throw new Error(`assertion failed: ${typeof message === 'function' ? message() : message}`);
};
const show = (value) => JSON.stringify(value, null, 1).slice(0, 2000);
const b64 = (bytes) => Buffer.from(bytes).toString('base64');
const unb64 = (text) => Buffer.from(text, 'base64');
const sameSet = (a, b) => a.length === b.length && [...a].sort().every((v, i) => v === [...b].sort()[i]);

/**
 * A connected client for the transport named on the command line. It lists
 * the tools first, as hosts do: that is when the SDK learns each tool's
 * output schema, against which it then checks every answer's structured
 * content.
 */
async function connect(transport, key) {
  const client = new Client({ name: 'anypath-mcp-ts-checks', version: '0' });
  let connection;
  if (transport[0] === 'http') {
    const headers = key ? { 'x-api-key': key } : {};
    connection = new StreamableHTTPClientTransport(new URL(transport[1]), { requestInit: { headers } });
  } else {
    connection = new StdioClientTransport({ command: transport[1], args: transport.slice(2), stderr: 'inherit' });
  }
  await client.connect(connection);
  recordWire(client, connection);
  const { tools } = await client.listTools();
  return { client, tools };
}

/** Every message a client's transport received, in the order it arrived (`recordWire`). */
const wires = new WeakMap();

/**
 * Records what reaches the client's transport before the SDK dispatches it.
 * The SDK hands a response to its caller at once but a notification a
 * microtask later, and forgets a request's progress handler with its
 * response: progress that arrives in the same read as the answer is read
 * but never reaches `onprogress` (typescript-sdk#2580). What the server sent,
 * and in which order, is read here instead.
 */
function recordWire(client, connection) {
  const wire = [];
  const dispatch = connection.onmessage;
  connection.onmessage = (message, extra) => {
    wire.push(message);
    dispatch?.(message, extra);
  };
  wires.set(client, wire);
}

/** Runs `body` with connected clients, closing them however it ends. */
async function using(clients, body) {
  try {
    return await body(...clients.map((c) => c.client), ...clients.map((c) => c.tools));
  } finally {
    await Promise.allSettled(clients.map((c) => c.client.close()));
  }
}

const call = (client, name, args, options) => client.callTool({ name, arguments: args }, undefined, options);
const textOf = (result) => result.content.filter((b) => b.type === 'text').map((b) => b.text).join('\n');
const imagesOf = (result) => result.content.filter((b) => b.type === 'image');

/** A successful answer's structured content. */
function ok(result, tool) {
  assert(!result.isError, () => `${tool} failed: ${textOf(result)}`);
  assert(result.structuredContent && typeof result.structuredContent === 'object', () => `${tool}: no structured content: ${show(result)}`);
  return result.structuredContent;
}

/**
 * The error's message: a tool error is a result marked isError whose one
 * text block is the JSON of exactly its stable code and message; it has no
 * structured content (that is the answer's, checked against its schema).
 */
function toolError(result, tool, code) {
  assert(result.isError === true, () => `${tool} should have failed with ${code}: ${show(result)}`);
  assert(result.structuredContent === undefined, () => `${tool}: an error with structured content ${show(result.structuredContent)}`);
  assert(sameSet(result.content.map((b) => b.type), ['text']), () => `${tool}: error content ${show(result.content)}`);
  const error = JSON.parse(textOf(result));
  assert(sameSet(Object.keys(error), ['code', 'message']), () => `${tool}: error text ${show(error)}`);
  assert(error.code === code, () => `${tool}: expected ${code}, got ${show(error)}`);
  assert(typeof error.message === 'string' && error.message.length > 0, () => `${tool}: empty message ${show(error)}`);
  return error.message;
}

/** A 2x2 red PNG, made with Node's zlib. */
function tinyPng() {
  const u32 = (n) => {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(n >>> 0);
    return b;
  };
  const chunk = (kind, data) => {
    const body = Buffer.concat([Buffer.from(kind, 'latin1'), data]);
    return Buffer.concat([u32(data.length), body, u32(zlib.crc32(body))]);
  };
  const row = Buffer.from([0, 0xff, 0, 0, 0xff, 0, 0]);
  const header = Buffer.concat([u32(2), u32(2), Buffer.from([8, 2, 0, 0, 0])]);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', zlib.deflateSync(Buffer.concat([row, row]))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** GET with no header at all, as an n8n HTTP Request node would fetch a link. */
async function download(url) {
  const response = await fetch(url);
  return { status: response.status, body: Buffer.from(await response.arrayBuffer()) };
}

/** Every tool is listed with an object input schema, its required fields,
 * an output schema and a description a model can act on. */
async function tools(transport, key) {
  const required = {
    upload_file: ['session_id', 'filename', 'content_base64'],
    run_python: ['session_id', 'code'],
    read_artifact: ['session_id', 'path'],
    close_session: ['session_id'],
    list_files: ['session_id'],
    fork_session: ['session_id', 'new_session_id'],
    fork_session_many: ['session_id', 'count'],
    load_artifact: ['session_id', 'artifact_id'],
    attach_dataset: ['session_id', 'name'],
    snapshot_session: ['session_id'],
    list_snapshots: [],
    start_from_snapshot: ['snapshot', 'new_session_id'],
    delete_snapshot: ['snapshot'],
    start_run: ['session_id', 'code'],
    get_run: ['session_id', 'run_id'],
    run_command: ['session_id', 'command'],
    start_command: ['session_id', 'command'],
    get_command: ['session_id', 'command_id'],
  };
  const outputs = {
    upload_file: ['path'],
    run_python: ['run_id', 'exit_code', 'stdout', 'stderr', 'results', 'artifacts', 'state_reset', 'state', 'metrics'],
    read_artifact: ['path', 'mime_type', 'content_base64'],
    close_session: ['status'],
    list_files: ['files', 'datasets'],
    fork_session: ['session_id', 'hibernated'],
    fork_session_many: ['sessions'],
    load_artifact: ['path', 'size_bytes'],
    attach_dataset: ['name', 'path', 'files'],
    snapshot_session: ['snapshot_id', 'names', 'session_id', 'expires_unix'],
    list_snapshots: ['snapshots'],
    start_from_snapshot: ['session_id', 'hibernated'],
    delete_snapshot: ['deleted'],
    start_run: ['run_id', 'session_id', 'state', 'started_at', 'events'],
    get_run: ['run_id', 'session_id', 'state', 'started_at', 'events'],
    run_command: ['session_id', 'exit_code', 'stdout', 'stderr', 'duration_us'],
    start_command: ['command_id', 'session_id', 'state', 'command', 'started_at', 'events'],
    get_command: ['command_id', 'session_id', 'state', 'command', 'started_at', 'events'],
  };
  await using([await connect(transport, key)], async (_client, listedTools) => {
    const listed = Object.fromEntries(listedTools.map((t) => [t.name, t]));
    assert(sameSet(Object.keys(listed), TOOLS), () => `tools listed: ${Object.keys(listed)}`);
    for (const [name, tool] of Object.entries(listed)) {
      const schema = tool.inputSchema;
      assert(schema.type === 'object', () => `${name}: input schema ${show(schema)}`);
      assert(sameSet(schema.required ?? [], required[name]), () => `${name}: required ${schema.required}`);
      assert(schema.additionalProperties === false, `${name}: unknown arguments must be refused`);
      const out = tool.outputSchema;
      assert(out && out.type === 'object', () => `${name}: output schema ${show(out)}`);
      const properties = Object.keys(out.properties ?? {});
      assert(outputs[name].every((p) => properties.includes(p)), () => `${name}: output properties ${properties}`);
      assert(tool.description && tool.description.length > 60, () => `${name}: description ${tool.description}`);
    }
    assert('limits' in listed.run_python.inputSchema.properties, 'run_python takes limits');
    // tests/mcp_clients.rs starts every server with limits unlike the
    // defaults; the descriptions state those, not the defaults.
    const upload = listed.upload_file.description;
    assert(upload.includes('7 MiB per file') && !upload.includes('100 MiB'), upload);
    const read = listed.read_artifact.description;
    assert(read.includes('read cap (1 KiB)') && !read.includes('5 MiB'), read);
    const run = listed.run_python.description;
    assert(run.includes('python: 7 s wall clock') && !run.includes('python: 5 s'), run);
    assert(listed.list_files.description.includes('/data') && run.includes('/data'), 'a model is told where datasets are');
    assert(listed.read_artifact.annotations?.readOnlyHint === true, 'read_artifact is read-only');
    assert(listed.close_session.annotations?.destructiveHint === true, 'close_session is destructive');
  });
}

/** upload -> run -> artifacts -> read_artifact -> download_url -> close. */
async function flow(transport, key) {
  const session = `flow-${transport[0]}`;
  const csv = Buffer.from('city,sales\nOslo,3\nLima,5\nOslo,4\n');
  await using([await connect(transport, key)], async (client) => {
    const uploaded = ok(await call(client, 'upload_file', { session_id: session, filename: 'sales.csv', content_base64: b64(csv) }), 'upload_file');
    assert(uploaded.path === '/mnt/data/sales.csv', () => show(uploaded));

    const png = tinyPng();
    const code = [
      'import csv, base64',
      'totals = {}',
      "for row in csv.DictReader(open('/mnt/data/sales.csv')):",
      "    totals[row['city']] = totals.get(row['city'], 0) + int(row['sales'])",
      `open('/mnt/data/chart.png', 'wb').write(base64.b64decode('${b64(png)}'))`,
      "open('/mnt/data/report.txt', 'w').write(repr(sorted(totals.items())))",
      "print(totals['Oslo'])",
      '',
    ].join('\n');
    const report = ok(await call(client, 'run_python', { session_id: session, code }), 'run_python');
    assert(report.exit_code === 0 && report.error === null, () => show(report));
    assert(report.stdout.trim() === '7', report.stdout);
    const byName = Object.fromEntries(report.artifacts.map((a) => [a.filename, a]));
    assert(sameSet(Object.keys(byName), ['chart.png', 'report.txt']), () => Object.keys(byName));
    const chart = byName['chart.png'];
    assert(chart.mime_type === 'image/png' && chart.size_bytes === png.length, () => show(chart));
    assert(chart.sha256 === createHash('sha256').update(png).digest('hex'), () => show(chart));

    const read = await call(client, 'read_artifact', { session_id: session, path: '/mnt/data/chart.png' });
    const content = ok(read, 'read_artifact');
    assert(content.mime_type === 'image/png', () => show(content));
    assert(unb64(content.content_base64).equals(png), 'read_artifact gives the PNG back');
    const images = imagesOf(read);
    assert(images.length === 1 && images[0].mimeType === 'image/png', () => show(read.content));
    assert(unb64(images[0].data).equals(png), 'the image content is the PNG');

    const text = ok(await call(client, 'read_artifact', { session_id: session, path: 'report.txt' }), 'read_artifact');
    assert(unb64(text.content_base64).toString() === "[('Lima', 5), ('Oslo', 7)]", () => show(text));
    assert(text.mime_type.startsWith('text/plain'), () => show(text));

    const downloaded = await download(chart.download_url);
    assert(downloaded.status === 200, () => `download: ${downloaded.status}`);
    assert(downloaded.body.equals(png), 'the download is the PNG');

    const files = ok(await call(client, 'list_files', { session_id: session }), 'list_files');
    assert(sameSet(files.files.map((f) => f.filename), ['chart.png', 'report.txt', 'sales.csv']), () => show(files));

    const closed = ok(await call(client, 'close_session', { session_id: session }), 'close_session');
    assert(sameSet(Object.keys(closed), ['status']) && closed.status === 'closed', () => show(closed));
    toolError(await call(client, 'list_files', { session_id: session }), 'list_files', 'no_such_session');

    // The artifact outlives its session: back into a new one by id.
    const revised = `${session}-revised`;
    const loaded = ok(await call(client, 'load_artifact', { session_id: revised, artifact_id: byName['report.txt'].id, filename: 'draft.txt' }), 'load_artifact');
    assert(loaded.path === '/mnt/data/draft.txt', () => show(loaded));
    const again = ok(await call(client, 'run_python', { session_id: revised, code: "print(open('draft.txt').read())" }), 'run_python');
    assert(again.stdout.trim() === "[('Lima', 5), ('Oslo', 7)]", () => show(again));
    toolError(await call(client, 'load_artifact', { session_id: revised, artifact_id: '0'.repeat(32) }), 'load_artifact', 'no_such_artifact');
    ok(await call(client, 'close_session', { session_id: revised }), 'close_session');
  });
}

/** A session created on python-data by upload_file: pandas and matplotlib
 * run, the chart comes back as an image; the session keeps its runtime. */
async function data_runtime(transport, key) {
  const session = `data-${transport[0]}`;
  const csv = Buffer.from('city,sales\nOslo,3\nLima,5\nOslo,4\n');
  await using([await connect(transport, key)], async (client, listedTools) => {
    for (const tool of listedTools.filter((t) => t.name === 'upload_file' || t.name === 'run_python')) {
      const runtime = tool.inputSchema.properties.runtime;
      assert(JSON.stringify(runtime).includes('python-data'), () => `${tool.name}: ${show(runtime)}`);
    }
    ok(await call(client, 'upload_file', { session_id: session, filename: 'sales.csv', runtime: 'python-data', content_base64: b64(csv) }), 'upload_file');
    const code = [
      'import pandas as pd, matplotlib.pyplot as plt',
      "df = pd.read_csv('sales.csv')",
      "totals = df.groupby('city').sales.sum()",
      "totals.plot.bar(figsize=(0.4, 0.4)).figure.savefig('totals.png', dpi=20)  # under the 1 KiB read cap",
      'print(totals.to_dict())',
      '',
    ].join('\n');
    const report = ok(await call(client, 'run_python', { session_id: session, code }), 'run_python');
    assert(report.exit_code === 0, () => show(report));
    assert(report.stdout.trim() === "{'Lima': 5, 'Oslo': 7}", report.stdout);
    assert(sameSet(report.artifacts.map((a) => a.filename), ['totals.png']), () => show(report.artifacts));
    const read = await call(client, 'read_artifact', { session_id: session, path: 'totals.png' });
    const images = imagesOf(read);
    assert(images.length === 1 && unb64(images[0].data).subarray(0, 8).equals(tinyPng().subarray(0, 8)), () => show(read.content));
    const again = ok(await call(client, 'run_python', { session_id: session, code: 'print(len(df))' }), 'run_python');
    assert(again.stdout.trim() === '3', () => show(again));
    toolError(await call(client, 'run_python', { session_id: session, code: '1', runtime: 'python' }), 'run_python', 'runtime_mismatch');
    const fresh = ok(await call(client, 'run_python', { session_id: `${session}-2`, runtime: 'python-data', code: 'import numpy\nprint(numpy.arange(5).sum())' }), 'run_python');
    assert(fresh.stdout.trim() === '10', () => show(fresh));
    // A session that names no runtime gets the default, python-data.
    const fallback = ok(await call(client, 'run_python', { session_id: `${session}-3`, code: 'import numpy\nprint(numpy.ones(3).sum())' }), 'run_python');
    assert(fallback.stdout.trim() === '3.0' && fallback.runtime === 'python-data', () => show(fallback));
    const plain = ok(await call(client, 'run_python', { session_id: `${session}-4`, runtime: 'python', code: 'import numpy' }), 'run_python');
    assert(plain.error?.kind === 'exception' && plain.traceback.includes('numpy'), () => show(plain));
    for (const name of [session, `${session}-2`, `${session}-3`, `${session}-4`]) ok(await call(client, 'close_session', { session_id: name }), 'close_session');
  });
}

/** run_python answers like a notebook: a table's text and HTML, a chart as
 * image content the model sees at once, and output as it happens through
 * progress notifications. */
async function notebook(transport, key) {
  const session = `notebook-${transport[0]}`;
  await using([await connect(transport, key)], async (client, listedTools) => {
    const schema = listedTools.find((t) => t.name === 'run_python').outputSchema;
    assert('results' in (schema.properties ?? {}), () => Object.keys(schema.properties ?? {}));
    const table = await call(client, 'run_python', {
      session_id: session,
      runtime: 'python-data',
      code: "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})\ndf.describe()",
    });
    let report = ok(table, 'run_python');
    assert(report.results.length === 1, () => show(report.results));
    const [result] = report.results;
    assert(result.type === 'text' && result.text.includes('mean'), () => show(result));
    assert(result.mime['text/html'].includes('<table'), () => Object.keys(result.mime));
    assert(table.content.some((b) => b.type === 'text' && b.text.includes('mean') && !b.text.startsWith('{')), () => show(table.content));

    const chart = await call(client, 'run_python', { session_id: session, code: 'import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()' });
    report = ok(chart, 'run_python');
    assert(sameSet(report.results.map((r) => r.type), ['image']), () => show(report.results));
    const images = imagesOf(chart);
    assert(images.length === 1 && images[0].mimeType === 'image/png', () => show(chart.content));
    assert(unb64(images[0].data).subarray(0, 8).equals(tinyPng().subarray(0, 8)), 'a PNG');
    // The report's text leaves the picture out: it is the image content.
    assert(!textOf(chart).includes(images[0].data), 'the PNG is sent twice');

    const heard = [];
    const onprogress = (p) => heard.push({ at: performance.now(), progress: p.progress, message: p.message });
    const code = "import time\nprint('first')\ntime.sleep(1)\nprint('second')\n'done'";
    const wire = wires.get(client);
    const before = wire.length;
    const ran = await call(client, 'run_python', { session_id: session, code }, { onprogress });
    const ended = performance.now();
    report = ok(ran, 'run_python');
    assert(report.stdout === 'first\nsecond\n', () => show(report));
    const first = heard.filter((h) => h.message?.includes('first'));
    assert(first.length > 0, () => `no progress notification carried the first line: ${show(heard)}`);
    assert(ended - first[0].at >= 700, () => `the first line came only with the end: ${show(heard)}`);
    // Every line and the value went out as progress before the answer, in order.
    const received = wire.slice(before);
    const answeredAt = received.findIndex((m) => m.id !== undefined && 'result' in m);
    assert(answeredAt >= 0, () => `no answer on the wire: ${show(received)}`);
    const progress = received.slice(0, answeredAt).filter((m) => m.method === 'notifications/progress').map((m) => m.params);
    const streamed = progress.map((p) => p.message).filter((m) => !m.startsWith('[')).join('');
    assert(streamed === 'first\nsecond\n', () => `output sent as progress before the answer: ${show(progress)}`);
    assert(progress.some((p) => p.message === "[result] 'done'"), () => `the value sent as progress: ${show(progress)}`);
    assert(!received.slice(answeredAt + 1).some((m) => m.method === 'notifications/progress'), () => `progress after the answer: ${show(received)}`);
    const values = progress.map((p) => p.progress);
    assert(values.every((v, i) => i === 0 || v > values[i - 1]), () => `progress must increase: ${values}`);
    assert(heard.every((h) => progress.some((p) => p.progress === h.progress && p.message === h.message)), () => show(heard));
    ok(await call(client, 'close_session', { session_id: session }), 'close_session');
  });
}

/** Variables, imports and functions live across run_python calls. */
async function state(transport, key) {
  const session = `state-${transport[0]}`;
  await using([await connect(transport, key)], async (client) => {
    const run = async (sessionId, code) => ok(await call(client, 'run_python', { session_id: sessionId, code }), 'run_python');
    const first = await run(session, 'import math\nx = 41\ndef double(v):\n    return 2 * v\n');
    assert(first.exit_code === 0, () => show(first));
    const second = await run(session, 'print(x + 1, double(x), math.floor(2.5))');
    assert(second.stdout.trim() === '42 82 2', () => show(second));
    assert(second.state_reset === false, () => show(second));
    const failing = await run(session, '1/0');
    assert(failing.exit_code !== 0 && failing.error.kind === 'exception', () => show(failing));
    assert(failing.traceback.includes('ZeroDivisionError'), () => show(failing));
    const after = await run(session, 'print(x)');
    assert(after.stdout.trim() === '41' && after.state === 'kept', () => show(after));

    // A fork carries the live state; the two sessions then part.
    const fork = `${session}-fork`;
    const forked = ok(await call(client, 'fork_session', { session_id: session, new_session_id: fork }), 'fork_session');
    assert(forked.session_id === fork && forked.hibernated === true, () => show(forked));
    const child = await run(fork, 'x = double(x)\nprint(x)');
    assert(child.stdout.trim() === '82' && child.state === 'resumed', () => show(child));
    const parent = await run(session, 'print(x)');
    assert(parent.stdout.trim() === '41', () => show(parent));
    toolError(await call(client, 'fork_session', { session_id: session, new_session_id: fork }), 'fork_session', 'session_exists');
    // Many children in one call, each with the parent's state and its own.
    const many = ok(await call(client, 'fork_session_many', { session_id: session, count: 3, prefix: `${session}-try` }), 'fork_session_many');
    assert(sameSet(many.sessions.map((s) => s.session_id), [1, 2, 3].map((i) => `${session}-try-${i}`)), () => show(many));
    for (const [i, branch] of many.sessions.entries()) {
      const ran = await run(branch.session_id, `x = x + ${i}\nprint(x)`);
      assert(ran.stdout.trim() === String(41 + i) && ran.state === 'resumed', () => show(ran));
      ok(await call(client, 'close_session', { session_id: branch.session_id }), 'close_session');
    }
    assert((await run(session, 'print(x)')).stdout.trim() === '41', 'the parent kept its state');
    toolError(await call(client, 'fork_session_many', { session_id: session, count: 0 }), 'fork_session_many', 'invalid_request');
    ok(await call(client, 'close_session', { session_id: fork }), 'close_session');
    ok(await call(client, 'close_session', { session_id: session }), 'close_session');
  });
}

/** Bad input is a tool error the model can read, never a protocol failure. */
async function errors(transport, key) {
  const session = `errors-${transport[0]}`;
  await using([await connect(transport, key)], async (client) => {
    for (const name of ['../etc/passwd', '/etc/passwd', 'sub/../../x', '..', '']) {
      toolError(await call(client, 'upload_file', { session_id: session, filename: name, content_base64: 'aGk=' }), 'upload_file', 'invalid_name');
    }
    // A refused upload creates nothing, not even the session.
    toolError(await call(client, 'read_artifact', { session_id: session, path: '../../etc/passwd' }), 'read_artifact', 'no_such_session');
    toolError(await call(client, 'list_files', { session_id: 'never-made' }), 'list_files', 'no_such_session');
    toolError(await call(client, 'close_session', { session_id: 'never-made' }), 'close_session', 'no_such_session');
    toolError(await call(client, 'run_python', { session_id: 'a/b', code: '1' }), 'run_python', 'invalid_name');
    toolError(await call(client, 'run_python', { session_id: session }), 'run_python', 'invalid_arguments');
    toolError(await call(client, 'run_python', { session_id: session, code: '1', limits: { fuel: 'lots' } }), 'run_python', 'invalid_arguments');
    toolError(await call(client, 'upload_file', { session_id: session, filename: 'a.txt', content_base64: 'not base64!' }), 'upload_file', 'invalid_base64');

    ok(await call(client, 'upload_file', { session_id: session, filename: 'a.txt', content_base64: 'aGk=' }), 'upload_file');
    toolError(await call(client, 'upload_file', { session_id: session, filename: 'a.txt', content_base64: 'aGk=' }), 'upload_file', 'file_exists');
    toolError(await call(client, 'read_artifact', { session_id: session, path: '../../etc/passwd' }), 'read_artifact', 'invalid_name');

    // Over the read cap (the server runs with 1 KiB): the error names a link that works.
    const big = Buffer.concat(Array.from({ length: 16 }, () => Buffer.from(Array.from({ length: 256 }, (_, i) => i))));
    ok(await call(client, 'run_python', { session_id: session, code: "open('/mnt/data/big.bin', 'wb').write(bytes(range(256)) * 16)" }), 'run_python');
    const message = toolError(await call(client, 'read_artifact', { session_id: session, path: 'big.bin' }), 'read_artifact', 'over_read_cap');
    const url = message.split(/\s+/).find((word) => word.startsWith('http'));
    assert(url, () => `no link in ${message}`);
    const downloaded = await download(url);
    assert(downloaded.status === 200 && downloaded.body.equals(big), () => `download: ${downloaded.status}`);

    // A tool the server does not have: the client reports it, the connection lives on.
    let unknown;
    try {
      unknown = await call(client, 'rm_rf', {});
    } catch (e) {
      unknown = { isError: true, thrown: String(e) };
    }
    assert(unknown.isError === true, () => `an unknown tool: ${show(unknown)}`);
    ok(await call(client, 'list_files', { session_id: session }), 'list_files');
    ok(await call(client, 'close_session', { session_id: session }), 'close_session');
  });
}

/** Two tenants using the same session_id never meet. */
async function tenants(transport, key, other) {
  const session = 'shared';
  await using([await connect(transport, key), await connect(transport, other)], async (alice, bob) => {
    ok(await call(alice, 'upload_file', { session_id: session, filename: 'secret.txt', content_base64: b64('alice only') }), 'upload_file');
    ok(await call(alice, 'run_python', { session_id: session, code: "token = 'alice-state'" }), 'run_python');

    toolError(await call(bob, 'list_files', { session_id: session }), 'list_files', 'no_such_session');
    toolError(await call(bob, 'read_artifact', { session_id: session, path: 'secret.txt' }), 'read_artifact', 'no_such_session');
    const seen = ok(await call(bob, 'run_python', { session_id: session, code: "import os\nprint(sorted(os.listdir('/mnt/data')), 'token' in globals())" }), 'run_python');
    assert(seen.stdout.trim() === '[] False', () => show(seen));
    toolError(await call(bob, 'read_artifact', { session_id: session, path: 'secret.txt' }), 'read_artifact', 'no_such_file');
    ok(await call(bob, 'close_session', { session_id: session }), 'close_session');

    const still = ok(await call(alice, 'run_python', { session_id: session, code: "print(open('/mnt/data/secret.txt').read(), token)" }), 'run_python');
    assert(still.stdout.trim() === 'alice only alice-state', () => show(still));
    ok(await call(alice, 'close_session', { session_id: session }), 'close_session');
  });
}

/** One POST of `body` with exactly `headers`, on a connection of its own
 * (node:http, since fetch may not set Host or Connection). */
function post(url, body, headers) {
  const target = new URL(url);
  const payload = Buffer.from(JSON.stringify(body));
  const options = {
    hostname: target.hostname,
    port: target.port,
    path: target.pathname,
    method: 'POST',
    agent: false,
    headers: { 'content-type': 'application/json', 'content-length': payload.length, connection: 'close', ...headers },
  };
  return new Promise((resolve, reject) => {
    const request = http.request(options, (response) => {
      const chunks = [];
      response.on('data', (c) => chunks.push(c));
      response.on('end', () => resolve({ status: response.statusCode, text: Buffer.concat(chunks).toString() }));
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(payload);
  });
}

/** Without a key the transport answers 401 before any JSON-RPC, and the
 * real client cannot connect; a foreign Host header is refused too. */
async function unauthorized(transport, key) {
  const url = transport[1];
  const initialize = {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'probe', version: '0' } },
  };
  const accept = { accept: 'application/json, text/event-stream' };
  const refused = await post(url, initialize, accept);
  assert(refused.status === 401, () => `no key: ${refused.status}`);
  assert(JSON.parse(refused.text).error.code === 'unauthorized', refused.text);
  const wrong = await post(url, initialize, { ...accept, 'x-api-key': 'key-mallory' });
  assert(wrong.status === 401, () => `a wrong key: ${wrong.status}`);
  const rebound = await post(url, initialize, { ...accept, 'x-api-key': key, host: 'evil.example' });
  assert(rebound.status === 400 || rebound.status === 403, () => `a foreign Host got ${rebound.status}`);
  const allowed = await post(url, initialize, { ...accept, 'x-api-key': key });
  assert(allowed.status === 200, () => `the key: ${allowed.status} ${allowed.text}`);
  let listed;
  try {
    listed = await connect(transport, undefined);
  } catch (e) {
    // The SDK's error for a refused transport names the status.
    assert(String(e).includes('401') || e.code === 401, () => `refused, but not as unauthorized: ${e}`);
    return;
  }
  await listed.client.close();
  throw new Error(`the client listed ${listed.tools.length} tools without a key`);
}

/** A mounted dataset (tests/mcp_clients.rs mounts `census`) is named by
 * list_files and read at /data, never written; over HTTP a dataset staged
 * with PUT /v1/datasets is attached with attach_dataset. */
async function datasets(transport, key) {
  const session = `datasets-${transport[0]}`;
  await using([await connect(transport, key)], async (client) => {
    const code = [
      'import csv, errno',
      "rows = list(csv.DictReader(open('/data/census/people.csv')))",
      'try:',
      "    open('/data/census/people.csv', 'a').write('x')",
      'except OSError as e:',
      '    print(errno.errorcode[e.errno])',
      'print(len(rows))',
      '',
    ].join('\n');
    const report = ok(await call(client, 'run_python', { session_id: session, code }), 'run_python');
    assert(report.stdout === 'EROFS\n3\n', () => show(report));
    const files = ok(await call(client, 'list_files', { session_id: session }), 'list_files');
    assert(sameSet(files.datasets.map((d) => d.path), ['/data/census']), () => show(files));
    toolError(await call(client, 'attach_dataset', { session_id: session, name: 'nope' }), 'attach_dataset', 'no_such_dataset');
    if (transport[0] !== 'http') return;
    const base = transport[1].slice(0, transport[1].lastIndexOf('/mcp'));
    const staged = await fetch(`${base}/v1/datasets/prices.csv`, { method: 'PUT', headers: { 'x-api-key': key }, body: 'item,price\ntea,3\n' });
    const stagedBody = await staged.json();
    assert(staged.status === 201, () => `staging: ${staged.status} ${show(stagedBody)}`);
    const attached = ok(await call(client, 'attach_dataset', { session_id: session, name: 'prices.csv' }), 'attach_dataset');
    assert(attached.path === '/data/prices.csv' && attached.sha256 === stagedBody.sha256, () => show(attached));
    const again = ok(await call(client, 'run_python', { session_id: session, code: "print(open('/data/prices.csv').read().split()[1])" }), 'run_python');
    assert(again.stdout === 'tea,3\n', () => show(again));
  });
}

/** run_command beside run_python: the same files, the Python state untouched. */
async function commands(transport, key) {
  const session = `commands-${transport[0]}`;
  await using([await connect(transport, key)], async (client) => {
    ok(await call(client, 'run_python', { session_id: session, code: "kept = 5\nopen('data.txt', 'w').write('b\\na\\nc\\n')" }), 'run_python');
    const sorted = ok(await call(client, 'run_command', { session_id: session, command: 'sort data.txt | head -2; echo $GREETING', env: { GREETING: 'hi' } }), 'run_command');
    assert(sorted.exit_code === 0 && sorted.stdout === 'a\nb\nhi\n', () => show(sorted));
    const missing = ok(await call(client, 'run_command', { session_id: session, command: 'no-such-program' }), 'run_command');
    assert(missing.exit_code === 127 && missing.stderr.includes('not found'), () => show(missing));
    const again = ok(await call(client, 'run_python', { session_id: session, code: 'print(kept)' }), 'run_python');
    assert(again.stdout === '5\n', () => show(again));
    toolError(await call(client, 'run_command', { session_id: session, command: ' ' }), 'run_command', 'invalid_request');
  });
}

// A session made with runtime `javascript`: declarations persist, the last
// value is a result, an error is the cell's; the session keeps its runtime.
async function javascript(transport, key) {
  const session = `js-${transport[0]}`;
  await using([await connect(transport, key)], async (client, listedTools) => {
    const run = listedTools.find((t) => t.name === 'run_python');
    assert(JSON.stringify(run.inputSchema.properties.runtime).includes('javascript'), () => show(run.inputSchema.properties.runtime));
    const first = ok(await call(client, 'run_python', { session_id: session, runtime: 'javascript', code: "let hits = 41; console.log('counted'); hits" }), 'run_python');
    assert(first.stdout === 'counted\n' && first.results[0].text === '41', () => show(first));
    const again = ok(await call(client, 'run_python', { session_id: session, code: 'hits += 1; ({ hits })' }), 'run_python');
    assert(again.results[0].text === '{ hits: 42 }' && JSON.parse(again.results[0].mime['application/json']).hits === 42, () => show(again));
    const failed = ok(await call(client, 'run_python', { session_id: session, code: 'hits.toFixed(-1)' }), 'run_python');
    assert(failed.error.kind === 'exception' && failed.error.type_name === 'RangeError', () => show(failed));
    toolError(await call(client, 'run_python', { session_id: session, code: '1', runtime: 'python' }), 'run_python', 'runtime_mismatch');
    ok(await call(client, 'close_session', { session_id: session }), 'close_session');
  });
}

const SCENARIOS = { tools, flow, commands, data_runtime, javascript, notebook, state, errors, tenants, unauthorized, datasets };

const [scenarioName, ...rest] = process.argv.slice(2);
const scenario = SCENARIOS[scenarioName];
if (!scenario || !['http', 'stdio'].includes(rest[0])) {
  console.error(`usage: mcp_ts_checks.mjs {${Object.keys(SCENARIOS).join('|')}} {http URL KEY [OTHER_KEY] | stdio COMMAND [ARG ...]}`);
  process.exit(2);
}
const [transport, key, other] = rest[0] === 'http' ? [rest.slice(0, 2), rest[2], rest[3]] : [rest, undefined, undefined];
try {
  await scenario(transport, key, other);
  console.log(`${scenarioName} over ${transport[0]}: ok`);
  // Idle keep-alive sockets of fetch would hold the process a few seconds.
  process.exit(0);
} catch (e) {
  console.error(`${scenarioName} over ${transport[0]} failed:`, e);
  process.exit(1);
}
