"""Build a PyCUDA wheel from its source archive, compiling in parallel.

PyCUDA is published as source only, so it is built on the machine that has
the CUDA toolkit. Its setup script compiles about sixty C++ files one after
another; this script runs setuptools with the compiler's ``compile`` step
spread over all cores, which cuts the build from minutes to well under one
on a 16-core machine.

Usage (from a directory holding the unpacked source)::

    python3 tools/gpu/build_pycuda.py SOURCE_DIR WHEEL_DIR [configure options]

``configure options`` go to PyCUDA's ``configure.py`` (for example
``--no-cuda-enable-curand``: brainstorm's handler draws its own random
numbers and needs no cuRAND). The wheel lands in ``WHEEL_DIR``.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import os
import subprocess
import sys


def parallel_compile(
    self,
    sources,
    output_dir=None,
    macros=None,
    include_dirs=None,
    debug=0,
    extra_preargs=None,
    extra_postargs=None,
    depends=None,
):
    """``CCompiler.compile`` with the objects compiled on all cores."""
    macros, objects, extra_postargs, pp_opts, build = self._setup_compile(
        output_dir, macros, include_dirs, sources, depends, extra_postargs
    )
    cc_args = self._get_cc_args(pp_opts, debug, extra_preargs)

    def one(obj):
        source, ext = build[obj]
        self._compile(obj, source, ext, cc_args, extra_postargs, pp_opts)

    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        list(pool.map(one, [obj for obj in objects if obj in build]))
    return objects


def main(argv: list[str]) -> int:
    """Configure, patch the compiler and run PyCUDA's setup.py bdist_wheel."""
    source, wheel_dir, *configure = argv
    wheel_dir = os.path.abspath(wheel_dir)
    subprocess.run([sys.executable, 'configure.py', *configure], cwd=source, check=True)
    os.chdir(source)
    sys.path.insert(0, os.getcwd())
    # setuptools first: importing it puts its own distutils in place
    importlib.import_module('setuptools')
    ccompiler = importlib.import_module('distutils.ccompiler')
    ccompiler.CCompiler.compile = parallel_compile
    sys.argv = ['setup.py', 'bdist_wheel', '--dist-dir', wheel_dir]
    with open('setup.py') as file:
        code = compile(file.read(), 'setup.py', 'exec')
    exec(code, {'__name__': '__main__', '__file__': 'setup.py'})
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
