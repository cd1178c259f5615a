"""Which weights llama.cpp serves fastest on this CPU (`faster_dtype`): measured once over every candidate, not guessed.

The candidates are the GGUF file's own quantized blocks (`gguf`, e.g. Q4_1, which llama.cpp multiplies against
activations quantized to 8 bits, repacked for its AMX kernels where those work here), and the same weights
de-quantized and stored as float16, float32 and, where the CPU multiplies it natively, bfloat16. No one of them wins
everywhere: the quantized blocks read a quarter of float16's bytes, which is what one row's decode step waits on,
but a batch of rows pays their de-quantization on every weight, and llama.cpp's CPU backend has no batched kernel for
Q4_1 (docs/results/2026-12-05-engine-speed.md).
"""

from __future__ import annotations

import hashlib
import json
import logging
import platform
import random
import time
from collections.abc import Callable
from pathlib import Path

from reef.inference.local.llama import bfloat16_supported
from reef.inference.local.llamacpp import LlamaCppForward, default_threads
from reef.inference.local.llamacpp_amx import cpu_info, cpu_library
from reef.inference.local.model_files import converted_once

log = logging.getLogger(__name__)

PROMPTS, PROMPT_TOKENS, STEPS = 8, 40, 16  # the mixed load `faster_dtype` times
CLEARLY_SLOWER = 1.25  # a first run this many times the best so far is not run again


def candidates() -> tuple[str, ...]:
    """The `inference.dtype` values `faster_dtype` measures here."""
    return ("gguf", "bfloat16", "float16", "float32") if bfloat16_supported() else ("gguf", "float16", "float32")


def faster_dtype(gguf: Path, cache_dir: Path, weights: Callable[[str], Path], amx: bool = False) -> str:
    """Of `candidates()`, the weights (`weights(dtype)`: their GGUF file, converted once) that serve a mixed load
    fastest here; `amx`: the file's own blocks are multiplied by llama.cpp's AMX kernels. The load is as many tokens
    decoded alone as in a batch: `PROMPTS` prompts prefilled, `STEPS` decode steps of all those rows, then
    `STEPS * PROMPTS` of one row; best of two runs each, but one for a candidate whose first run is already
    `CLEARLY_SLOWER` than the best so far. The answer is kept in `cache_dir`, once per build of the
    library, CPU model, model file and set of candidates."""
    options = candidates()
    identity = f"{gguf.resolve()}:{gguf.stat().st_size}:{_cpu()}:{','.join(options)}:{amx}"
    key = hashlib.sha256(identity.encode()).hexdigest()[:12]

    def measure(out: Path) -> None:
        timings: dict[str, float] = {}
        for dtype in options:
            enough = min(timings.values(), default=float("inf")) * CLEARLY_SLOWER
            timings[dtype] = _mixed_load_s(weights(dtype), amx and dtype == "gguf", enough)
        out.write_text(json.dumps({"cpu": _cpu(), "seconds": timings, "dtype": min(timings, key=timings.__getitem__)}))

    answer = json.loads(
        converted_once(cpu_library() or gguf, cache_dir, f".{gguf.stem}-{key}.dtype.json", measure).read_text()
    )
    seconds = answer["seconds"]
    log.info(
        "llama.cpp serves %s here (a mixed load of prefill and decode: %s; measured once, kept in the model cache)",
        answer["dtype"],
        ", ".join(f"{dtype} {value:.2f} s" for dtype, value in seconds.items()),
    )
    return str(answer["dtype"])


def _mixed_load_s(gguf: Path, amx: bool, enough: float = float("inf")) -> float:
    """Seconds of the mixed load on `gguf`'s weights, best of two runs; one where the first takes over `enough`."""
    rng = random.Random(0)
    prompts = [[rng.randrange(1000, 40000) for _ in range(PROMPT_TOKENS)] for _ in range(PROMPTS)]
    forward = LlamaCppForward(gguf, max_rows=PROMPTS, threads=default_threads(), amx=amx)
    best = float("inf")
    try:
        for _ in range(2):
            started = time.perf_counter()
            cache = forward.new_cache()
            logits = forward.prefill(cache, prompts, 0, None)
            for _ in range(STEPS):
                logits = forward.decode(cache, logits.argmax(-1), None)
            cache.keep([0])
            logits = logits[:1]
            for _ in range(STEPS * PROMPTS):
                logits = forward.decode(cache, logits.argmax(-1), None)
            forward.release(cache)
            best = min(best, time.perf_counter() - started)
            if best > enough:
                break
    finally:
        forward.close()
    return round(best, 3)


def _cpu() -> str:
    info = cpu_info()
    if not info:
        return platform.processor() or platform.machine()
    identity = (info.get(name, "?") for name in ("model name", "cpu family", "model", "stepping"))
    return " / ".join(identity) + f" x{info['processors']}"
