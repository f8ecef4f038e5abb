"""What the SDK check scripts share: a registry of named checks, the
sandboxes they made (killed when the checks end), and the runner that runs
every check, failed or not, prints `PASS name` or `FAIL name` with its
traceback, and exits 1 when any failed.
"""

import sys
import traceback

CHECKS = {}
SANDBOXES = []


def check(function):
    """Registers `function` as a check named after it."""
    CHECKS[function.__name__] = function
    return function


def run_checks(wanted):
    """Runs the checks named in `wanted` (all when empty), then kills every
    sandbox in SANDBOXES and exits with the verdict."""
    wanted = wanted or list(CHECKS)
    failed = []
    for name in wanted:
        try:
            CHECKS[name]()
            print(f"PASS {name}", flush=True)
        except Exception:
            failed.append(name)
            print(f"FAIL {name}\n{traceback.format_exc()}", flush=True)
    for created in SANDBOXES:
        try:
            created.kill()
        except Exception:
            pass
    print(f"{len(wanted) - len(failed)} of {len(wanted)} checks passed", flush=True)
    sys.exit(1 if failed else 0)
