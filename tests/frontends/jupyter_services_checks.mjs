// JupyterLab's own client code (`@jupyterlab/services`, from tests/frontends'
// lockfile) through `jupyter server --gateway-url` to anypath's kernels:
// what a JupyterLab page does when its server runs every kernel on anypath.
//
// Usage: node tests/frontends/jupyter_services_checks.mjs SERVER_URL SERVER_TOKEN ANYPATH_URL ANYPATH_TOKEN
//
// Every check runs in order on one kernel; each prints `PASS name` or
// `FAIL name` with its error, and the exit status is 1 when any failed.

import WebSocket from 'ws';
import { KernelManager, ServerConnection } from '@jupyterlab/services';

const [serverUrl, serverToken, anypathUrl, anypathToken] = process.argv.slice(2);
const serverSettings = ServerConnection.makeSettings({
  baseUrl: serverUrl,
  wsUrl: serverUrl.replace(/^http/, 'ws'),
  token: serverToken,
  appendToken: true,
  WebSocket,
});

const checks = [];
const check = (name, run) => checks.push([name, run]);
const assert = (condition, message) => {
  if (!condition) throw new Error(`assertion failed: ${message}`);
};
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const manager = new KernelManager({ serverSettings });
let kernel;

// Runs `code`, collecting its iopub messages until the reply and idle.
const execute = async (code) => {
  const iopub = [];
  const future = kernel.requestExecute({ code, stop_on_error: true });
  future.onIOPub = (msg) => iopub.push(msg);
  const reply = await future.done;
  const of = (type) => iopub.filter((m) => m.header.msg_type === type);
  return { reply: reply.content, iopub, of };
};

const anypathKernels = async () => {
  const response = await fetch(`${anypathUrl}/api/kernels`, { headers: { Authorization: `token ${anypathToken}` } });
  assert(response.ok, `anypath's kernel list: ${response.status}`);
  return (await response.json()).map((k) => k.id);
};

check('start_a_kernel_visible_on_anypath', async () => {
  await manager.ready;
  kernel = await manager.startNew({ name: 'python3' });
  const info = await kernel.info;
  assert(info.protocol_version === '5.3', `protocol ${info.protocol_version}`);
  assert(info.language_info.name === 'python', 'a python kernel');
  assert((await anypathKernels()).includes(kernel.id), `kernel ${kernel.id} runs on anypath`);
});

check('print_streams', async () => {
  const ran = await execute('print("hello from anypath")');
  assert(ran.reply.status === 'ok', JSON.stringify(ran.reply));
  const text = ran.of('stream').map((m) => m.content.text).join('');
  assert(text === 'hello from anypath\n', `stream: ${JSON.stringify(text)}`);
});

check('dataframe_is_the_execute_result', async () => {
  const ran = await execute('import pandas as pd\ndf = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})\ndf');
  const [result] = ran.of('execute_result');
  assert(result, 'an execute_result');
  assert(result.content.data['text/html'].includes('<table'), 'an HTML table');
  assert(result.content.data['text/plain'].includes('a  b'), `text/plain: ${result.content.data['text/plain']}`);
  assert(result.content.execution_count === ran.reply.execution_count, 'the count of the cell');
});

check('figure_is_display_data', async () => {
  const ran = await execute('import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()');
  const [shown] = ran.of('display_data');
  assert(shown, 'a display_data');
  const png = Buffer.from(shown.content.data['image/png'], 'base64');
  assert(png.subarray(1, 4).toString() === 'PNG', 'a PNG image');
});

check('error_has_name_value_traceback', async () => {
  const ran = await execute('def f():\n    return 1 / 0\nf()');
  assert(ran.reply.status === 'error' && ran.reply.ename === 'ZeroDivisionError', JSON.stringify(ran.reply));
  const [error] = ran.of('error');
  assert(error && error.content.traceback.some((line) => line.includes('return 1 / 0')), 'the traceback shows the line');
});

check('interrupt_keeps_state', async () => {
  assert((await execute('kept = 41')).reply.status === 'ok', 'defined');
  const looping = execute('while True:\n    pass');
  await sleep(500);
  const asked = Date.now();
  await kernel.interrupt();
  const ran = await looping;
  // Far below the run's time limit: the interrupt ended it, not the deadline.
  assert(Date.now() - asked < 5000, `ended ${Date.now() - asked} ms after the interrupt`);
  assert(ran.reply.status === 'error' && ran.reply.ename === 'KeyboardInterrupt', JSON.stringify(ran.reply));
  const after = await execute('kept + 1');
  assert(after.of('execute_result')[0]?.content.data['text/plain'] === '42', `state after the interrupt: ${JSON.stringify(after.reply)}`);
});

check('restart_clears_state', async () => {
  await kernel.restart();
  const ran = await execute('kept');
  assert(ran.reply.status === 'error' && ran.reply.ename === 'NameError', JSON.stringify(ran.reply));
});

check('shut_down', async () => {
  const id = kernel.id;
  await kernel.shutdown();
  assert(!(await anypathKernels()).includes(id), 'the kernel is gone from anypath');
});

let failed = 0;
for (const [name, run] of checks) {
  try {
    await run();
    console.log(`PASS ${name}`);
  } catch (error) {
    failed += 1;
    console.log(`FAIL ${name}: ${error.stack || error}`);
  }
}
manager.dispose();
process.exit(failed ? 1 : 0);
