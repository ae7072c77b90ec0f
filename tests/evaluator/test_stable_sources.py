"""Sources a candidate writes into a fresh temp dir get one stable path per content."""

from __future__ import annotations

from pathlib import Path

from cudal1_evaluator.candidate_side import stable_sources
from cudal1_evaluator.candidate_side.stable_sources import _stable


def _write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def test_the_same_bytes_in_two_temp_dirs_get_one_path(tmp_path: Path) -> None:
    build = tmp_path / "build"
    files = {"k.cu": '#include "k.cuh"\n', "inc/k.cuh": "// header\n"}
    first = _write(tmp_path / "tmp1", files)
    second = _write(tmp_path / "tmp2", files)
    moved: dict[str, str] = {}
    a = _stable(str(first / "k.cu"), build, build / "sources", moved)
    b = _stable(str(second / "k.cu"), build, build / "sources", {})
    assert a == b and Path(a).parent.parent == build / "sources"
    assert (Path(a).parent / "inc" / "k.cuh").read_text() == "// header\n"  # the header too
    assert moved == {str(first.resolve()): str(Path(a).parent)}
    changed = _write(tmp_path / "tmp3", {**files, "k.cu": "// other\n"})
    assert _stable(str(changed / "k.cu"), build, build / "sources", {}) != a


def test_sources_left_where_they_are(tmp_path: Path) -> None:
    build = tmp_path / "build"
    inside = _write(build / "own", {"k.cu": "// in the build dir\n"})
    big = _write(tmp_path / "big", {f"f{i}.h": "" for i in range(stable_sources.MAX_DIR_FILES + 1)})
    for source in (str(inside / "k.cu"), str(big / "f0.h"), str(tmp_path / "missing.cu")):
        assert _stable(source, build, build / "sources", {}) == source
    assert not (build / "sources").exists()
