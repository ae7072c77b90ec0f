"""Compile every CUDA source of the corpus with nvcc for sm_90 (no GPU needed), so that a GPU
run is not spent on syntax errors.

    python benchmarks/corpus/check_cuda.py [--jobs 2] [--arch 90] [NAME ...]

Each candidate's module-level strings holding ``__global__`` code are written to a ``.cu`` file
and compiled with ``nvcc -c`` using torch's include paths and the flags ``load_inline`` passes.
A pair whose manifest ``expected`` is ``compile_error`` must fail; every other must compile.
``--combined`` puts every source expected to compile into one translation unit (one namespace
each, includes hoisted), so torch's headers are parsed once: much faster on a small machine.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
from torch.utils import cpp_extension

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = Path(__file__).with_name("manifest.toml")


def cuda_sources(path: Path) -> list[str]:
    """Module-level string constants that hold CUDA kernels."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.value.value for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str) and "__global__" in node.value.value]


def config_shim(workdir: Path) -> Path:
    """A CPU-only torch wheel ships c10/cuda's headers without the header its CMake build
    generates; an equivalent one lets nvcc check the sources (a CUDA wheel needs none)."""
    shim = workdir / "shim"
    header = shim / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
    header.parent.mkdir(parents=True, exist_ok=True)
    header.write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n", encoding="utf-8")
    return shim


def nvcc_command(source: Path, arch: str) -> list[str]:
    includes = [f"-I{p}" for p in (*cpp_extension.include_paths(),
                                   sysconfig.get_paths()["include"])]
    includes.append(f"-I{source.parent / 'shim'}")
    cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    return ["nvcc", "-c", str(source), "-o", str(source.with_suffix(".o")), "-std=c++17",
            f"-gencode=arch=compute_{arch},code=sm_{arch}", "-O1", *includes,
            f"-I{cuda_home}/include", *cpp_extension.COMMON_NVCC_FLAGS,
            "-DTORCH_EXTENSION_NAME=corpus_check", "-DTORCH_API_INCLUDE_EXTENSION_H",
            f"-D_GLIBCXX_USE_CXX11_ABI={abi}", "--compiler-options", "-fPIC"]


def check(name: str, candidate: Path, arch: str, workdir: Path) -> tuple[str, bool, str]:
    sources = cuda_sources(candidate)
    if not sources:
        return name, True, "no CUDA source"
    errors = []
    for i, text in enumerate(sources):
        cu = workdir / f"{name}_{i}.cu"
        cu.write_text(text, encoding="utf-8")
        done = subprocess.run(nvcc_command(cu, arch), capture_output=True, text=True,
                              check=False)
        if done.returncode != 0:
            errors.append("\n".join(ln for ln in done.stderr.splitlines() if "error" in ln))
    return name, not errors, "; ".join(errors) or f"{len(sources)} source(s) compiled"


_INCLUDE = re.compile(r"^\s*#\s*include\s*[<\"].*$", re.MULTILINE)


def combined_source(named: list[tuple[str, str]]) -> str:
    """One translation unit: the union of the includes, then each source in a namespace."""
    includes = sorted({m.group(0).strip() for _, text in named for m in _INCLUDE.finditer(text)})
    bodies = [f"namespace corpus_{name} {{\n{_INCLUDE.sub('', text)}\n}}  // {name}"
              for name, text in named if "PYBIND11_MODULE" not in text]
    bodies += [f"namespace corpus_{name} {{\n"
               + _INCLUDE.sub("", text).split("PYBIND11_MODULE")[0] + f"\n}}  // {name}"
               for name, text in named if "PYBIND11_MODULE" in text]
    return "\n".join([*includes, *bodies]) + "\n"


def check_combined(pairs: list[dict[str, Any]], arch: str, workdir: Path) -> tuple[bool, str]:
    named = [(p["name"], text) for p in pairs for text in cuda_sources(ROOT / p["candidate"])]
    cu = workdir / "corpus_combined.cu"
    cu.write_text(combined_source(named), encoding="utf-8")
    done = subprocess.run(nvcc_command(cu, arch), capture_output=True, text=True, check=False)
    errors = "\n".join(ln for ln in done.stderr.splitlines() if "error" in ln)
    return done.returncode == 0, errors or f"{len(named)} sources compiled in one unit"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--arch", default="90")
    parser.add_argument("--combined", action="store_true")
    args = parser.parse_args()
    pairs = tomllib.loads(MANIFEST.read_text(encoding="utf-8"))["pair"]
    chosen = [p for p in pairs if not args.names or p["name"] in args.names]
    if args.combined:
        return run_combined(chosen, args.arch)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        config_shim(Path(tmp))
        futures = {p["name"]: pool.submit(check, p["name"], ROOT / p["candidate"], args.arch,
                                          Path(tmp)) for p in chosen}
        for pair in chosen:
            name, ok, detail = futures[pair["name"]].result()
            if detail == "no CUDA source":
                continue
            expect_ok = pair["expected"] != "compile_error"
            good = ok == expect_ok
            failures += not good
            print(f"{'ok  ' if good else 'FAIL'} {name}: {detail[:300]}", flush=True)
    return 1 if failures else 0


def run_combined(chosen: list[dict[str, Any]], arch: str) -> int:
    with_cuda = [p for p in chosen if cuda_sources(ROOT / p["candidate"])]
    good = [p for p in with_cuda if p["expected"] != "compile_error"]
    broken = [p for p in with_cuda if p["expected"] == "compile_error"]
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
        config_shim(Path(tmp))
        unit = pool.submit(check_combined, good, arch, Path(tmp))
        singles = [pool.submit(check, p["name"], ROOT / p["candidate"], arch, Path(tmp))
                   for p in broken]
        ok, detail = unit.result()
        print(f"{'ok  ' if ok else 'FAIL'} {len(good)} pairs in one unit: {detail[:3000]}")
        failures = 0 if ok else 1
        for future in singles:
            name, compiled, why = future.result()
            failures += compiled
            print(f"{'FAIL' if compiled else 'ok  '} {name} (must not compile): {why[:300]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
