"""`pip` in the sandbox's shell: installs pure-Python wheels from the
operator's wheelhouse (read-only at /wheelhouse) into the session's user
site, with no network.

pip itself is not used: it starts too slowly for a command that should
take milliseconds, and the standard-library runner carries only the
modules its build imports. Two of the libraries pip is built on do the
work instead: `packaging` reads requirements, versions, markers and wheel
names, and `installer` unpacks a wheel (its RECORD checked) into a
site-packages. Dependencies are resolved greedily: the newest version in
the wheelhouse that every requirement met so far allows.

The host runs `main` as the program of `pip`, `pip3` and `python -m pip`,
in a fresh instance of the session's runtime on the session's tree, with
`sys.argv` (`pip` and its arguments). Both runtimes carry this module
already imported (the standard-library runner builds it in, the data
runtime's pre-initialised image loads it), so a command compiles nothing.
Importing it changes nothing; what it prints is pip's own wording where pip
has one.
"""

import email.parser
import os
import shutil
import sys

from packaging.markers import default_environment  # noqa: E402
from packaging.requirements import InvalidRequirement, Requirement  # noqa: E402
from packaging.specifiers import SpecifierSet  # noqa: E402
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename  # noqa: E402
from packaging.version import InvalidVersion, Version  # noqa: E402

# The data runtime keeps `installer` beside its standard library, off
# `sys.path`; the standard-library runner has it built in.
RUNTIME_SITE = "/usr/local/lib/site-packages"
WHEELHOUSE = "/wheelhouse"
HOME = "/mnt/data/.local"
USER_SITE = "%s/lib/python%d.%d/site-packages" % (HOME, *sys.version_info[:2])
PYTHON = "%d.%d.%d" % sys.version_info[:3]
USAGE = """
Usage:
  pip install [options] <requirement specifier> ...
  pip install [options] -r <requirements file> ...
  pip uninstall [options] <package> ...
  pip list | pip freeze | pip show <package> ... | pip --version
"""
# Options that change nothing here: there is no index, cache or build.
IGNORED_FLAGS = {
    "--user", "--no-index", "--no-cache-dir", "--disable-pip-version-check", "--break-system-packages",
    "--no-build-isolation", "--no-warn-script-location", "--no-compile", "--prefer-binary", "--only-binary=:all:",
    "--no-input", "--isolated", "-v", "--verbose", "--pre",
}
IGNORED_WITH_VALUE = {"--root-user-action", "--progress-bar", "--only-binary", "--no-binary", "--cache-dir", "--timeout", "--retries"}
INDEX_OPTIONS = {"-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--trusted-host"}


class PipError(Exception):
    """A refusal: its message goes to stderr, the exit status is `status`."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


class Installed:
    """A distribution the session can import, and where it lives."""

    def __init__(self, name, version, location, dist_info=None):
        self.name, self.version, self.location, self.dist_info = name, version, location, dist_info

    @property
    def removable(self):
        """Only what pip put in the session's files may be replaced."""
        return self.dist_info is not None and self.location == USER_SITE


class Candidate:
    """A wheel in the wheelhouse (or named by path) that may be installed."""

    def __init__(self, path, name, version, tags):
        self.path, self.name, self.version, self.tags = path, name, version, tags
        self._metadata = None

    @property
    def pure(self):
        """Whether the wheel runs on any CPython 3 of this minor or older:
        no compiled code, no platform."""
        minor = sys.version_info[1]
        for tag in self.tags:
            if tag.abi != "none" or tag.platform != "any":
                continue
            interpreter = tag.interpreter
            if interpreter == "py3" or interpreter == "cp3%d" % minor:
                return True
            if interpreter.startswith("py3") and interpreter[3:].isdigit() and int(interpreter[3:]) <= minor:
                return True
        return False

    def metadata(self):
        if self._metadata is None:
            from installer.sources import WheelFile

            with WheelFile.open(self.path) as source:
                self._metadata = email.parser.HeaderParser().parsestr(source.read_dist_info("METADATA"))
        return self._metadata

    def requires(self, extras):
        """The requirements this wheel brings with `extras`, markers applied."""
        environment = default_environment()
        wanted = []
        for line in self.metadata().get_all("Requires-Dist") or []:
            requirement = Requirement(line)
            if requirement.marker is not None:
                if not any(requirement.marker.evaluate(dict(environment, extra=extra)) for extra in ("", *extras)):
                    continue
                requirement.marker = None
            wanted.append(requirement)
        return wanted

    def fits_python(self):
        needed = self.metadata().get("Requires-Python")
        return not needed or SpecifierSet(needed).contains(PYTHON, prereleases=True)


