// What the E2B SDK check scripts share: a registry of named checks, the
// sandboxes they made (killed when the checks end), and the runner that
// runs every check, failed or not, prints `PASS name` or `FAIL name` with
// its error, and exits 1 when any failed.

export const checks = [];
export const sandboxes = [];
export const check = (name, run) => checks.push([name, run]);
export const assert = (condition, message) => {
  if (!condition) throw new Error(`assertion failed: ${message}`);
};
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export async function runChecks() {
  let failed = 0;
  for (const [name, run] of checks) {
    try {
      await run();
      console.log(`PASS ${name}`);
    } catch (error) {
      failed += 1;
      console.log(`FAIL ${name}\n${error && error.stack ? error.stack : error}`);
    }
  }
  for (const created of sandboxes) {
    try {
      await created.kill();
    } catch {
      // already gone
    }
  }
  console.log(`${checks.length - failed} of ${checks.length} checks passed`);
  process.exit(failed ? 1 : 0);
}
