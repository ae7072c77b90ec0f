"""What the parent's GPU watch (``cudal1_evaluator.parent.gpu_watch``) sees on this host.

Starts a process that runs kernels on the GPU for a few seconds, then prints: whether NVML
lists that process under the pid this process knows it by (the watch's attribution check),
the per-process samples NVML keeps (pid, time stamp, SM share) and the spacing of one
process's samples (the sampling period the watch allows for, ``SAMPLE_PERIOD_US``).

    python benchmarks/gpu_watch_diag.py [--seconds 4]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cudal1_evaluator.parent import gpu_watch

LOAD = """
import sys, time, torch
x = torch.randn(4096, 4096, device="cuda")
print(torch.cuda.get_device_properties(0).uuid, flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(20):
        x = (x @ x).tanh_()
    torch.cuda.synchronize()
"""


def _raw(watch: gpu_watch.GpuWatch, mark: int) -> None:
    """NVML's own answers (return codes, counts, stamps) beside this host's clocks."""
    import ctypes

    lib, handle = watch._lib, watch._handle
    if lib is None:
        return
    fn = lib.nvmlDeviceGetProcessUtilization
    for since in (0, mark):
        count = ctypes.c_uint(0)
        code = fn(handle, None, ctypes.byref(count), ctypes.c_ulonglong(since))
        size = max(count.value, 1) + 8
        buf = (gpu_watch._ProcessSample * size)()
        count2 = ctypes.c_uint(size)
        code2 = fn(handle, buf, ctypes.byref(count2), ctypes.c_ulonglong(since))
        stamps = [(buf[i].pid, buf[i].timeStamp, buf[i].smUtil) for i in range(count2.value)]
        print(f"since={since}: sizing code {code} count {count.value}; read code {code2} "
              f"count {count2.value}; first {stamps[:3]} last {stamps[-3:]}")
    print(f"clocks: time.time us {time.time_ns() // 1000}, monotonic us "
          f"{time.monotonic_ns() // 1000}, mark {mark}")


def _poll(watch: gpu_watch.GpuWatch, mark: int, pid: int, seconds: float) -> list[int]:
    """The distinct time stamps of ``pid``'s sample, read every 10 ms (the driver keeps one
    sample per process: the spacing of its stamps is the sampling period)."""
    seen: set[int] = set()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        seen |= {s.timeStamp for s in watch._samples(mark) if s.pid == pid}
        time.sleep(0.01)
    return sorted(seen)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    mark = gpu_watch.now_us()
    load = subprocess.Popen([sys.executable, "-c", LOAD, str(args.seconds)],
                            stdout=subprocess.PIPE, text=True)
    assert load.stdout is not None
    uuid = load.stdout.readline().strip()
    time.sleep(1.0)
    watch = gpu_watch.open_watch(uuid, [load.pid])
    print(f"GPU {uuid}: watch on={watch.on} why_off={watch.why_off!r}")
    print(f"NVML compute pids {watch.compute_pids()}, the load's pid {load.pid}")
    _raw(watch, mark)
    stamps = _poll(watch, mark, load.pid, seconds=min(2.0, args.seconds / 2))
    gaps = [(b - a) / 1e3 for a, b in itertools.pairwise(stamps)]
    if gaps:
        print(f"the load's samples while it ran: {len(stamps)} distinct stamps, median gap "
              f"{statistics.median(gaps):.1f} ms (the watch waits "
              f"{gpu_watch.SAMPLE_PERIOD_US / 1e3:.0f} ms for a sample)")
    load.wait()
    time.sleep(0.5)
    if not watch.on:
        return 1
    _raw(watch, mark)
    others = watch.others_during(mark, lambda: {load.pid})
    print(f"others beside the load (should be none on a quiet GPU): {others}")
    print(f"busy since the mark, the load included: {watch.busy_since(mark)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