def say(quiet, *lines):
    if not quiet:
        for line in lines:
            print(line)


def wheelhouse():
    """Every wheel in the wheelhouse by canonical name; None when there is none."""
    if not os.path.isdir(WHEELHOUSE):
        return None
    found = {}
    for file in sorted(os.listdir(WHEELHOUSE)):
        if not file.endswith(".whl"):
            continue
        try:
            name, version, _build, tags = parse_wheel_filename(file)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        found.setdefault(canonicalize_name(name), []).append(Candidate(os.path.join(WHEELHOUSE, file), name, version, tags))
    return found


def installed_distributions():
    """Every distribution on `sys.path` with a `.dist-info` folder, by
    canonical name; the first on the path wins, as for imports."""
    found = {}
    parser = email.parser.HeaderParser()
    for folder in sys.path:
        if folder in ("", "/mnt/data", "/mnt/data/src"):
            continue  # the session's own files: modules, not distributions
        try:
            entries = sorted(os.listdir(folder or "."))
        except OSError:
            continue  # a zip or a folder not there yet
        for entry in entries:
            if not entry.endswith(".dist-info"):
                continue
            try:
                with open(os.path.join(folder, entry, "METADATA"), encoding="utf-8") as file:
                    metadata = parser.parse(file)
                name, version = metadata["Name"], Version(metadata["Version"])
            except (OSError, TypeError, InvalidVersion):
                continue
            found.setdefault(canonicalize_name(name), Installed(name, version, folder, os.path.join(folder, entry)))
    return found


def bundled_module(name):
    """A package the runtime carries with no `.dist-info` (in its standard
    library zip): found by its import name, its version from the module."""
    import importlib
    import importlib.util

    module_name = canonicalize_name(name).replace("-", "_")
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin in (None, "built-in", "frozen"):
        return None
    if spec.origin.startswith(USER_SITE) or spec.origin.startswith("/mnt/data/"):
        return None  # the session's own files are not the runtime
    try:
        version = Version(str(getattr(importlib.import_module(module_name), "__version__", "0")))
    except Exception:
        version = Version("0")
    location = os.path.dirname(os.path.dirname(spec.origin)) if spec.submodule_search_locations else os.path.dirname(spec.origin)
    return Installed(name, version, location)


def read_requirements(path, seen=None):
    """The requirement lines of a requirements file (`-r` inside it followed)."""
    seen = seen or set()
    if path in seen:
        return []
    seen.add(path)
    try:
        with open(path, encoding="utf-8") as file:
            lines = file.read().splitlines()
    except OSError as error:
        raise PipError("ERROR: Could not open requirements file: %s" % error)
    wanted = []
    for line in lines:
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ")):
            nested = line.split(None, 1)[1].strip()
            wanted += read_requirements(os.path.join(os.path.dirname(path), nested), seen)
        elif line.startswith("-"):
            continue  # index options and the like: nothing to do without a network
        else:
            wanted.append(line)
    return wanted


def not_found(requirement, candidates, house):
    versions = ", ".join(str(c.version) for c in sorted(candidates, key=lambda c: c.version)) or "none"
    if house is None:
        where = "no wheelhouse is set up (an operator gives one with `--wheelhouse DIR`)"
    else:
        count = sum(len(wheels) for wheels in house.values())
        where = "the wheelhouse at %s (%d wheel%s) has no wheel that fits" % (WHEELHOUSE, count, "" if count == 1 else "s")
    return PipError(
        "ERROR: Could not find a version that satisfies the requirement %s (from versions: %s)\n"
        "ERROR: No matching distribution found for %s\n"
        "anypath: this sandbox has no network: pip installs pure-Python wheels from the operator's wheelhouse, and %s"
        % (requirement, versions, requirement, where)
    )


