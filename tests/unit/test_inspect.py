"""Static inspection of problem files, reading them from disk, and rewriting their sizes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cudal1_tui.cli.main import main
from cudal1_tui.errors import ProblemError
from cudal1_tui.problem.contract import CONTRACT
from cudal1_tui.problem.inspect import inspect_source
from cudal1_tui.problem.problem_file import load_problem, read_source
from cudal1_tui.problem.sizing import cpu_sizes, shrink_for_cpu, size_constants, with_sizes

BROKEN = Path(__file__).resolve().parents[1] / "data" / "broken_problems"

# file -> (line, col) of the first finding or None when file-wide, and a fragment of it
EXPECTED: dict[str, tuple[tuple[int, int] | None, str]] = {
    "empty.py": (None, "the file is empty"),
    "only_comment.py": (None, "no `class Model(nn.Module)` at module level"),
    "syntax_error.py": ((6, 5), "syntax error near `def forward(self, x:`"),
    "python2_print.py": ((7, 9), "Missing parentheses in call to 'print'"),
    "renamed_model.py": ((5, 1), "found `class Net(nn.Module)`: rename it to `Model`"),
    "no_model.py": (None, "no `class Model(nn.Module)` at module level"),
    "candidate_model_new.py": ((5, 1), "found `class ModelNew` but no `class Model`"),
    "not_a_module.py": ((4, 1), "`class Model` must derive from nn.Module"),
    "no_forward.py": ((5, 1), "`class Model` has no `forward` method"),
    "forward_takes_no_self.py": ((7, 5), "`forward` takes no `self`"),
    "no_get_inputs.py": (None, "`def get_inputs()` is missing"),
    "misspelled_get_inputs.py": (None, "found `get_input`: the name must be exactly `get_inputs`"),
    "no_get_init_inputs.py": (None, "`def get_init_inputs()` is missing"),
    "get_inputs_with_params.py": ((10, 1), "`get_inputs` takes parameters (batch_size)"),
    "cuda_kernel.py": (None, "this is C/C++/CUDA source, not a Python module"),
    "imported_model.py": (None, "`Model` is imported (`mymodels.Model`)"),
}

VALID = '''\
"""Scales and shifts a batch."""
import torch
import torch.nn as N
from torch.nn import functional as F

batch_size = 128  # cpu-sizes: batch_size=4, dim=8
dim = 256
eps: float = 1e-5
scale = 0.5


class Base(N.Module):
    pass


class Model(Base):
    """Scaled GELU."""

    def __init__(self, dim: int, scale: float = 2.0):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, *, shift=0.0) -> torch.Tensor:
        return F.gelu(x) * self.scale + shift


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim, scale]
'''


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_broken_file_reports_what_is_wrong(name: str) -> None:
    where, fragment = EXPECTED[name]
    path = BROKEN / name
    inspection = inspect_source(read_source(path), str(path))
    assert not inspection.ok
    first = inspection.problems[0]
    assert fragment in " ".join(p.message for p in inspection.problems)
    if where is not None:
        assert (first.line, first.col) == where
        assert f"{path}:{where[0]}:{where[1]}: error:" in inspection.report()
    assert CONTRACT in inspection.report()  # every failure shows the expected contract


def test_every_broken_file_is_covered() -> None:
    on_disk = {p.name for p in BROKEN.glob("*.py")}
    assert on_disk - {"several_problems.py", "forward_star_args.py"} == set(EXPECTED)
    assert len(EXPECTED) >= 10


def test_all_problems_in_one_message() -> None:
    inspection = inspect_source((BROKEN / "several_problems.py").read_text(), "p.py")
    report = inspection.report()
    assert len(inspection.errors) == 3
    for fragment in ("has no `forward`", "found `make_inputs`", "`def get_init_inputs()`"):
        assert fragment in report
    assert report.index("p.py:5:1") < report.index("expected a problem file")


def test_syntax_error_hides_claims_the_text_refutes() -> None:
    inspection = inspect_source((BROKEN / "syntax_error.py").read_text())
    assert [p.message.split(" near")[0] for p in inspection.problems] == ["syntax error"]
    assert "'(' was never closed" in inspection.problems[0].message


def test_forward_with_only_star_args_warns_but_passes() -> None:
    inspection = inspect_source((BROKEN / "forward_star_args.py").read_text(), "s.py")
    assert inspection.ok
    assert [w.line for w in inspection.warnings] == [6]
    assert "takes only *args" in inspection.report()
    assert "expected a problem file" not in inspection.report()


def test_get_inputs_with_defaults_only_warns() -> None:
    source = VALID.replace("def get_inputs():", "def get_inputs(n=3):")
    inspection = inspect_source(source)
    assert inspection.ok
    assert "only their defaults are used" in inspection.warnings[0].message


def test_valid_problem_is_described() -> None:
    inspection = inspect_source(VALID, "valid.py")
    assert inspection.ok, inspection.report()
    assert inspection.report() == "valid.py: ok"
    assert inspection.forward is not None and inspection.init is not None
    assert inspection.forward.names == ["x", "shift"]
    assert [(p.kind, p.default) for p in inspection.forward.params] == [
        ("positional", None), ("keyword_only", "0.0")]
    assert inspection.forward.params[0].annotation == "torch.Tensor"
    assert inspection.init.render() == "(dim, scale=2.0)"
    assert inspection.size_values() == {"batch_size": 128, "dim": 256, "eps": 1e-5, "scale": 0.5}
    assert [s.line for s in inspection.sizes] == [6, 7, 8, 9]
    assert inspection.imports == ["import torch", "import torch.nn as N",
                                  "from torch.nn import functional as F"]
    assert inspection.docstring == "Scaled GELU."
    assert inspection.to_dict()["ok"] is True


@pytest.mark.parametrize("header, base", [
    ("import torch", "torch.nn.Module"),
    ("from torch import nn", "nn.Module"),
    ("from torch.nn import Module", "Module"),
    ("import torch.nn as tnn", "tnn.Module"),
])
def test_module_base_spellings(header: str, base: str) -> None:
    source = VALID.replace("class Base(N.Module)", f"{header}\n\n\nclass Base({base})")
    assert inspect_source(source).ok


def test_unrelated_module_base_is_rejected() -> None:
    source = VALID.replace("class Base(N.Module)", "class Base(object)")
    assert "it derives from Base" in inspect_source(source).report()


def test_native_suffix_is_rejected_even_if_it_parses() -> None:
    assert "not a Python module" in inspect_source("x = 1\n", "kernel.cu").report()


# ------------------------------------------------------------------- reading files


def test_read_source_refuses_what_cannot_be_read(tmp_path: Path) -> None:
    binary = tmp_path / "model.pt"
    binary.write_bytes(b"PK\x03\x04\x00\x00weights")
    latin = tmp_path / "latin.py"
    latin.write_bytes("# caf\xe9\nimport torch\n".encode("latin-1"))
    cases = {
        tmp_path / "missing.py": "no such file",
        tmp_path: "is a directory",
        binary: "is a binary file",
        latin: "is not UTF-8 text (byte 0xe9 at offset 5, line 1)",
    }
    for path, fragment in cases.items():
        with pytest.raises(ProblemError) as caught:
            read_source(path)
        assert fragment in caught.value.message
        assert caught.value.fix


def test_load_problem(tmp_path: Path) -> None:
    good = tmp_path / "good.py"
    good.write_text(VALID)
    loaded = load_problem(good)
    assert loaded.name == "good" and loaded.source == VALID and loaded.inspection.ok
    with pytest.raises(ProblemError) as caught:
        load_problem(BROKEN / "no_forward.py")
    assert "has no `forward` method" in caught.value.message
    assert "expected a problem file" in caught.value.message


# ------------------------------------------------------------------- sizes


def test_cpu_sizes_and_rewrite_keep_everything_else() -> None:
    assert cpu_sizes(VALID) == {"batch_size": 4, "dim": 8}
    small = shrink_for_cpu(VALID)
    assert "batch_size = 4  # cpu-sizes: batch_size=4, dim=8\ndim = 8\n" in small
    assert small.replace("batch_size = 4 ", "batch_size = 128 ").replace(
        "dim = 8\n", "dim = 256\n") == VALID
    assert {c.name: c.value for c in size_constants(small)}["scale"] == 0.5


def test_with_sizes_floats_and_repeated_assignments() -> None:
    source = "n = 10\nalpha = 0.5\nn = 20  # again\ntext = 'n = 10'\n"
    assert with_sizes(source, {"n": 3, "alpha": 1e-3}) == (
        "n = 3\nalpha = 0.001\nn = 3  # again\ntext = 'n = 10'\n")


def test_with_sizes_unknown_name() -> None:
    with pytest.raises(ProblemError) as caught:
        with_sizes(VALID, {"batch": 4, "dim": 8})
    assert "unknown size name(s): batch" in caught.value.message
    assert "batch_size, dim, eps, scale" in caught.value.message


@pytest.mark.parametrize("comment, fragment", [
    ("# cpu-sizes: batch_size 4", "cannot read `batch_size 4`"),
    ("# cpu-sizes: batch_size=four", "is not a number"),
])
def test_bad_cpu_sizes_comment(comment: str, fragment: str) -> None:
    with pytest.raises(ProblemError) as caught:
        cpu_sizes(f"batch_size = 1  {comment}\n")
    assert fragment in caught.value.message


def test_shrink_without_comment_is_identity() -> None:
    source = VALID.replace("  # cpu-sizes: batch_size=4, dim=8", "")
    assert shrink_for_cpu(source) == source


# ------------------------------------------------------------------- command line


def test_cli_static_only(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["inspect", "--no-probe", str(BROKEN / "no_forward.py"),
                 str(BROKEN / "forward_star_args.py"), str(BROKEN / "nope.py")])
    out = capsys.readouterr().out
    assert code == 1
    assert "has no `forward` method" in out and "expected a problem file" in out
    assert "takes only *args" in out and "forward_star_args.py" in out
    assert "nope.py: no such file" in out


def test_cli_json_no_probe(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import json

    good = tmp_path / "good.py"
    good.write_text(VALID)
    assert main(["inspect", "--no-probe", "--json", str(good)]) == 0
    (report,) = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["probe"] is None
    assert report["inspection"]["forward"]["params"][0]["name"] == "x"


def test_problem_package_never_imports_torch() -> None:
    code = ("import sys, cudal1_tui.problem.probing, cudal1_tui.problem.problem_file, "
            "cudal1_tui.cli.commands.inspect_cmd; assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_embedded_cuda_in_a_string_is_still_python() -> None:
    kernel = 'KERNEL = """\n#include <cuda.h>\n__global__ void k() {}\n"""\n'
    source = (BROKEN / "syntax_error.py").read_text().replace(
        "import torch\n", "import torch\n" + kernel, 1)
    report = inspect_source(source).report()
    assert "syntax error" in report and "not a Python module" not in report


def test_cli_bad_cpu_sizes_comment(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad_sizes.py"
    bad.write_text(VALID.replace("batch_size=4, dim=8", "batch_size=4, width=8"))
    assert main(["inspect", str(bad)]) == 1
    assert "unknown size name(s): width" in capsys.readouterr().out
