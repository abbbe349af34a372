"""Imports that test processes leave out, for speed only.

jsonschema (imported by nbformat, so by nbval in every pytest process and by nbconvert)
imports ``rfc3987_syntax`` when it is installed, only to check strings of the "iri" format;
that module builds a parser for its grammar at import time, about 2 s per process on a slow
CPU. Nothing the course validates uses that format, so these processes import jsonschema
without it, as on a machine where it is not installed (jsonschema's documented fallback).
"""

import sys


def install() -> None:
    sys.modules.setdefault("rfc3987_syntax", None)  # `import rfc3987_syntax` -> ImportError
