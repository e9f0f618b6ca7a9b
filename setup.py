"""The one compiled part, declared here because pyproject.toml's ext-modules table is still experimental.

Optional: without a C compiler the install still succeeds and ``breakglass.logs.newlines`` uses ``bytes.count``
(the same counts, slower). BREAKGLASS_PURE=1 leaves it out on purpose: the one-file bundle
(scripts/bundle.py) needs a wheel that installs on every Python and machine. Everything else is in pyproject.toml.
"""

import os

from setuptools import Extension, setup

PURE = os.environ.get("BREAKGLASS_PURE") == "1"
setup(ext_modules=[] if PURE else [
    Extension("breakglass.logs._newlines", ["breakglass/logs/_newlines.c"], optional=True, extra_compile_args=["-O3"]),
])
