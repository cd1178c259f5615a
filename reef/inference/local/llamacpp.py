"""The llama.cpp forward: prefill and decode steps on a GGUF model's weights (`inference.forward: llama.cpp`),
through the `llama-cpp-python` package's bindings to `libllama`.

It is a drop-in for the compact torch forward (`reef.inference.local.llama.LlamaForward`): the same `prefill`,
`decode`, `score`, `new_cache` and `release`, so the scheduler, sampling, stop conditions, structured output and
token capture are the engine's own and unchanged. llama.cpp only computes logits:
- Every running row is one llama.cpp sequence (`seq_id`) in one context whose key/value cells all rows share
  (`kv_unified`), so a long row can use what short ones leave free. `RowSet` is a batch's list of sequences.
- The prompt token ids are the engine's own (the Hugging Face tokenizer the GGUF converts to, the same vocabulary),
  fed as ids: llama.cpp never tokenizes.
- A LoRA release is the factors peft loaded (`LoraWeights`), written once to a GGUF adapter file (q/k rows
  permuted as llama.cpp's converter permutes the base weights) and set on the context before each step of its
  batch. One base serves every scenario's release, as with the torch forward.

Precision: the weights are the GGUF file's own (`inference.dtype: gguf`, e.g. Q4_1, exactly what the torch engine
de-quantizes from the same file), which llama.cpp multiplies against activations quantized to 8 bits; or those
weights de-quantized and stored as bfloat16 (or float16, float32) by `convert`, once, which its bfloat16 kernels
batch well. The log-probs recorded are those logits', and each record says which (`training.precision`, e.g.
`llama.cpp-bf16`), so the training job's first-step gap (`rollout_first_step`) shows what the importance ratio sees.
"""

from __future__ import annotations

import collections
import ctypes
import logging
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from reef.core.cores import usable_cores
from reef.inference.local.llama import LoraWeights
from reef.inference.local.prefixes import shared_prefixes

log = logging.getLogger(__name__)

# llama.cpp's names for the Hugging Face projections of a Llama block.
_TENSOR_NAMES = {
    "q_proj": "attn_q",
    "k_proj": "attn_k",
    "v_proj": "attn_v",
    "o_proj": "attn_output",
    "gate_proj": "ffn_gate",
    "up_proj": "ffn_up",
    "down_proj": "ffn_down",
}


def available() -> bool:
    """True where the `llama-cpp-python` package (and its `libllama`) can be imported."""
    try:
        _bindings()
    except RuntimeError:
        return False
    return True


def _bindings() -> Any:
    try:
        import llama_cpp
    except Exception as exc:  # ImportError, or an OSError from a libllama that does not load
        raise RuntimeError(
            "inference.forward 'llama.cpp' needs the llama-cpp-python package (make setup-llamacpp): " + str(exc)
        ) from exc
    global _log_callback
    if _log_callback is None:  # the package's own callback prints llama.cpp's info lines (each graph reserve)
        _log_callback = llama_cpp.llama_log_callback(_log_line)
        llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))
    return llama_cpp


_log_callback: Any = None
_last_level = 0


def _log_line(level: int, text: bytes, user_data: Any) -> None:
    # ggml's levels: 1 debug, 2 info, 3 warn, 4 error, 5 continues the previous line. Warnings and errors are logged.
    global _last_level
    level = _last_level if level == 5 else level
    _last_level = level
    # The cache is unified: its size is every row's positions together, which llama.cpp warns is more than the
    # model was trained on; no row goes past the model's own maximum (the engine refuses longer requests).
    if level >= 3 and b"n_ctx_seq" not in text:
        log.log(
            logging.ERROR if level == 4 else logging.WARNING, "llama.cpp: %s", text.decode(errors="replace").rstrip()
        )


