"""Whether llama.cpp's AMX kernels can multiply a GGUF's quantized weights on this machine (`amx_usable`), asked of a
child process once per build of the library, because builds without the tile-configuration fix crash in them."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

from reef.inference.local.llamacpp import LlamaCppForward, default_threads
from reef.inference.local.model_files import converted_once

log = logging.getLogger(__name__)


def amx_usable(gguf: Path, cache_dir: Path) -> bool:
    """True where llama.cpp's AMX kernels can multiply `gguf`'s quantized weights here: the CPU has AMX-INT8 and a
    child process loaded `gguf` with them and decoded a batch of rows to the logits llama.cpp computes without them.

    llama-cpp-python's sources, built by GCC, crash in those kernels (SIGSEGV at the first batch): GCC's
    `_tile_loadconfig` tells the compiler it reads 8 bytes of the 64-byte tile configuration, so the stores of the
    tile shapes are dropped. `make setup-llamacpp` builds with a one-line fix (`scripts/build_llamacpp.py`); the
    probe runs in a child so that another build cannot take the server down. Its answer is kept in `cache_dir`,
    once per build of the library."""
    if "amx_int8" not in _cpu_flags():
        return False
    library = cpu_library()
    if library is None:
        return False

    def probe(out: Path) -> None:
        try:
            child = subprocess.run(_probe_command(gguf), capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            result = {"usable": False, "reason": "the probe took more than 300 s"}
        else:
            lines = child.stdout.strip().splitlines()
            if child.returncode == 0 and lines:
                result = json.loads(lines[-1])
            else:
                result = {"usable": False, "reason": f"the probe exited with {child.returncode}"}
        out.write_text(json.dumps(result))

    answer = json.loads(converted_once(library, cache_dir, f".{gguf.stem}.amx.json", probe).read_text())
    if not answer["usable"]:
        log.warning(
            "llama.cpp's AMX kernels are not used (%s): `make setup-llamacpp` builds llama-cpp-python with them fixed",
            answer["reason"],
        )
    return bool(answer["usable"])


def _probe_command(gguf: Path) -> list[str]:
    return [sys.executable, "-m", "reef.inference.local.llamacpp_amx", "--probe-amx", str(gguf)]


def _probe_amx(gguf: Path) -> dict[str, Any]:
    """Two rows of a prompt prefilled and decoded one step with and without the AMX kernels (in this process,
    which their crash would end); usable when their log-probs agree as closely as two 8-bit activation paths do."""
    prompts = [list(range(100, 140)), list(range(300, 333))]
    outputs = []
    for amx in (False, True):
        forward = LlamaCppForward(gguf, max_rows=2, threads=default_threads(), amx=amx)
        try:
            cache = forward.new_cache()
            first = forward.prefill(cache, prompts, 0, None)
            second = forward.decode(cache, first.argmax(-1), None)
            outputs.append(torch.log_softmax(torch.cat([first, second]), dim=-1))
        finally:
            forward.close()
    # Each row's 20 likeliest tokens without AMX: their log-probs with AMX (broken kernels give noise, not this).
    top = outputs[0].topk(20, dim=-1).indices
    gap = float((outputs[0].gather(1, top) - outputs[1].gather(1, top)).abs().mean())
    return {"usable": gap < 0.25, "reason": f"mean log-prob gap at the top tokens {gap:.3f} (usable under 0.25)"}


def cpu_library() -> Path | None:
    """llama.cpp's CPU backend library as this build installed it (what a per-build answer is keyed on), or None."""
    import llama_cpp

    libraries = sorted((Path(llama_cpp.__file__).parent / "lib").glob("libggml-cpu*"))
    return libraries[0] if libraries else None


def _cpu_flags() -> set[str]:
    return set(cpu_info().get("flags", "").split())


def cpu_info() -> dict[str, str]:
    """The first processor's fields in `/proc/cpuinfo` (`flags`, `model name`, ...), and `processors`: how many."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())
    fields["processors"] = str(sum(line.startswith("processor") for line in text.splitlines()))
    return fields


if __name__ == "__main__":  # `python -m reef.inference.local.llamacpp_amx --probe-amx GGUF`: amx_usable's child
    if len(sys.argv) == 3 and sys.argv[1] == "--probe-amx":
        print(json.dumps(_probe_amx(Path(sys.argv[2]))))
