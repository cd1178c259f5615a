"""Which de-quantized weights llama.cpp serves faster on this CPU (`faster_dtype`): measured once, not guessed.

On a CPU with neither AMX nor native bfloat16 the choice is float16 or float32, and it goes either way: llama.cpp's
AVX2 kernels convert float16 to float32 as they multiply, which halves the bytes a lone row reads but costs
arithmetic that a batch of rows and a prompt's prefill pay on every weight. On a 2-core Zen 1 EPYC (128-bit FMA
units) float32 prefilled prompts 1.8x faster and decoded 16 rows 1.4x faster, the lone row even
(docs/results/2026-12-05-engine-speed.md).
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

from reef.inference.local.llamacpp import LlamaCppForward, default_threads
from reef.inference.local.llamacpp_amx import cpu_info, cpu_library
from reef.inference.local.model_files import converted_once

log = logging.getLogger(__name__)

CANDIDATES = ("float16", "float32")
PROMPTS, PROMPT_TOKENS, STEPS = 8, 40, 16  # the mixed load `faster_dtype` times


def faster_dtype(gguf: Path, cache_dir: Path, weights: Callable[[str], Path]) -> str:
    """Of `CANDIDATES`, the weights (`weights(dtype)`: their GGUF file, converted once) that serve a mixed load
    faster here: `PROMPTS` prompts prefilled, `STEPS` decode steps of all those rows, then `STEPS` of one row; best of
    two runs each. The answer is kept in `cache_dir`, once per build of the library, CPU model and model file."""
    key = hashlib.sha256(f"{gguf.resolve()}:{gguf.stat().st_size}:{_cpu()}".encode()).hexdigest()[:12]

    def measure(out: Path) -> None:
        timings = {dtype: _mixed_load_s(weights(dtype)) for dtype in CANDIDATES}
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


def _mixed_load_s(gguf: Path) -> float:
    rng = random.Random(0)
    prompts = [[rng.randrange(1000, 40000) for _ in range(PROMPT_TOKENS)] for _ in range(PROMPTS)]
    forward = LlamaCppForward(gguf, max_rows=PROMPTS, threads=default_threads())
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
            for _ in range(STEPS):
                logits = forward.decode(cache, logits.argmax(-1), None)
            forward.release(cache)
            best = min(best, time.perf_counter() - started)
    finally:
        forward.close()
    return round(best, 3)


def _cpu() -> str:
    info = cpu_info()
    if not info:
        return platform.processor() or platform.machine()
    identity = (info.get(name, "?") for name in ("model name", "cpu family", "model", "stepping"))
    return " / ".join(identity) + f" x{info['processors']}"
