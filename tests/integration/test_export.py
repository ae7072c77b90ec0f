"""Each export format, loaded the way its target tool loads it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from store_builders import CANDIDATE, REFERENCE, populated_session, record

from cudal1_tui.config import Settings
from cudal1_tui.errors import ExportError
from cudal1_tui.records import CandidateRecord
from cudal1_tui.store import Session, SessionMeta
from cudal1_tui.store.export import ExportOptions, export_sessions
from cudal1_tui.store.export.verl_reward import compute_score
from cudal1_tui.store.rescoring import rescore, rescored_path, write_rescored

# subprocesses import this checkout's package, whatever the current directory
HERE = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


@pytest.fixture(autouse=True)
def no_global_git_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def made(root: Path) -> tuple[Session, dict[str, CandidateRecord]]:
    session, recs = populated_session(root)
    session.close()
    return session, recs


def run_export(root: Path, fmt: str, out: Path, refs: list[str], **options: Any) -> int:
    result = export_sessions(refs, fmt, ExportOptions(**options), out, root)
    assert result.path == out and out.is_file()
    return result.rows


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def is_chat(messages: object, roles: list[str]) -> bool:
    return isinstance(messages, list) and [m["role"] for m in messages] == roles and all(
        set(m) == {"role", "content"} and isinstance(m["content"], str) and m["content"]
        for m in messages)


def test_openai_chat_keeps_good_model_answers(made: Any, root: Path, tmp_path: Path) -> None:
    session, _ = made
    out = tmp_path / "sft.jsonl"
    assert run_export(root, "openai-chat", out, [session.id]) == 2  # 2.0x and 4.0x; not 1.005x
    rows = read_jsonl(out)
    for row in rows:
        assert set(row) == {"messages"}
        assert is_chat(row["messages"], ["system", "user", "assistant"])
        assert row["messages"][2]["content"].startswith("## Performance Analysis")
        assert "<think>" not in row["messages"][2]["content"]
    assert run_export(root, "openai-chat", out, [session.id], min_speedup=3.0) == 1
    assert run_export(root, "openai-chat", out, [session.id], only_accepted=True) == 1
    assert run_export(root, "openai-chat", out, [session.id], with_reasoning=True) == 2
    assert read_jsonl(out)[0]["messages"][2]["content"].startswith(
        "<think>\nthinking about slot 0\n</think>\n\n## Performance Analysis")


def test_trl_rows_carry_reward_columns(made: Any, root: Path, tmp_path: Path) -> None:
    session, recs = made
    out = tmp_path / "trl.jsonl"
    assert run_export(root, "trl", out, [session.id]) == 4  # every model answer, failures too
    rows = read_jsonl(out)
    expected = {"prompt", "completion", "reward", "speedup", "speedup_strict", "precision",
                "status", "reference_code", "problem_name", "record_id", "session_id"}
    for row in rows:
        assert set(row) == expected
        assert is_chat(row["prompt"], ["system", "user"])
        assert is_chat(row["completion"], ["assistant"])
        assert isinstance(row["reward"], float) and isinstance(row["status"], str)
        assert row["speedup"] is None or isinstance(row["speedup"], float)
        assert row["speedup_strict"] is None and row["precision"] == ""  # written before parity
        assert "class Model(nn.Module)" in row["reference_code"]
    by_id = {row["record_id"]: row for row in rows}
    assert by_id[recs["r2s1"].record_id]["reward"] == 3.0
    assert by_id[recs["r1s1"].record_id]["status"] == "incorrect"

    # GRPO calls reward functions with every extra column as a keyword argument
    columns = {k: [row[k] for row in rows] for k in expected - {"prompt", "completion"}}

    def logged_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
        assert len(kwargs["reference_code"]) == len(completions)
        return [float(r) for r in kwargs["reward"]]

    batch = logged_reward([r["prompt"] for r in rows], [r["completion"] for r in rows], **columns)
    assert batch == [row["reward"] for row in rows]


def test_trl_rows_load_with_datasets(made: Any, root: Path, tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")  # in the dev extra; not needed by cudal1-tui
    session, _ = made
    out = tmp_path / "trl.jsonl"
    run_export(root, "trl", out, [session.id])
    dataset = datasets.load_dataset("json", data_files=str(out), split="train")
    assert {"prompt", "completion", "reward"} <= set(dataset.column_names)


def test_trl_preference_pairs_answers_to_one_prompt(made: Any, root: Path,
                                                    tmp_path: Path) -> None:
    session, recs = made
    out = tmp_path / "pref.jsonl"
    assert run_export(root, "trl-preference", out, [session.id]) == 2
    rows = {row["pair_reason"]: row for row in read_jsonl(out)}
    by_decision, by_reward = rows["decision"], rows["reward"]
    assert (by_decision["chosen_record_id"], by_decision["rejected_record_id"]) == (
        recs["r1s0"].record_id, recs["r1s1"].record_id)
    assert (by_reward["chosen_record_id"], by_reward["rejected_record_id"]) == (
        recs["r2s1"].record_id, recs["r2s0"].record_id)
    for row in rows.values():
        assert is_chat(row["prompt"], ["system", "user"])
        assert is_chat(row["chosen"], ["assistant"]) and is_chat(row["rejected"], ["assistant"])
        assert row["chosen"] != row["rejected"]
        assert row["chosen_reward"] >= row["rejected_reward"]
    assert "(round 2)" in by_reward["prompt"][1]["content"]
    assert run_export(root, "trl-preference", out, [session.id], min_speedup=3.0) == 1


def test_verl_parquet_schema_and_reward_function(made: Any, root: Path, tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    session, recs = made
    out = tmp_path / "train.parquet"
    assert run_export(root, "verl", out, [session.id]) == 4
    table = pq.read_table(out)
    schema = table.schema
    assert schema.names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    assert schema.field("data_source").type == pa.string()
    prompt = schema.field("prompt").type
    assert pa.types.is_list(prompt) and pa.types.is_struct(prompt.value_type)
    assert [f.name for f in prompt.value_type] == ["role", "content"]
    reward_model = schema.field("reward_model").type
    assert [f.name for f in reward_model] == ["style", "ground_truth"]
    extra = schema.field("extra_info").type
    assert {"split", "index"} <= {f.name for f in extra}
    assert extra.field("index").type == pa.int64()
    rows = table.to_pylist()
    assert [r["extra_info"]["index"] for r in rows] == [0, 1, 2, 3]
    for row in rows:
        assert row["data_source"] == "cudal1-tui/scale_linear"
        assert row["ability"] == "cuda-optimization"
        assert row["reward_model"]["style"] == "rule"
        assert row["extra_info"]["split"] == "train"
        assert is_chat(row["prompt"], ["system", "user"])
        logged = compute_score(row["data_source"], "any answer",
                               row["reward_model"]["ground_truth"], row["extra_info"])
        assert logged == row["extra_info"]["reward"]
    best = next(r for r in rows if r["extra_info"]["record_id"] == recs["r2s1"].record_id)
    assert best["extra_info"]["speedup"] == 4.0 and best["extra_info"]["reward"] == 3.0
    assert compute_score("other/source", "", "", {"reward": 5.0}) == 0.0
    assert compute_score("cudal1-tui/x", "", "", None) == 0.0


def test_verl_without_pyarrow_says_what_to_install(made: Any, root: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # what a missing package looks like
    session, _ = made
    with pytest.raises(ExportError) as err:
        export_sessions([session.id], "verl", ExportOptions(), tmp_path / "x.parquet", root)
    assert err.value.fix.startswith("pip install 'pyarrow>=15'")
    assert "cudal1-tui[export]" in err.value.fix


def test_jsonl_merges_sessions_with_decisions(made: Any, root: Path, tmp_path: Path) -> None:
    first, recs = made
    second, _ = populated_session(root)
    second.close()
    out = tmp_path / "all.jsonl"
    assert run_export(root, "jsonl", out, [first.id, second.id]) == 10
    rows = read_jsonl(out)
    assert [r["session_id"] for r in rows] == [first.id] * 5 + [second.id] * 5
    records = [CandidateRecord.from_dict(r) for r in rows]
    assert {r.record_id: r.decision for r in records}[recs["r1s1"].record_id] == "rejected"
    assert all(r["kind"] == "candidate" and r["schema_version"] == 1 for r in rows)
    assert run_export(root, "jsonl", out, [first.id, second.id], only_accepted=True) == 2


def import_file(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_module_imports_in_place_of_the_reference(made: Any, root: Path, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    session, recs = made
    out = tmp_path / "modules" / "optimized.py"
    assert run_export(root, "module", out, [session.id]) == 1
    text = out.read_text()
    for fact in ("2.00x", "reference 2 ms ÷ candidate 1 ms = 2.00x", "NVIDIA H100 80GB HBM3",
                 "sizes              batch_size=4, dim=8 (the file's sizes)", "torch 2.13.0",
                 "cuda 13.0", "strict (float32 1e-04, float16 1e-02)", "max abs err 6e-06",
                 session.id, recs["r1s0"].record_id, "from optimized import Model"):
        assert fact in text, fact
    optimized = import_file(out, "optimized")
    reference = import_file(session.path / "problem.py", "reference_problem")
    model = optimized.Model(*optimized.get_init_inputs())
    ref_model = reference.Model(*reference.get_init_inputs())
    model.load_state_dict(ref_model.state_dict())
    (x,) = optimized.get_inputs()
    assert x.shape == (4, 8)
    torch.testing.assert_close(model(x), ref_model(x))


def test_module_sets_each_size_once_and_needs_an_importable_name(made: Any, root: Path,
                                                                 tmp_path: Path) -> None:
    from cudal1_tui.store.export import module

    code = "import torch\nbatch_size = 256\ndim: int = 8\nBLOCK = 128\n\nclass ModelNew: ...\n"
    kept = module.without_assignments(code, {"batch_size", "dim"})
    assert "batch_size" not in kept and "dim" not in kept and "BLOCK = 128" in kept
    session, _ = made
    with pytest.raises(ExportError, match="cannot be imported") as err:
        export_sessions([session.id], "module", ExportOptions(), tmp_path / "2026-11-23-m.py",
                        root)
    assert err.value.fix == (f"cudal1-tui export {session.id} --format module "
                             f"-o {tmp_path / 'optimized_2026_11_23_m.py'}")
    with pytest.raises(ExportError) as err:  # issue 23: never optimized_optimized-diag.py
        export_sessions([session.id], "module", ExportOptions(),
                        tmp_path / "optimized-diag.py", root)
    fixed = Path(err.value.fix.split(" -o ")[1])
    assert fixed.stem == "optimized_diag" and fixed.stem.isidentifier()


def test_module_needs_one_session_with_an_accept(made: Any, root: Path, tmp_path: Path) -> None:
    session, _ = made
    with Session.open(session.id, root) as writer:
        writer.undo()
    with pytest.raises(ExportError, match="no accepted candidate") as err:
        export_sessions([session.id], "module", ExportOptions(), tmp_path / "m.py", root)
    assert err.value.fix.startswith("cudal1-tui ") and f"--resume {session.id}" in err.value.fix
    with pytest.raises(ExportError, match="one session at a time"):
        export_sessions([session.id, session.id], "module", ExportOptions(), tmp_path / "m.py",
                        root)


def test_rescored_rewards_replace_the_logged_ones(made: Any, root: Path, tmp_path: Path) -> None:
    session, recs = made
    out = tmp_path / "trl.jsonl"
    with pytest.raises(Exception, match="no rescored file"):
        run_export(root, "trl", out, [session.id], rescored="binary")
    with Session.open(session.id, root, readonly=True) as reader:
        write_rescored(rescored_path(reader.path, "binary"),
                       rescore(reader.records(), "binary", {}))
    run_export(root, "trl", out, [session.id], rescored="binary")
    rewards = {r["record_id"]: r["reward"] for r in read_jsonl(out)}
    assert rewards[recs["r2s1"].record_id] == 1.0 and rewards[recs["r1s1"].record_id] == 0.0


def test_export_command_writes_to_stdout_without_o(made: Any, root: Path, tmp_path: Path) -> None:
    session, _ = made
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run([sys.executable, "-m", "cudal1_tui", "export", session.id[-6:],
                           "--format", "trl", "--sessions-dir", str(root)], cwd=work, env=HERE,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len([json.loads(line) for line in done.stdout.split("\n") if line]) == 4
    assert list(work.iterdir()) == []  # nothing lands in the current directory
    assert "wrote 4 rows from 1 session(s) to <stdout>" in done.stderr
    several = subprocess.run([sys.executable, "-m", "cudal1_tui", "export", "@last",
                              "--format", "trl,jsonl", "-o", str(tmp_path / "out"),
                              "--sessions-dir", str(root)], cwd=work, env=HERE,
                             capture_output=True, text=True, timeout=120)
    assert several.returncode == 0, several.stderr
    assert sorted(p.suffix for p in (tmp_path / "out").iterdir()) == [".jsonl", ".jsonl"]
    to_nowhere = subprocess.run([sys.executable, "-m", "cudal1_tui", "export", session.id,
                                 "--format", "trl,jsonl", "--sessions-dir", str(root)],
                                cwd=work, env=HERE, capture_output=True, text=True, timeout=120)
    assert to_nowhere.returncode == 1
    assert f"fix: cudal1-tui export {session.id} --format trl,jsonl -o out/" in to_nowhere.stderr
    failed = subprocess.run([sys.executable, "-m", "cudal1_tui", "export", session.id,
                             "--format", "jsonl", "--rescored", "log_speedup",
                             "--sessions-dir", str(root)], cwd=work, env=HERE, capture_output=True,
                            text=True, timeout=120)
    assert failed.returncode == 1 and "cudal1-tui rescore" in failed.stderr
    assert "Traceback" not in failed.stderr


CPU_REFERENCE = REFERENCE.replace("batch_size = 4\ndim = 8\n",
                                  "batch_size = 4096\ndim = 8192\n# cpu-sizes: batch_size=4, "
                                  "dim=8\n")


def test_module_keeps_the_sizes_it_was_measured_at(root: Path, tmp_path: Path) -> None:
    """Issue 23: a CPU session measured at the # cpu-sizes; the module says so, keeps them,
    carries no stale # cpu-sizes comment and no empty version (`cuda ,`)."""
    problem = root.parent / "big.py"
    root.mkdir(parents=True)
    problem.write_text(CPU_REFERENCE)
    meta = SessionMeta(device={"type": "cpu", "name": "x86_64", "used": "cpu"},
                       versions={"torch": "2.13.0", "cuda": "", "python": "3.11.9"},
                       extra={"sizes": "auto", "cpu_sizes": True})
    session = Session.create(problem, CPU_REFERENCE, Settings(), meta, root=root)
    rec = record(session, 1, 0, cand_ms=0.5,
                 code="# cpu-sizes: batch_size=4, dim=8\nbatch_size = 4096\n" + CANDIDATE)
    rec.result.device, rec.result.versions = {}, {"torch": "2.13.0", "cuda": None}
    session.append_candidate(rec)
    session.accept(rec.record_id)
    session.close()
    out = tmp_path / "optimized_big.py"
    assert run_export(root, "module", out, [session.id]) == 1
    text = out.read_text()
    assert "batch_size=4, dim=8 (the file's # cpu-sizes)" in text
    assert "device             cpu (x86_64)" in text
    assert "versions           torch 2.13.0\n" in text and "cuda ," not in text
    assert "cpu-sizes:" not in text.replace("(the file's # cpu-sizes)", "")
    assert "batch_size = 4\n" in text and "dim = 8\n" in text and "4096" not in text
    assert "NOT measured" not in text
    # asked for the file's own sizes: it sets them and says the speedup was not measured there
    run_export(root, "module", out, [session.id], module_sizes="full")
    text = out.read_text()
    assert "batch_size = 4096\n" in text and "NOT measured at these sizes" in text


def test_an_empty_export_writes_no_file_and_says_why(made: Any, root: Path,
                                                     tmp_path: Path) -> None:
    session, _ = made
    with Session.open(session.id, root) as writer:
        writer.undo()
    out = tmp_path / "accepted.jsonl"
    done = subprocess.run([sys.executable, "-m", "cudal1_tui", "export", session.id,
                           "--format", "jsonl", "--only-accepted", "-o", str(out),
                           "--sessions-dir", str(root)], env=HERE, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1 and not out.exists()
    assert "nothing exported (jsonl): no candidate was accepted" in done.stderr
    assert "wrote" not in done.stderr
