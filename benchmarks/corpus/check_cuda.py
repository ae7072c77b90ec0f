"""Compile every CUDA source of the corpus with nvcc for sm_90 (no GPU needed), so that a GPU
run is not spent on syntax errors.

    python benchmarks/corpus/check_cuda.py [--jobs 2] [--arch 90] [NAME ...]

Each candidate's module-level strings holding ``__global__`` code are written to a ``.cu`` file
and compiled with ``nvcc -c`` using torch's include paths and the flags ``load_inline`` passes.
A pair whose manifest ``expected`` is ``compile_error`` must fail; every other must compile.
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--arch", default="90")
    args = parser.parse_args()
    pairs = tomllib.loads(MANIFEST.read_text(encoding="utf-8"))["pair"]
    chosen = [p for p in pairs if not args.names or p["name"] in args.names]
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


if __name__ == "__main__":
    sys.exit(main())
