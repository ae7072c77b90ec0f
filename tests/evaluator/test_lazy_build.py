"""Lazy builds: extensions built in ``ModelNew.__init__`` or on the first ``forward`` compile
during the build stage, so the evaluation afterwards compiles nothing.

One real g++ build per candidate (C++ load_inline on CPU); the evaluation then finds the build
cached and the extension's shared object untouched (ninja had nothing to do).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from evaluator_cases import DIAG_PROBLEM, job

from cudal1_evaluator.candidate_side import lazy_builds
from cudal1_evaluator.launch import build, evaluate

KERNEL = '''
SOURCE = """
torch::Tensor scale_rows(torch::Tensor a, torch::Tensor b) {
    auto B = b.contiguous();
    return B * a.contiguous().unsqueeze(1);
}
"""
'''

IN_INIT = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
''' + KERNEL + '''

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = load_inline(name="lazy_init_ext", cpp_sources=SOURCE,
                               functions=["scale_rows"], extra_cflags=["-O0"])

    def forward(self, A, B):
        return self.ext.scale_rows(A, B)
'''

IN_FORWARD = '''
import torch
import torch.nn as nn
import torch.utils.cpp_extension as cpp
''' + KERNEL + '''
FUNCTIONS = ["scale_rows"]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = None

    def forward(self, A, B):
        if self.ext is None:
            self.ext = cpp.load_inline(name="lazy_forward_ext", cpp_sources=SOURCE,
                                       functions=FUNCTIONS, extra_cflags=["-O0"])
        return self.ext.scale_rows(A, B)
'''

TEMP_FILE = '''
import os
import tempfile

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load
''' + KERNEL + '''
_dir = tempfile.mkdtemp(prefix="scale_rows_")
with open(os.path.join(_dir, "scale_rows.h"), "w") as fh:
    fh.write(SOURCE)
with open(os.path.join(_dir, "scale_rows.cpp"), "w") as fh:
    fh.write('#include <torch/extension.h>\\n#include "scale_rows.h"\\n'
             'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale_rows", &scale_rows); }\\n')
ext = load(name="lazy_file_ext", sources=[os.path.join(_dir, "scale_rows.cpp")],
           extra_cflags=["-O0"])


class ModelNew(nn.Module):
    def forward(self, A, B):
        return ext.scale_rows(A, B)
'''


def shared_objects(build_dir: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in build_dir.rglob("*.so")}


@pytest.mark.slow
@pytest.mark.parametrize(("candidate", "ext_name"), [(IN_INIT, "lazy_init_ext"),
                                                      (IN_FORWARD, "lazy_forward_ext"),
                                                      (TEMP_FILE, "lazy_file_ext")],
                         ids=["in_init", "in_forward", "temp_file"])
def test_lazy_extension_is_built_by_the_build_stage(tmp_path: Path, candidate: str,
                                                    ext_name: str) -> None:
    the_job = job(DIAG_PROBLEM, candidate, tmp_path, strict_threshold=1e9)
    built = build(the_job)
    assert built.ok and not built.cached, built.message
    objects = shared_objects(tmp_path)
    assert any(ext_name in p.name for p in objects), (built.message, objects)

    result = evaluate(the_job)
    assert result.status == "ok", result.message
    assert result.build_cached
    assert shared_objects(tmp_path) == objects  # nothing rebuilt, nothing new


def test_calls_with_run_time_arguments_are_left_alone() -> None:
    import types

    module = types.ModuleType("m")
    exec("import torch.utils.cpp_extension as cpp\nSRC = 'x'\n", module.__dict__)
    source = ("def f(self, n):\n"
              "    return cpp.load_inline(name=f'k{n}', cpp_sources=SRC)\n"
              "def g(SRC):\n"
              "    return cpp.load_inline(name='k', cpp_sources=SRC)\n"
              "def h():\n"
              "    return print('not a build')\n")
    calls = lazy_builds.build_calls_in_functions(module, source)
    assert calls.built == [] and calls.skipped == 2
