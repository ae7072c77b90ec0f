"""A third-party OpenAI-compatible server for the tests: ``transformers serve`` on the CPU.

The model is a tiny random-weight Llama with a word-level tokenizer built in code and saved to a
temporary directory: nothing is downloaded. Its replies are nonsense, which is the point: the
client and the round must take whatever a real server sends.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

MAKE_MODEL = r'''
import sys
from pathlib import Path
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

out = Path(sys.argv[1])
words = ["<unk>", "<s>", "</s>", "<pad>"] + [f"w{i}" for i in range(200)]
words += list("abcdefghijklmnopqrstuvwxyz{}()[]:.,=_#")
vocab = {w: i for i, w in enumerate(dict.fromkeys(words))}
tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
tokenizer.decoder = decoders.WordPiece(prefix="##")
fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>",
                               eos_token="</s>", pad_token="<pad>")
fast.chat_template = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n"
                      "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}")
fast.save_pretrained(out)
config = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64,
                     num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                     max_position_embeddings=8192, bos_token_id=1, eos_token_id=2,
                     pad_token_id=3)
torch.manual_seed(0)
LlamaForCausalLM(config).save_pretrained(out)
'''
SERVE = "from transformers.cli.transformers import main; import sys; sys.exit(main())"


def offline_env(home: Path) -> dict[str, str]:
    """No network, no writes outside ``home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDAL1_", "OPENAI_"))}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_HOME=str(home / "hf"),
               HF_HUB_DISABLE_TELEMETRY="1", TOKENIZERS_PARALLELISM="false")
    return env


def make_tiny_model(where: Path, env: dict[str, str]) -> Path:
    subprocess.run([sys.executable, "-c", MAKE_MODEL, str(where)], env=env, check=True,
                   capture_output=True, timeout=120)
    return where


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class TransformersServer:
    """``transformers serve MODEL`` in a subprocess of its own process group."""

    def __init__(self, model: Path, env: dict[str, str], log: Path) -> None:
        self.model = model
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._log = log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVE, "serve", "--host", "127.0.0.1", "--port",
             str(self.port), "--device", "cpu", str(model)],
            env=env, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        self.log_path = log

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"transformers serve exited: {self.log_path.read_text()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health",
                                            timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                time.sleep(0.3)
        raise RuntimeError(f"transformers serve not ready in {timeout_s} s: "
                           f"{self.log_path.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, 15)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait(timeout=10)
        self._log.close()
