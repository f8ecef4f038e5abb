"""The standard library a code-interpreter cell can import.

componentize-py snapshots the runner after importing it, and only modules
imported then exist in the component: this module imports the parts of the
standard library that work under WASI, so analysis code finds them. A module
that does not import here (no WASI support) is simply absent.
"""

import importlib

MODULES = (
    "abc argparse array ast asyncio base64 binascii bisect calendar cmath codecs collections collections.abc "
    "colorsys configparser contextlib copy csv dataclasses datetime decimal difflib encodings.cp437 encodings.idna enum errno fnmatch fractions "
    "functools glob graphlib gzip hashlib heapq hmac html html.parser http http.client io ipaddress "
    "importlib.metadata importlib.metadata._adapters importlib.resources importlib.util itertools json keyword locale logging lzma bz2 math mimetypes numbers operator os pathlib pickle pkgutil "
    "platform pprint queue random re reprlib secrets shlex shutil socket sqlite3 statistics string stringprep "
    "struct subprocess sysconfig tarfile tempfile textwrap time timeit tomllib traceback types typing unicodedata unittest "
    "urllib urllib.parse urllib.request uuid warnings weakref xml.dom.minidom xml.etree.ElementTree "
    "zipfile zlib"
).split()

AVAILABLE = []
for _name in MODULES:
    try:
        importlib.import_module(_name)
        AVAILABLE.append(_name)
    except Exception:  # absent under WASI: a cell that imports it gets ModuleNotFoundError
        pass
