"""The typed wire keeps its JSON: shared-tensor descriptions, worker output metas, reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from cudal1_evaluator.schema import Result
from cudal1_evaluator.wire import channel
from cudal1_evaluator.wire.report import WorkerReport
from cudal1_evaluator.wire.talk import PeerGone, read_metas
from cudal1_evaluator.wire.tensor_exchange import export, open_shared


def test_a_file_description_keeps_its_keys_in_order_and_opens(tmp_path: Path) -> None:
    value = torch.arange(6, dtype=torch.float32).view(2, 3)
    shared, desc = export(value, tmp_path, torch.device("cpu"))
    assert list(desc) == ["kind", "path", "dtype", "shape", "numel"]
    assert json.loads(json.dumps(desc))["shape"] == [2, 3]
    opened = open_shared(json.loads(json.dumps(desc)), torch.device("cpu"))
    assert isinstance(opened, torch.Tensor) and torch.equal(opened, value)
    assert isinstance(shared, torch.Tensor) and torch.equal(shared, value)


def test_a_link_planted_in_the_exchange_dir_is_never_followed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The exchange dir is the runner's, and it may write there: a symbolic link waiting at the
    name of the referee's next file would have turned the referee's write into a write where
    the runner may not write (red team round 6). The names are unpredictable, and a name that
    already exists, a link included, is refused rather than followed."""
    from cudal1_evaluator.wire import tensor_exchange

    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    value = torch.ones(4)
    names = {Path(export(value, tmp_path, torch.device("cpu"))[1]["path"]).name  # type: ignore[typeddict-item]
             for _ in range(2)}
    assert len(names) == 2 and all(len(n.split("-")[1]) == len("0123456789abcdef.bin")
                                   for n in names)
    monkeypatch.setattr("secrets.token_hex", lambda n: "f" * 2 * n)
    serial = next(tensor_exchange._serial) + 1
    (tmp_path / f"t{serial}-{'f' * 16}.bin").symlink_to(victim)
    with pytest.raises(FileExistsError):
        export(value, tmp_path, torch.device("cpu"))
    assert victim.read_bytes() == b"keep me"


def test_a_value_travels_as_json(tmp_path: Path) -> None:
    _, desc = export(3, tmp_path, torch.device("cpu"))
    assert json.dumps(desc) == '{"kind": "value", "value": 3}'
    assert open_shared(desc, torch.device("cpu")) == 3


def test_worker_metas_are_objects_or_empty() -> None:
    metas = read_metas([{"count": 1, "items": [{"type": "Tensor"}]}, "forged"], 2)
    assert metas == [{"count": 1, "items": [{"type": "Tensor"}]}, {}]
    with pytest.raises(PeerGone):
        read_metas([{}], 2)


def test_reports_and_results_skip_fields_that_are_not_objects() -> None:
    report = WorkerReport.from_dict({"phase": "done", "flags": None, "trials": ["x"],
                                     "timing": {"candidate": 3}, "recheck": None})
    assert report.phase == "done" and report.flags == [] and report.timing == {}
    result = Result.from_dict({"status": "ok", "flags": None, "timing": None})
    assert result.status == "ok" and result.flags == [] and result.timing == {}


def test_a_signed_body_that_is_not_an_object_is_no_verdict() -> None:
    key = channel.new_key()
    body = json.dumps([1, 2])
    line = json.dumps({"body": body, "mac": channel._mac(key, body)}).encode()
    payload, problem = channel.read_verdict(line, key)
    assert payload is None and "0 validly signed" in problem
