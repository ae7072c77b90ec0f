"""An OpenAI-compatible server that really generates on the GPU before each reply (issue 24).

It serves the replies of a replay script (`cudal1_tui.replay`: a JSON ``{"model": ...,
"replies": [...]}``, keyed per problem), so a session evaluates known candidates; but before
it answers a chat request it runs a model: ``--generator llama`` makes a transformers
``LlamaForCausalLM`` with random weights at start (no download) and runs ``model.generate``
on ``--device`` for ``--gen-tokens`` new tokens over a batch of ``--gen-batch`` random
prompts as long as the request's (about 4 characters a token). ``matmul`` is a CPU stand-in
(a torch matmul loop of ``--gen-seconds``), ``none`` answers at once. One generation runs at
a time, as in a server's one engine. Each one is appended to ``--generations`` (JSONL:
request number, wall-clock start and end, ``session`` or ``load``: a prompt holding
``LOAD_MARK`` comes from the benchmark's background client).

``--idle`` loads the model but never generates (the idle baseline, with the same memory
held). ``--hold-free-mib N`` then takes all free GPU memory but N MiB, as a server that
reserved most of the card. ``--like "transformers serve"`` only puts those words on the
command line: the app reads a server's kind from its listener's command line, and this
server does run transformers, so the app's memory message names that server's fix.

    python benchmarks/generating_server.py --replies replies.json --url-file url.txt \\
        --generator llama --device cuda --like "transformers serve"

The URL (``http://127.0.0.1:PORT/v1``) is written to ``--url-file`` once the model is made
and warmed up (one generation, timed and printed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from cudal1_tui.replay import ReplayConfig, ReplayServer  # noqa: E402

LOAD_MARK = "cudal1-shared-gpu-background-load"  # in the background client's prompts
MIB = 2**20
Generate = Callable[[int], None]  # prompt tokens -> one generation, done when it returns


def prompt_tokens(prompt: str, cap: int) -> int:
    return max(16, min(cap, len(prompt) // 4))


def llama(args: argparse.Namespace) -> Generate:
    """A random-weight Llama on ``args.device`` (transformers imported only here)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    heads = max(1, args.hidden // 128)
    config = LlamaConfig(vocab_size=32000, hidden_size=args.hidden,
                         intermediate_size=args.hidden * 11 // 4 // 256 * 256,
                         num_hidden_layers=args.layers, num_attention_heads=heads,
                         num_key_value_heads=heads, max_position_embeddings=4096)
    torch.manual_seed(0)
    with torch.device(args.device):  # made on the GPU: fast
        model = LlamaForCausalLM(config)
    model = model.to(dtype=torch.bfloat16).eval()  # type: ignore[call-arg]

    def generate(tokens: int) -> None:
        ids = torch.randint(100, config.vocab_size, (args.gen_batch, tokens),
                            device=args.device)
        with torch.inference_mode():
            model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                           max_new_tokens=args.gen_tokens, min_new_tokens=args.gen_tokens,
                           do_sample=False, pad_token_id=0)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    return generate


def matmul(args: argparse.Namespace) -> Generate:
    """A CPU stand-in for a model: matmuls for ``args.gen_seconds``."""
    import torch

    a = torch.randn(256, 256)

    def generate(_: int) -> None:
        end = time.monotonic() + args.gen_seconds
        while time.monotonic() < end:
            a @ a  # the work is the point

    return generate


GENERATORS: dict[str, Callable[[argparse.Namespace], Generate]] = {"llama": llama,
                                                                  "matmul": matmul}


class Generations:
    """The ``before_reply`` hook: one generation per chat request, one at a time, logged."""

    def __init__(self, generate: Generate | None, log: Path | None, cap: int) -> None:
        self.generate, self.log, self.cap = generate, log, cap
        self._lock = threading.Lock()

    def __call__(self, number: int, prompt: str) -> None:
        if self.generate is None:
            return
        source = "load" if LOAD_MARK in prompt else "session"
        with self._lock:
            start = time.time()
            self.generate(prompt_tokens(prompt, self.cap))
            end = time.time()
        if self.log is not None:
            row = {"n": number, "source": source, "start": round(start, 6),
                   "end": round(end, 6)}
            with self.log.open("a", encoding="utf-8") as out:
                out.write(json.dumps(row) + "\n")


_held: list[object] = []  # the memory taken by --hold-free-mib, alive until the end


def hold_memory(free_mib: int, device: str) -> None:
    """Take the GPU's free memory but ``free_mib`` MiB (as a server's reservation)."""
    import torch

    free, _ = torch.cuda.mem_get_info(torch.device(device))
    take = free - free_mib * MIB
    if take > 0:
        _held.append(torch.empty(take, dtype=torch.uint8, device=device))
    free, total = torch.cuda.mem_get_info(torch.device(device))
    print(f"holding GPU memory: {free // MIB} MiB free of {total // MIB} MiB", flush=True)


def warm_up(generate: Generate, cap: int) -> None:
    generate(cap)  # first call: kernels load, allocator grows
    started = time.monotonic()
    generate(cap)
    print(f"one generation ({cap} prompt tokens): {time.monotonic() - started:.2f} s",
          flush=True)


def _stop(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replies", type=Path, required=True, help="replay script (JSON)")
    parser.add_argument("--url-file", type=Path, required=True,
                        help="written with the base URL once the server is ready")
    parser.add_argument("--port", type=int, default=0, help="0: an ephemeral port")
    parser.add_argument("--generator", choices=("llama", "matmul", "none"), default="llama")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--idle", action="store_true", help="make the model, never generate")
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--gen-tokens", type=int, default=128, help="new tokens a generation")
    parser.add_argument("--gen-batch", type=int, default=8, help="sequences a generation")
    parser.add_argument("--max-prompt-tokens", type=int, default=1024)
    parser.add_argument("--gen-seconds", type=float, default=0.3, help="matmul: its length")
    parser.add_argument("--hold-free-mib", type=int, default=0,
                        help="take all free GPU memory but this (0: take none)")
    parser.add_argument("--generations", type=Path, default=None, help="JSONL log")
    parser.add_argument("--like", default="", help="words for the command line only")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    generate = GENERATORS[args.generator](args) if args.generator != "none" else None
    if generate is not None:
        warm_up(generate, args.max_prompt_tokens)
    if args.hold_free_mib:
        hold_memory(args.hold_free_mib, args.device)
    hook = Generations(None if args.idle else generate, args.generations,
                       args.max_prompt_tokens)
    server = ReplayServer(ReplayConfig(source=args.replies, port=args.port, before_reply=hook),
                          log=lambda line: print(line, flush=True))
    url = server.bind()
    ready = args.url_file.with_suffix(".tmp")
    ready.write_text(url, encoding="utf-8")
    ready.replace(args.url_file)  # whole or absent: the benchmark polls for it
    print(f"serving {url} ({args.generator}{', idle' if args.idle else ''})", flush=True)
    with contextlib.suppress(KeyboardInterrupt):  # SIGTERM ends it (see _stop)
        server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
