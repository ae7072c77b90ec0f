"""Does our timing loop charge a candidate its host launch cost? (docs/benchmarks/agreement.md)

    python benchmarks/launch_latency_gpu.py                       # the corpus pairs below
    python benchmarks/launch_latency_gpu.py --pairs gelu_swish_compile --calls 50
    python benchmarks/launch_latency_gpu.py --device cpu          # plumbing only, CPU sizes

On the H100 the references of both harnesses agreed within 2 %, while our candidate times were
longer by about each candidate's host cost per call (+40 us Triton, +0.12 ms Inductor), when our
``Clock`` synced the device before every call and hid the launch only behind its 2×L2 flush;
``triton.testing.do_bench`` never syncs between calls and flushes 256 MB. The shipped ``Clock``
now gives the GPU a head start (``timing.HOLD_MS`` of spinning after the flush). For each pair
and side this prints, in one plain process (no guard, no sandbox):

* ``do_bench``: ``triton.testing.do_bench`` median, through the independent harness's
  ``bench`` (CUDA only);
* ``clock``: ``Clock.time_call(flush=True)`` median, as shipped (with the head start);
* ``no head start``: the same with ``hold_ms=0``, the loop before the head start;
* ``256 MB flush``: no head start, a 256 MB flush buffer as do_bench's;
* ``host``: the host time of one call right after a device sync (launch cost, no GPU wait).

If ``no head start - do_bench`` tracks ``host - flush time`` and ``clock`` closes the gap, the
launch cost explained it and the head start removes it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from compare_gpu import shrink_for_cpu  # noqa: E402
from independent_harness import (  # noqa: E402
    STRICT_FP32,
    bench,
    build_models,
    import_file,
    set_flags,
    to_device,
)

from cudal1_evaluator.common.timing import Clock  # noqa: E402

MANIFEST = ROOT / "benchmarks" / "corpus" / "manifest.toml"
PAIRS = ("gelu_swish_triton", "gelu_swish_compile", "diag_broadcast", "rmsnorm_jit_script",
         "gelu_swish_inplace_intermediate", "mlp_cuda_graph_clone", "conv_bn_fold_eval")
Call = Callable[[], Any]


def median_clock(clock: Clock, fn: Call, calls: int) -> float:
    for _ in range(3):
        clock.time_call(fn, flush=True)
    return statistics.median(clock.time_call(fn, flush=True)[0] for _ in range(calls))


def median_host(clock: Clock, fn: Call, calls: int) -> float:
    samples = []
    for _ in range(calls):
        clock.sync()
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    clock.sync()
    return statistics.median(samples)


def measure(name: str, fn: Call, device: torch.device, calls: int) -> dict[str, Any]:
    on_cuda = device.type == "cuda"
    clock = Clock(device)
    row: dict[str, Any] = {"side": name,
                           "do_bench": bench(fn, str(device), 200) if on_cuda else None,
                           "clock": median_clock(clock, fn, calls)}
    if on_cuda:
        plain = Clock(device, hold_ms=0.0)
        row["no_hold"] = median_clock(plain, fn, calls)
        plain._flush_buf = torch.empty((256 << 20) // 4, dtype=torch.int32, device=device)
        row["flush_256MB"] = median_clock(plain, fn, calls)
    row["host"] = median_host(clock, fn, calls)
    return row


def pair_rows(meta: dict[str, Any], device: torch.device, calls: int) -> list[dict[str, Any]]:
    text = (ROOT / meta["problem"]).read_text(encoding="utf-8")
    if device.type == "cpu":
        text = shrink_for_cpu(text)
    shrunk = Path(tempfile.mkdtemp(prefix="latency-")) / f"{meta['name']}_problem.py"
    shrunk.write_text(text, encoding="utf-8")
    set_flags(STRICT_FP32)
    candidate = import_file(f"latency_{meta['name']}_candidate", ROOT / meta["candidate"])
    problem = import_file(f"latency_{meta['name']}_problem", shrunk)
    reference, model_new = build_models(problem, candidate, str(device))
    torch.manual_seed(0)
    inputs = to_device(problem.get_inputs(), str(device))
    with torch.no_grad():
        model_new(*inputs)  # lazy builds, compilation, graph capture
        return [{"pair": meta["name"], **measure(side, lambda m=model: m(*inputs), device, calls)}
                for side, model in (("reference", reference), ("candidate", model_new))]


def fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", nargs="*", default=list(PAIRS))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    device = torch.device(args.device)
    manifest = {p["name"]: p for p in tomllib.loads(MANIFEST.read_text("utf-8"))["pair"]}
    print("| pair | side | do_bench ms | clock ms | no head start ms | 256 MB flush ms "
          "| host ms per call |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in args.pairs:
        try:
            rows = pair_rows(manifest[name], device, args.calls)
        except Exception as exc:  # one pair's failure must not cost the rest of the call
            print(f"| {name} | failed: {type(exc).__name__}: {str(exc)[:120]} | | | | | |")
            continue
        for r in rows:
            print(f"| {r['pair']} | {r['side']} | {fmt(r['do_bench'])} | {fmt(r['clock'])} "
                  f"| {fmt(r.get('no_hold'))} | {fmt(r.get('flush_256MB'))} "
                  f"| {fmt(r['host'])} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
