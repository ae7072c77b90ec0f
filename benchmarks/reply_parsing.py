"""Reply parsing time against reply size: ``python benchmarks/reply_parsing.py``.

Each shape is a reply a model really sends when it goes wrong (runaway reasoning tags, a
huge helper above the code, a syntax error near the top, prose in circles); each is parsed
by ``cudal1_tui.llm.parsing.parse_reply`` at growing sizes, and the static gate runs on the
code when there is some. Linear parsing shows as a time roughly proportional to the size.
The engine cuts replies above ``max_reply_kb`` (default 256 KB) before parsing; the last
column is the time for a 10 MB reply after that cut.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cudal1_tui.analysis.gate import check_candidate  # noqa: E402
from cudal1_tui.engine.capping import cap_reply  # noqa: E402
from cudal1_tui.llm.parsing import parse_reply  # noqa: E402
from cudal1_tui.problem.signature import class_signature_of  # noqa: E402

GOOD = (ROOT / "tests" / "data" / "replies" / "well_formed.md").read_text()
REFERENCE = (ROOT / "tests" / "data" / "replies" / "reference_problem.py").read_text()
SIZES_KB = (25, 100, 200, 400)


def unclosed_think(size: int) -> str:
    return "<think> hmm " * (size // 12) + GOOD


def big_helper(size: int) -> str:
    lines = "".join(f"    x{i} = torch.relu(x)  # line {i}\n" for i in range(size // 36))
    return GOOD.replace("class ModelNew", f"def helper(x):\n{lines}    return x\n\n"
                        "class ModelNew", 1)


def error_near_top(size: int) -> str:
    lines = "".join(f"    x{i} = torch.relu(x) +\n" for i in range(size // 26))
    return GOOD.replace("class ModelNew", f"def helper(x):\n{lines}    return x\n\n"
                        "class ModelNew", 1)


def prose_in_circles(size: int) -> str:
    return "Let me check it again. " * (size // 23) + "\n" + GOOD


SHAPES: dict[str, Callable[[int], str]] = {
    "unclosed <think>": unclosed_think,
    "big helper": big_helper,
    "syntax error near top": error_near_top,
    "prose in circles": prose_in_circles,
}


def seconds(text: str) -> tuple[float, float]:
    """(parse s, gate s) of one reply."""
    signature = class_signature_of(REFERENCE, "Model")
    started = time.perf_counter()
    parsed = parse_reply(text, model_signature=signature)
    parsed_at = time.perf_counter()
    if parsed.ok:
        check_candidate(parsed.code, REFERENCE)
    return parsed_at - started, time.perf_counter() - parsed_at


def main() -> None:
    head = "".join(f"{f'{kb} KB':>16}" for kb in SIZES_KB)
    print(f"{'shape':24}{head}{'10 MB (cut)':>16}   (parse s / gate s)")
    for name, make in SHAPES.items():
        cells = []
        for kb in SIZES_KB:
            parse_s, gate_s = seconds(make(kb * 1024))
            cells.append(f"{parse_s:7.2f}/{gate_s:<7.2f}")
        capped = cap_reply(make(10 * 2**20), "", 256)
        parse_s, gate_s = seconds(capped.content)
        cells.append(f"{parse_s:7.2f}/{gate_s:<7.2f}")
        print(f"{name:24}" + "".join(f"{c:>16}" for c in cells))


if __name__ == "__main__":
    main()