def best_candidate(requirement, house):
    """The newest wheel for `requirement` that this runtime can install."""
    candidates = (house or {}).get(canonicalize_name(requirement.name), [])
    native = [c for c in candidates if not c.pure]
    pure = [c for c in candidates if c.pure]
    fitting = [c for c in pure if requirement.specifier.contains(c.version, prereleases=bool(requirement.specifier.prereleases))]
    if not fitting:
        fitting = [c for c in pure if requirement.specifier.contains(c.version, prereleases=True)]
    for candidate in sorted(fitting, key=lambda c: c.version, reverse=True):
        if candidate.fits_python():
            return candidate
    if fitting:
        raise PipError("ERROR: Package %r requires a different Python: %s not in %r" % (fitting[0].name, PYTHON, fitting[0].metadata().get("Requires-Python")))
    if native and not pure:
        wheel = os.path.basename(native[-1].path)
        raise PipError(
            "ERROR: %s has native code built for another platform (%s).\n"
            "anypath: this sandbox runs CPython %s on WebAssembly (wasm32-wasi) and installs only pure-Python wheels "
            "(tags such as py3-none-any)" % (wheel, ", ".join(sorted(str(t) for t in native[-1].tags)), PYTHON)
        )
    raise not_found(requirement, pure, house)


def resolve(wanted, house, upgrade, no_deps, quiet):
    """The wheels to install for `wanted` (requirement, needed by, asked
    for directly, the wheel a path names), dependencies after what needs
    them, each with the installation it replaces."""
    installed = installed_distributions()
    chosen = {}
    order = []
    queue = list(wanted)
    while queue:
        requirement, parent, direct, fixed = queue.pop(0)
        key = canonicalize_name(requirement.name)
        via = " (from %s)" % parent if parent else ""
        if key in chosen:
            if not requirement.specifier.contains(chosen[key].version, prereleases=True):
                raise PipError(
                    "ERROR: Cannot install %s because these package versions have conflicting dependencies.\n"
                    "The conflict is caused by: %s%s and %s %s" % (chosen[key].name, requirement, via, chosen[key].name, chosen[key].version)
                )
            continue
        have = installed.get(key) or bundled_module(requirement.name)
        if have is not None and requirement.specifier.contains(have.version, prereleases=True) and not (upgrade and direct and have.removable):
            say(quiet, "Requirement already satisfied: %s in %s (%s)%s" % (requirement, have.location, have.version, via))
            continue
        if have is not None and not have.removable:
            raise PipError(
                "ERROR: %s %s is part of this runtime (in %s) and cannot be replaced; it does not satisfy %s%s"
                % (have.name, have.version, have.location, requirement, via)
            )
        candidate = fixed or best_candidate(requirement, house)
        if have is not None and have.version == candidate.version:
            say(quiet, "Requirement already satisfied: %s in %s (%s)%s" % (requirement, have.location, have.version, via))
            continue
        say(quiet, "Processing %s%s" % (candidate.path, via))
        chosen[key] = candidate
        order.append((candidate, have))
        if not no_deps:
            queue += [(needed, candidate.name, False, None) for needed in candidate.requires(requirement.extras)]
    return order