class RowSet:
    """A batch's rows as llama.cpp sequences: `seqs[i]` holds row i's cached positions, `tokens[i]` their ids."""

    def __init__(self, forward: LlamaCppForward) -> None:
        self._forward = forward
        self.seqs: list[int] = []
        self.tokens: list[list[int]] = []

    @property
    def rows(self) -> int:
        return len(self.seqs)

    def add(self, prompts: list[list[int]]) -> list[int]:
        """New rows holding `prompts` (written by the prefill that follows); returns their sequences."""
        seqs = [self._forward.take_sequence() for _ in prompts]
        self.seqs.extend(seqs)
        self.tokens.extend(list(prompt) for prompt in prompts)
        return seqs

    def keep(self, keep: list[int]) -> None:
        """Keep rows `keep` (increasing indices), in that order; the others' cells are freed."""
        kept = set(keep)
        for index, seq in enumerate(self.seqs):
            if index not in kept:
                self._forward.free_sequence(seq)
        self.seqs = [self.seqs[i] for i in keep]
        self.tokens = [self.tokens[i] for i in keep]


class LlamaCppForward:
    """Prefill, decode and score on one llama.cpp context over `gguf`; see the module docstring."""

    device = torch.device("cpu")

    def __init__(
        self,
        gguf: Path,
        max_rows: int,
        threads: int,
        positions_per_row: int = 1024,
        max_adapters: int = 8,
        amx: bool = False,
    ) -> None:
        lib = self._lib = _bindings()
        lib.llama_backend_init()
        self.weights = gguf  # the file whose weights it multiplies
        model_params = lib.llama_model_default_params()
        model_params.n_gpu_layers = 0
        # llama.cpp's "extra" buffer types repack quantized weights for its AMX kernels: only where
        # `llamacpp_amx.amx_usable` says they work here. Elsewhere they would repack nothing this model has on x86,
        # or crash (see there).
        model_params.use_extra_bufts = amx
        self._model = lib.llama_model_load_from_file(str(gguf).encode(), model_params)
        if not self._model:
            raise ValueError(f"llama.cpp could not load {gguf}")
        self._vocab_size = lib.llama_vocab_n_tokens(lib.llama_model_get_vocab(self._model))
        self._batch_capacity = 512
        params = lib.llama_context_default_params()
        params.n_ctx = max(4096, max_rows * positions_per_row)
        params.n_batch = params.n_ubatch = self._batch_capacity
        params.n_seq_max = max_rows + 1  # one more for `score`
        params.n_threads = params.n_threads_batch = threads
        params.kv_unified = True
        # Flash attention skips the cells of other rows (masked in a unified cache) instead of multiplying them:
        # 1.4x (8 rows) to 1.8x (16 rows) the aggregate rate of llama.cpp's default (docs/results/).
        params.flash_attn_type = lib.LLAMA_FLASH_ATTN_TYPE_ENABLED
        params.no_perf = True
        self._ctx = lib.llama_init_from_model(self._model, params)
        if not self._ctx:
            raise RuntimeError(f"llama.cpp could not create a context of {params.n_ctx} positions")
        self._memory = lib.llama_get_memory(self._ctx)
        self._batch = lib.llama_batch_init(self._batch_capacity, 0, 1)
        self._free = collections.deque(range(max_rows + 1))
        self._adapters: collections.OrderedDict[int, tuple[LoraWeights, Any]] = collections.OrderedDict()
        self._max_adapters = max_adapters
        self._adapter_dir = tempfile.TemporaryDirectory(prefix="reef-llamacpp-")
        description = ctypes.create_string_buffer(256)
        lib.llama_model_desc(self._model, description, len(description))
        self.precision = "llama.cpp-" + description.value.decode().split()[-1].lower()  # e.g. llama.cpp-q4_1
        if amx:
            self.precision += "-amx"

    # The slot-cache protocol of the torch forward.
    def new_cache(self) -> RowSet:
        return RowSet(self)

    def release(self, cache: RowSet) -> None:
        cache.keep([])

    def take_sequence(self) -> int:
        if not self._free:
            raise RuntimeError("llama.cpp has no free sequence (more rows than inference.max_batch_size)")
        return self._free.popleft()

    def free_sequence(self, seq: int) -> None:
        self._lib.llama_memory_seq_rm(self._memory, seq, -1, -1)
        self._free.append(seq)

    def prefill(self, cache: RowSet, prompts: list[list[int]], pad_id: int, lora: LoraWeights | None) -> torch.Tensor:
        """Add `prompts` to `cache` as new rows; return their last positions' logits ([rows, vocab]).

        A prompt that begins as a running row of the batch or an earlier prompt of this call does (the same system
        prompt, or the same question sampled several times) shares that row's cells for the common prefix
        (`llama_memory_seq_cp` adds a sequence to cells, it copies nothing) and only its remaining tokens are
        computed; see `shared_prefixes`."""
        plan = shared_prefixes(cache.tokens, prompts)
        donors = cache.seqs + cache.add(prompts)  # running rows, then the new ones: the indices `plan` names
        seqs = donors[len(donors) - len(prompts) :]
        logits: dict[int, torch.Tensor] = {}
        for wave in sorted({wave for wave, _, _ in plan}):
            members = [i for i, (w, _, _) in enumerate(plan) if w == wave]
            tokens: list[tuple[int, int, int, bool]] = []
            for i in members:
                _, donor, shared = plan[i]
                if shared:
                    self._lib.llama_memory_seq_cp(self._memory, donors[donor], seqs[i], 0, shared)
                prompt = prompts[i]
                tokens += [
                    (prompt[position], position, seqs[i], position == len(prompt) - 1)
                    for position in range(shared, len(prompt))
                ]
            logits.update(zip(members, self._run(tokens, lora), strict=True))
        return torch.stack([logits[i] for i in range(len(prompts))])

    def decode(self, cache: RowSet, last: torch.Tensor, lora: LoraWeights | None) -> torch.Tensor:
        """Feed each row its next token `last` ([rows]); return the logits after it ([rows, vocab])."""
        ids = last.tolist()
        tokens = [(ids[i], len(cache.tokens[i]), seq, True) for i, seq in enumerate(cache.seqs)]
        logits = self._run(tokens, lora)
        for row, token in zip(cache.tokens, ids, strict=True):
            row.append(token)
        return logits

    def score(self, prompt_ids: list[int], completion_ids: list[int], lora: LoraWeights | None) -> torch.Tensor:
        """Temperature-1 log-probs of `completion_ids` after `prompt_ids` ([len(completion)], float32)."""
        ids = prompt_ids + completion_ids[:-1]
        seq = self.take_sequence()
        try:
            logits = self._run(
                [(token, position, seq, position >= len(prompt_ids) - 1) for position, token in enumerate(ids)], lora
            )
        finally:
            self.free_sequence(seq)
        logprobs = torch.log_softmax(logits, dim=-1)
        return logprobs.gather(1, torch.tensor(completion_ids, dtype=torch.long).unsqueeze(1)).squeeze(1)

    def _run(self, tokens: list[tuple[int, int, int, bool]], lora: LoraWeights | None) -> torch.Tensor:
        """Decode `tokens` (id, position, sequence, wants logits) in chunks; the logits asked for, in order."""
        lib, batch = self._lib, self._batch
        self._set_adapter(lora)
        outputs: list[torch.Tensor] = []
        for start in range(0, len(tokens), self._batch_capacity):
            chunk = tokens[start : start + self._batch_capacity]
            wanted = 0
            for i, (token, position, seq, logits) in enumerate(chunk):
                batch.token[i] = token
                batch.pos[i] = position
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = seq
                batch.logits[i] = logits
                wanted += logits
            batch.n_tokens = len(chunk)
            status = lib.llama_decode(self._ctx, batch)
            if status != 0:
                raise RuntimeError(
                    "llama.cpp could not decode "
                    + ("(its key/value cells are full)" if status == 1 else f"(status {status})")
                )
            if wanted:
                pointer = lib.llama_get_logits(self._ctx)
                values = np.ctypeslib.as_array(pointer, shape=(wanted, self._vocab_size))
                outputs.append(torch.from_numpy(values.copy()))
        return torch.cat(outputs) if len(outputs) > 1 else outputs[0]

    def _set_adapter(self, lora: LoraWeights | None) -> None:
        lib = self._lib
        if lora is None:
            lib.llama_set_adapters_lora(self._ctx, None, 0, None)
            return
        entry = self._adapters.get(id(lora))
        if entry is None or entry[0] is not lora:
            entry = (lora, self._load_adapter(lora))
            self._adapters[id(lora)] = entry
            while len(self._adapters) > self._max_adapters:
                _, (_, old) = self._adapters.popitem(last=False)
                lib.llama_set_adapters_lora(self._ctx, None, 0, None)
                lib.llama_adapter_lora_free(old)
        self._adapters.move_to_end(id(lora))
        adapters = (lib.llama_adapter_lora_p_ctypes * 1)(entry[1])
        scales = (ctypes.c_float * 1)(1.0)
        lib.llama_set_adapters_lora(self._ctx, adapters, 1, scales)

    def _load_adapter(self, lora: LoraWeights) -> Any:
        path = Path(self._adapter_dir.name) / f"{id(lora)}.gguf"
        lib, model = self._lib, self._model
        write_adapter(lora, path, int(lib.llama_model_n_head(model)), int(lib.llama_model_n_head_kv(model)))
        adapter = self._lib.llama_adapter_lora_init(self._model, str(path).encode())
        path.unlink()
        if not adapter:
            raise RuntimeError("llama.cpp could not load the adapter (see the log above)")
        return adapter

    def close(self) -> None:
        lib = self._lib
        for _, adapter in self._adapters.values():
            lib.llama_adapter_lora_free(adapter)
        self._adapters.clear()
        lib.llama_batch_free(self._batch)
        lib.llama_free(self._ctx)
        lib.llama_model_free(self._model)
        self._adapter_dir.cleanup()


