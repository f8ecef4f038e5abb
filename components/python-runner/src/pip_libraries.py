"""`pip` in the shell (`anypath_pip`) and the libraries it runs on:
`packaging` (requirements, versions, markers, wheel names) and `installer`
(a wheel unpacked into a site-packages, its RECORD checked). componentize-py
keeps only the modules its build imports, so they are imported here, after
the standard library they need (`cell_stdlib`): a `pip` command then
compiles and imports nothing. A cell may import them too.
"""

import installer  # noqa: F401
import installer.destinations  # noqa: F401
import installer.sources  # noqa: F401
import packaging.markers  # noqa: F401
import packaging.requirements  # noqa: F401
import packaging.specifiers  # noqa: F401
import packaging.utils  # noqa: F401
import packaging.version  # noqa: F401

import anypath_pip  # noqa: F401  (after the libraries: it imports them)