def uninstall_files(have, quiet):
    """Removes a distribution from the user site by its RECORD."""
    import csv

    say(quiet, "  Attempting uninstall: %s" % have.name, "    Found existing installation: %s %s" % (have.name, have.version))
    folders = set()
    try:
        with open(os.path.join(have.dist_info, "RECORD"), encoding="utf-8", newline="") as file:
            rows = list(csv.reader(file))
    except OSError:
        rows = []
    site = os.path.realpath(USER_SITE)
    for row in rows:
        if not row:
            continue
        path = os.path.realpath(os.path.join(USER_SITE, row[0]))
        if not path.startswith(os.path.realpath(HOME) + os.sep):
            continue  # a RECORD names only what it installed under the user's tree
        try:
            os.remove(path)
        except OSError:
            pass
        folder = os.path.dirname(path)
        while folder.startswith(site + os.sep):
            folders.add(folder)
            folder = os.path.dirname(folder)
    shutil.rmtree(have.dist_info, ignore_errors=True)
    for folder in sorted(folders, key=len, reverse=True):
        try:
            os.rmdir(folder)
        except OSError:
            pass  # not empty: another package's files are there too
    say(quiet, "    Successfully uninstalled %s-%s" % (have.name, have.version))


def install_wheel(candidate):
    from installer import install
    from installer.destinations import SchemeDictionaryDestination
    from installer.sources import WheelFile

    class Destination(SchemeDictionaryDestination):
        """Files with no executable bit: WASI has no modes (nor `umask`),
        and the sandbox's shell runs no file by its shebang."""

        def write_to_fs(self, scheme, path, stream, is_executable):
            return super().write_to_fs(scheme, path, stream, False)

    scheme = {
        "purelib": USER_SITE,
        "platlib": USER_SITE,
        "headers": HOME + "/include/" + candidate.name,
        "scripts": HOME + "/bin",
        "data": HOME,
    }
    destination = Destination(scheme, interpreter="/usr/bin/python3", script_kind="posix")
    with WheelFile.open(candidate.path) as source:
        install(source, destination, {"INSTALLER": b"anypath-pip\n", "REQUESTED": b""})


def parse_install(args):
    """install's options and requirements: (requirement strings, upgrade, quiet, no_deps)."""
    wanted, upgrade, quiet, no_deps, notes = [], False, 0, False, []
    at = 0
    while at < len(args):
        arg = args[at]
        value = args[at + 1] if at + 1 < len(args) else None
        if arg in ("-r", "--requirement"):
            if value is None:
                raise PipError("ERROR: -r option requires 1 argument", 2)
            wanted += read_requirements(value)
            at += 1
        elif arg.startswith("--requirement="):
            wanted += read_requirements(arg.split("=", 1)[1])
        elif arg in ("-U", "--upgrade", "--force-reinstall"):
            upgrade = True
        elif arg in ("-q", "--quiet"):
            quiet += 1
        elif arg.startswith("-q") and set(arg[1:]) == {"q"}:
            quiet += len(arg) - 1
        elif arg == "--no-deps":
            no_deps = True
        elif arg in IGNORED_FLAGS or arg.split("=", 1)[0] in IGNORED_WITH_VALUE:
            pass
        elif arg in IGNORED_WITH_VALUE:
            at += 1
        elif arg in INDEX_OPTIONS or arg.split("=", 1)[0] in INDEX_OPTIONS:
            if arg in INDEX_OPTIONS:
                at += 1
            notes.append("WARNING: %s is ignored: this sandbox has no network; wheels come from %s" % (arg.split("=", 1)[0], WHEELHOUSE))
        elif arg.startswith("-"):
            raise PipError("ERROR: no such option: %s" % arg, 2)
        else:
            wanted.append(arg)
        at += 1
    return wanted, upgrade, quiet, no_deps, notes


def to_wanted(text):
    """A requirement asked for directly, with the wheel when a path names one
    (in the session's files)."""
    if text.endswith(".whl") and os.path.isfile(text):
        try:
            name, version, _build, tags = parse_wheel_filename(os.path.basename(text))
        except (InvalidWheelFilename, InvalidVersion) as error:
            raise PipError("ERROR: %s" % error)
        candidate = Candidate(os.path.abspath(text), name, version, tags)
        if not candidate.pure:
            raise PipError("ERROR: %s is not a supported wheel on this platform (CPython %s on wasm32-wasi: pure-Python wheels only)" % (os.path.basename(text), PYTHON))
        return (Requirement(name), None, True, candidate)
    try:
        return (Requirement(text), None, True, None)
    except InvalidRequirement as error:
        raise PipError("ERROR: Invalid requirement: %r: %s" % (text, error))