def write_adapter(lora: LoraWeights, path: Path, heads: int, kv_heads: int) -> None:
    """Write `lora` as a llama.cpp GGUF LoRA adapter: `blk.{i}.{tensor}.weight.lora_{a,b}` in float32.

    B already carries peft's scaling, so alpha = rank makes llama.cpp's scale (alpha / rank) 1. The rows of q's and
    k's B are permuted as llama.cpp's converter permutes q and k themselves (rotary pairs interleaved per head)."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    rank = next((a.shape[0] for layer in lora.layers for a, _ in layer.values()), 1)
    writer.add_float32("adapter.lora.alpha", float(rank))
    for index, layer in enumerate(lora.layers):
        for projection, (a, b) in layer.items():
            if projection == "q_proj":
                b = _permute_rows(b, heads)
            elif projection == "k_proj":
                b = _permute_rows(b, kv_heads)
            name = f"blk.{index}.{_TENSOR_NAMES[projection]}.weight"
            writer.add_tensor(name + ".lora_a", a.float().contiguous().numpy())
            writer.add_tensor(name + ".lora_b", b.float().contiguous().numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _permute_rows(weight: torch.Tensor, heads: int) -> torch.Tensor:
    # llama.cpp's GGUF layout of q/k: each head's rotary halves interleaved (the converter's `permute`).
    rows = weight.shape[0]
    return weight.reshape(heads, 2, rows // heads // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


# `inference.dtype` -> the llama.cpp file type whose weights llama.cpp multiplies.
FILE_TYPES = {
    "bfloat16": "LLAMA_FTYPE_MOSTLY_BF16",
    "float16": "LLAMA_FTYPE_MOSTLY_F16",
    "float32": "LLAMA_FTYPE_ALL_F32",
}


def convert(source: Path, target: Path, dtype: str) -> None:
    """Write `source`'s weights, de-quantized and stored as `dtype` (a `FILE_TYPES` key), as the GGUF file `target`.

    De-quantizing is what the torch engine does to the same file, so the bfloat16 weights are those its bfloat16
    matmuls multiply (each Q4_1 value rounded once to bfloat16)."""
    lib = _bindings()
    params = lib.llama_model_quantize_default_params()
    params.ftype = getattr(lib, FILE_TYPES[dtype])
    params.allow_requantize = True
    params.nthread = default_threads()
    if lib.llama_model_quantize(str(source).encode(), str(target).encode(), ctypes.byref(params)) != 0:
        raise RuntimeError(f"llama.cpp could not convert {source} to {dtype} (see the log above)")


def default_threads() -> int:
    """Every core: llama.cpp's threads, unlike torch's, measured faster with the HTTP loop sharing them
    (docs/results/)."""
    return usable_cores()
