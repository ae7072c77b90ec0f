"""The gate's vocabulary: which canonical names, imports and attributes mean what.

A name rule matches a canonical dotted name exactly or as a prefix on a dot boundary
(``threading`` matches ``threading.Thread``). Prefixes ending in ``*`` match any continuation
(``os.exec*`` matches ``os.execv``).
"""

from __future__ import annotations

from dataclasses import dataclass

from cudal1_tui.analysis.findings import GateSeverity


@dataclass(frozen=True)
class NameRule:
    patterns: tuple[str, ...]
    code: str
    severity: GateSeverity
    reason: str

    def matches(self, name: str) -> bool:
        return any(_match(p, name) for p in self.patterns)


def _match(pattern: str, name: str) -> bool:
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    return name == pattern or name.startswith(pattern + ".")


STREAM = NameRule(
    ("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.ExternalStream", "torch.cuda.set_stream",
     "torch.cuda.streams", "torch.cuda.StreamContext", "torch.Stream", "torch.StreamContext"),
    "side_stream", "reject",
    "uses a CUDA stream other than the current one: work there can escape the timing",
)

CUDA_GRAPHS = ("torch.cuda.graph", "torch.cuda.CUDAGraph", "torch.cuda.graphs",
               "torch.cuda.make_graphed_callables")

NAME_RULES: tuple[NameRule, ...] = (
    STREAM,
    NameRule(
        ("threading", "_thread", "multiprocessing", "torch.multiprocessing", "concurrent",
         "asyncio", "os.fork", "os.forkpty", "os.register_at_fork", "torch.jit.fork",
         "torch.jit._fork", "torch.futures"),
        "threads", "reject",
        "starts threads, processes or async work: output can be produced after the timer stops",
    ),
    NameRule(
        ("gc", "inspect", "sys._getframe", "sys._current_frames", "sys.modules", "sys.settrace",
         "sys.setprofile", "sys.addaudithook", "ctypes", "importlib", "builtins.__import__",
         "traceback.walk_stack", "traceback.extract_stack", "traceback.walk_tb",
         "traceback.print_stack", "builtins.__builtins__"),
        "introspection", "reject",
        "walks the interpreter (gc, frames, modules, ctypes): it can read the harness's data",
    ),
    NameRule(
        ("cudal1_evaluator", "evaluator", "cudal1_tui", "cudal1_reference_problem",
         "cudal1_candidate", "__main__"),
        "harness_access", "reject",
        "reaches into the evaluator or the reference module that judges it",
    ),
    NameRule(
        ("builtins.exec", "builtins.eval", "builtins.compile"),
        "dynamic_code", "reject",
        "runs code built at run time, which the gate cannot inspect",
    ),
    NameRule(
        ("os.system", "os.popen", "os.exec*", "os.spawn*", "os.posix_spawn*", "os.kill",
         "os.killpg", "subprocess", "socket", "urllib", "http", "requests", "httpx", "aiohttp",
         "ftplib", "smtplib", "telnetlib", "xmlrpc", "webbrowser", "pty", "signal", "torch.hub"),
        "process_or_network", "reject",
        "starts processes, sends signals or opens network connections",
    ),
    NameRule(
        ("shutil", "os.remove", "os.unlink", "os.rmdir", "os.removedirs", "os.rename",
         "os.renames", "os.replace", "os.truncate", "os.open", "os.write", "os.link",
         "os.symlink", "os.chmod", "torch.save"),
        "file_write", "reject",
        "writes, moves or deletes files",
    ),
    NameRule(
        ("torch.utils._python_dispatch", "torch.overrides.TorchFunctionMode",
         "torch.overrides.enable_reentrant_dispatch", "torch._subclasses", "torch._C._TensorBase",
         "torch.Tensor._make_subclass", "torch.Tensor._make_wrapper_subclass",
         "torch._C.TensorBase"),
        "tensor_subclass", "reject",
        "tensor subclasses or dispatch modes can return lazy or fake results",
    ),
    NameRule(
        ("torch.initial_seed", "torch.get_rng_state", "torch.random.get_rng_state",
         "torch.random.initial_seed", "torch.cuda.get_rng_state", "torch.cuda.get_rng_state_all",
         "torch.cuda.initial_seed", "torch.default_generator", "torch.set_rng_state",
         "torch.cuda.set_rng_state"),
        "rng_state", "reject",
        "reads or sets the random state the harness uses to make inputs",
    ),
    NameRule(
        ("torch.set_default_dtype", "torch.set_default_tensor_type", "torch.set_default_device"),
        "global_defaults", "reject",
        "changes torch's default dtype or device, which would change the reference's inputs",
    ),
    NameRule(
        ("os.environ", "os.getenv", "os.putenv", "os.unsetenv"),
        "environment", "warn",
        "reads or sets environment variables",
    ),
    NameRule(
        ("tempfile", "os.makedirs", "os.mkdir", "torch.load"),
        "filesystem", "warn",
        "touches the filesystem (temp dirs, loading files)",
    ),
    NameRule(
        ("torch.manual_seed", "torch.seed", "torch.cuda.manual_seed", "torch.cuda.manual_seed_all",
         "torch.random.manual_seed", "random.seed", "numpy.random.seed"),
        "reseeds", "warn",
        "re-seeds a global random generator",
    ),
    NameRule(
        ("torch.set_num_threads", "torch.set_num_interop_threads",
         "torch.use_deterministic_algorithms", "torch.set_grad_enabled",
         "torch.set_flush_denormal"),
        "global_setting", "warn",
        "changes a global torch setting (reported; restored before the reference is timed)",
    ),
)