def command_install(args):
    texts, upgrade, quiet, no_deps, notes = parse_install(args)
    for note in notes:
        print(note, file=sys.stderr)
    if not texts:
        raise PipError("ERROR: You must give at least one requirement to install (see \"pip help install\")")
    house = wheelhouse()
    wanted = [to_wanted(text) for text in texts]
    say(quiet, "Looking in links: %s" % WHEELHOUSE)
    order = resolve(wanted, house, upgrade, no_deps, quiet)
    if not order:
        return 0
    say(quiet, "Installing collected packages: %s" % ", ".join(c.name for c, _ in reversed(order)))
    os.makedirs(USER_SITE, exist_ok=True)
    done = []
    for candidate, have in reversed(order):
        if have is not None and have.removable:
            uninstall_files(have, quiet)
        install_wheel(candidate)
        done.append("%s-%s" % (candidate.name, candidate.version))
    say(quiet, "Successfully installed %s" % " ".join(done))
    return 0


def command_uninstall(args):
    names = [a for a in args if not a.startswith("-")]
    quiet = any(a in ("-q", "--quiet") for a in args)
    if not names:
        raise PipError("ERROR: You must give at least one requirement to uninstall (see \"pip help uninstall\")")
    installed = installed_distributions()
    for name in names:
        have = installed.get(canonicalize_name(name))
        if have is None:
            bundled = bundled_module(name)
            if bundled is None:
                print("WARNING: Skipping %s as it is not installed." % name, file=sys.stderr)
                continue
            have = bundled
        if not have.removable:
            raise PipError("ERROR: %s %s is part of this runtime (in %s) and cannot be uninstalled" % (have.name, have.version, have.location))
        uninstall_files(have, quiet)
    return 0


def command_list(args):
    installed = sorted(installed_distributions().values(), key=lambda d: d.name.lower())
    if "--format=freeze" in args or args[:1] == ["freeze"]:
        for have in installed:
            print("%s==%s" % (have.name, have.version))
        return 0
    width = max([len(d.name) for d in installed] + [7])
    print("%-*s Version" % (width, "Package"))
    print("%s -------" % ("-" * width))
    for have in installed:
        print("%-*s %s" % (width, have.name, have.version))
    return 0


def command_show(args):
    installed = installed_distributions()
    status = 0
    for index, name in enumerate(a for a in args if not a.startswith("-")):
        have = installed.get(canonicalize_name(name))
        if have is None:
            print("WARNING: Package(s) not found: %s" % name, file=sys.stderr)
            status = 1
            continue
        with open(os.path.join(have.dist_info, "METADATA"), encoding="utf-8") as file:
            metadata = email.parser.HeaderParser().parse(file)
        requires = sorted({Requirement(line).name for line in metadata.get_all("Requires-Dist") or [] if "extra ==" not in line})
        if index:
            print("---")
        print("Name: %s\nVersion: %s\nSummary: %s\nLocation: %s\nRequires: %s"
              % (have.name, have.version, metadata.get("Summary", ""), have.location, ", ".join(requires)))
    return status


def main(argv):
    """Runs `pip ARGS` (`argv` with the program's name first); gives the exit status."""
    if RUNTIME_SITE not in sys.path and "installer" not in sys.modules and os.path.isdir(RUNTIME_SITE):
        sys.path.append(RUNTIME_SITE)
    args = argv[1:]
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE.strip())
        return 0
    if args[0] in ("-V", "--version"):
        print("pip (anypath: wheels from %s, no network) from %s (python %d.%d)" % (WHEELHOUSE, USER_SITE, *sys.version_info[:2]))
        return 0
    command, rest = args[0], args[1:]
    commands = {"install": command_install, "uninstall": command_uninstall, "list": command_list, "freeze": command_list, "show": command_show}
    if command not in commands:
        print("ERROR: unknown command \"%s\"" % command, file=sys.stderr)
        return 1
    try:
        return commands[command](args if command == "freeze" else rest)
    except PipError as error:
        print(error, file=sys.stderr)
        return error.status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
