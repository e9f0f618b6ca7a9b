"""The one compiled part, declared here because pyproject.toml's ext-modules table is still experimental.

Optional: without a C compiler the install still succeeds and ``breakglass.logs.newlines`` uses ``bytes.count``
(the same counts, slower). Everything else is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("breakglass.logs._newlines", ["breakglass/logs/_newlines.c"], optional=True,
                             extra_compile_args=["-O3"])])
