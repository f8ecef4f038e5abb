"""Runs one code-interpreter cell in the data runtime and reports it to the host.

The cell itself runs exactly as in the default runtime (`cell.run`: the
session's shared globals, the working directory /mnt/data, the run's
environment, captured and capped output, the cell's own traceback). The
result goes to the host as one JSON line on file descriptor 1, after a marker,
written last so that whatever the code wrote to the descriptor directly comes
before it (and, when the run streams, every live frame).
"""

import json
import os
import struct
import sys

import cell

MARKER = b"\x1eanypath-cell-report "
# The request's seven numbers (`cell_request` in `reactor.rs`).
HEAD_BYTES = struct.calcsize("<7I")


def report_pending():
    """Runs the cell whose request the host put on stdin (`cell_request` in
    `reactor.rs` says how it is laid out) and reports it. The turn's
    own source stays this one call: CPython compiles a turn's source, and a
    cell's code and settings written into it would be compiled too."""
    head = _read_exactly(HEAD_BYTES)
    stdout_limit, stderr_limit, result_limit, live, forms_len, env_len, code_len = struct.unpack("<7I", head)
    request = _read_exactly(forms_len + env_len + code_len)
    forms = request[:forms_len].decode("utf-8").split("\0") if forms_len else []
    names_and_values = iter(request[forms_len:forms_len + env_len].decode("utf-8").split("\0") if env_len else ())
    env = dict(zip(names_and_values, names_and_values))
    code = request[forms_len + env_len:].decode("utf-8")
    report(code, env, stdout_limit, stderr_limit, result_limit, forms, bool(live))


def _read_exactly(size):
    """`size` bytes of stdin, read into buffers no larger than what is left:
    a larger one would touch fresh pages of the instance's memory."""
    chunks = []
    while size > 0:
        chunk = os.read(0, size)
        if not chunk:
            raise EOFError(f"the run's request ended {size} bytes short")
        chunks.append(chunk)
        size -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)  # b"" for no bytes at all


def report(code, env, stdout_limit, stderr_limit, result_limit, figure_formats, live):
    stdout, stderr, error, results = cell.run(code, env, stdout_limit, stderr_limit, result_limit, figure_formats, live)
    result = {
        "results": results,
        "stdout": stdout.getvalue(),
        "stdout_truncated": stdout.truncated,
        "stderr": stderr.getvalue(),
        "stderr_truncated": stderr.truncated,
        "error": None if error is None else {
            "type_name": error[0],
            "message": error[1],
            "traceback": error[2],
            "exit_code": error[3],
        },
    }
    data = memoryview(MARKER + json.dumps(result).encode("utf-8") + b"\n")
    while data:
        data = data[os.write(1, data):]


def instance_started():
    """Makes anew what instances started from one image must not share: the
    random generators' state (`random`, numpy's global generator) and
    `tempfile`'s name sequence, all seeded from the host's entropy."""
    import random
    import tempfile

    random.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()
    tempfile._name_sequence = None
