# The agent's run_tests tool, sent as one cell to the session (a sandbox has
# no processes, so pytest runs in-process). Runs the session's tests with
# pytest where the runtime ships it, else with unittest, and prints one
# summary line of counts first, then the runner's report, bounded.
#
# Layout: code in src/ (or at the top), tests in tests/ (or at the top);
# both the session directory and src/ are importable, so a test may write
# `from app import add` or `from src.app import add`.
def _anypath_run_tests():
    import io, os, shutil, sys

    session = os.path.realpath('.')
    here = session + os.sep
    # Modules loaded from the session directory (and their bytecode) are
    # forgotten, so the tests see the files as they are now. Only absolute
    # paths count: the runtime's own modules have names like <anypath:cell>,
    # which a relative resolution would put in the session.
    for name, module in list(sys.modules.items()):
        path = getattr(module, '__file__', None)
        if isinstance(path, str) and os.path.isabs(path) and os.path.realpath(path).startswith(here):
            del sys.modules[name]
    sys.path_importer_cache.clear()
    sys.dont_write_bytecode = True
    for folder, dirs, _ in os.walk('.'):
        if '__pycache__' in dirs:
            shutil.rmtree(os.path.join(folder, '__pycache__'), ignore_errors=True)

    # A session module named like one of the runtime's own (the stdlib
    # runner's `app`, say) would be found in sys.modules instead of the
    # session's file: those are set aside for the run, as a fresh
    # interpreter would not have them.
    names = set()
    for folder in ('.', 'src'):
        if os.path.isdir(folder):
            names.update(entry[:-3] if entry.endswith('.py') else entry for entry in os.listdir(folder))
    shadowing = {name: sys.modules.pop(name) for name in names
                 if name in sys.modules and name not in sys.stdlib_module_names}

    report_limit = 6000
    saved = (list(sys.path), list(sys.meta_path), sys.stdout, sys.stderr)
    importable = [session] + [os.path.join(session, 'src')] * os.path.isdir('src')
    sys.path[:0] = [p for p in importable if p not in sys.path]
    out = io.StringIO()
    try:
        try:
            if '/usr/local/lib/site-packages' not in sys.path and os.path.isdir('/usr/local/lib/site-packages'):
                sys.path.append('/usr/local/lib/site-packages')
            import pytest
        except Exception:
            pytest = None
        sys.stdout = sys.stderr = out
        if pytest is not None:
            runner = f'pytest {pytest.__version__}'
            counts = _anypath_pytest(pytest, session)
        else:
            runner = 'unittest (pytest is not installed in this runtime)'
            counts = _anypath_unittest(out)
    finally:
        sys.path[:], sys.meta_path[:], sys.stdout, sys.stderr = saved
        sys.modules.update(shadowing)
    passed, failed, errors, skipped = counts
    verdict = 'OK' if failed == errors == 0 and passed else 'FAILED' if failed or errors else 'NO TESTS RAN'
    print(f'{verdict}: {passed} passed, {failed} failed, {errors} errors, {skipped} skipped ({runner})')
    report = out.getvalue()
    if len(report) > report_limit:
        head, tail = report[: report_limit * 2 // 3], report[-report_limit // 3:]
        report = f'{head}\n[... {len(report) - len(head) - len(tail)} characters not shown ...]\n{tail}'
    print(report.rstrip())
    # No test run is no test passed: the run fails as pytest does when it
    # collects nothing (exit 5). A failed test stays a report to read.
    if verdict == 'NO TESTS RAN':
        print('No tests were found: test files are named test_*.py (or *_test.py), with test_ functions or unittest TestCase classes.')
        raise SystemExit(5)


def _anypath_pytest(pytest, session):
    import os, tempfile

    class Counts:
        stats = {}

        def pytest_terminal_summary(self, terminalreporter):
            Counts.stats = {key: len(value) for key, value in terminalreporter.stats.items() if key}

    # No plugin that needs a subprocess, duplicated file descriptors or a
    # cache directory; the sandbox has no /dev/null for the logging plugin's
    # default file, so its log goes to the temporary directory.
    log_file = os.path.join(tempfile.gettempdir(), 'anypath-run-tests.log')
    arguments = ['-p', 'no:cacheprovider', '-p', 'no:faulthandler', '-p', 'no:pastebin',
                 '--capture=sys', '--color=no', '--tb=short', '-q', '-rfE', '--rootdir', session,
                 '--continue-on-collection-errors',
                 '-o', f'log_file={log_file}']
    pytest.main(arguments, plugins=[Counts()])
    stats = Counts.stats
    return (stats.get('passed', 0), stats.get('failed', 0), stats.get('error', 0),
            stats.get('skipped', 0) + stats.get('xfailed', 0))


def _anypath_unittest(out):
    # What pytest would collect, run by unittest: each test_*.py or
    # *_test.py file (hidden folders and __pycache__ skipped), imported from
    # its own folder; its TestCase classes and its test_* functions (plain
    # asserts) are the tests.
    import importlib, os, sys, unittest

    loader = unittest.defaultTestLoader
    suite = unittest.TestSuite()
    for folder, dirs, files in os.walk('.'):
        dirs[:] = sorted(d for d in dirs if not d.startswith('.') and d != '__pycache__')
        for name in sorted(files):
            if not name.endswith('.py') or not (name.startswith('test_') or name.endswith('_test.py')):
                continue
            sys.path.insert(0, os.path.realpath(folder))
            try:
                module = importlib.import_module(name[:-3])
            except Exception as error:
                def failed_import(error=error):
                    raise error
                failed_import.__name__ = f'import {name}'
                suite.addTest(unittest.FunctionTestCase(failed_import, description=f'{name} (import)'))
                continue
            finally:
                sys.path.pop(0)
            suite.addTests(loader.loadTestsFromModule(module))
            for attribute, value in sorted(vars(module).items()):
                if attribute.startswith('test') and callable(value) and not isinstance(value, type) and getattr(value, '__module__', None) == module.__name__:
                    suite.addTest(unittest.FunctionTestCase(value, description=f'{name}::{attribute}'))
    result = unittest.TextTestRunner(stream=out, verbosity=2).run(suite)
    skipped = len(result.skipped) + len(result.expectedFailures)
    failed = len(result.failures) + len(result.unexpectedSuccesses)
    passed = result.testsRun - failed - len(result.errors) - skipped
    return (passed, failed, len(result.errors), skipped)


try:
    _anypath_run_tests()
finally:
    del _anypath_run_tests, _anypath_pytest, _anypath_unittest