# Imports that are findings on their own, whatever is used from them.
IMPORT_RULES: tuple[NameRule, ...] = (
    NameRule(("time", "timeit"), "timer_import", "warn",
             "imports a timer module: harmless for timing inside forward, fatal if it patches"),
    NameRule(("builtins",), "builtins_import", "warn", "imports builtins"),
)

# Attribute names suspicious on any object (frames, closures, subclass construction).
ATTRIBUTE_RULES: dict[str, NameRule] = {
    name: NameRule((name,), "introspection", "reject",
                   f"reads `{name}`: frame, code or class-graph walking reaches the harness")
    for name in ("f_back", "f_locals", "f_globals", "f_builtins", "__globals__", "gi_frame",
                 "tb_frame", "cr_frame", "ag_frame", "__subclasses__", "__code__", "_getframe",
                 "__closure__", "__builtins__")
}
for _name in ("_make_subclass", "_make_wrapper_subclass", "__torch_function__",
              "__torch_dispatch__"):
    ATTRIBUTE_RULES[_name] = NameRule(
        (_name,), "tensor_subclass", "reject",
        f"uses `{_name}`: tensor subclasses can return lazy or fake results")

# Namespaces whose attributes a candidate must never assign (monkeypatching).
PROTECTED = ("torch", "time", "timeit", "builtins", "sys", "random", "math", "os", "threading",
             "gc", "functools", "operator", "numpy", "triton")
# ... except these torch configuration namespaces, which are settings (reported, not rejected).
SETTING_NAMESPACES = ("torch.backends", "torch._dynamo.config", "torch._inductor.config",
                      "torch.jit", "torch._functorch.config")

PRECISION_NAMES = ("torch.float16", "torch.half", "torch.bfloat16", "torch.autocast",
                   "torch.cuda.amp", "torch.amp", "torch.cpu.amp")
PRECISION_METHODS = ("half", "bfloat16")
PRECISION_FLAGS = ("allow_tf32", "allow_fp16_reduced_precision_reduction",
                   "allow_bf16_reduced_precision_reduction")


def matches(pattern: str, name: str) -> bool:
    return _match(pattern, name)
