"""`LocalEngine`: an embedded transformers model answering all three dialects, with a LoRA adapter per release."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path
from typing import Any

import torch

from reef.core.capabilities import ENGINE_SUPPLIES
from reef.core.cores import usable_cores
from reef.core.errors import BadRequest
from reef.core.releases import Release
from reef.core.scenarios import Dialect
from reef.core.settings import InferenceSettings
from reef.inference.base import Completion, CompletionStream, Engine, RequestContext
from reef.inference.local.adapters import AdapterSet, Binding, Bindings, binding_for
from reef.inference.local.decode_batch import SlotForward
from reef.inference.local.llama import LlamaForward, bfloat16_supported, supports
from reef.inference.local.model_files import (
    converted_once,
    gguf_source,
    load_base_model,
    resolve_device,
    resolve_model_path,
)
from reef.inference.local.prompt import reply_ids
from reef.inference.local.request import RequestSetup, prompt_ids_of, raise_failure, submit, to_chat
from reef.inference.local.scheduler import Failed, Scheduler
from reef.inference.local.scoring import check_score_request, completion_logprobs
from reef.inference.local.stream import LocalStream, complete
from reef.inference.local.structured import warm

log = logging.getLogger(__name__)


class LocalEngine(Engine):
    """Serves `settings.model_path` in this process: continuous batching on a scheduler thread."""

    scores_completions = True
    supplies = ENGINE_SUPPLIES["local"]

    def __init__(self, settings: InferenceSettings) -> None:
        if not settings.model_path:
            raise ValueError("LocalEngine needs inference.model_path")
        self._settings = settings
        self._bindings = Bindings()
        self._setup: RequestSetup | None = None
        self._adapters: AdapterSet | None = None
        self._vocab_size = 0
        self.compact: SlotForward | None = None  # the compact (or llama.cpp) forward, where it reproduces the model
        self._created = int(time.time())
        self.model_dir: Path | None = None
        self.model_name = settings.served_model_name or _display_name(settings.model_path)

    async def start(self) -> None:
        if self._setup is None:
            await asyncio.to_thread(self._load)

    def _load(self) -> None:
        settings = self._settings
        assert settings.model_path is not None
        started = time.perf_counter()
        self.model_dir = resolve_model_path(settings.model_path, settings.model_cache_dir)
        device = resolve_device(settings.device)
        forward = resolve_forward(settings, device)
        if settings.dtype == "gguf" and forward != "llama.cpp":
            raise BadRequest(
                "inference.dtype 'gguf' (the GGUF file's own quantized weights) needs the llama.cpp forward "
                "(inference.forward 'llama.cpp', or 'auto' with llama-cpp-python installed)",
                "inference.dtype",
            )
        # Under llama.cpp the transformers model only hosts the adapters (peft's factors, kept in float32).
        host_dtype = "auto" if forward == "llama.cpp" else settings.dtype
        model, tokenizer = load_base_model(self.model_dir, device, host_dtype)
        eos_ids = _eos_ids(model, tokenizer)
        warm(tokenizer)
        self._adapters = AdapterSet(model, settings.max_resident_adapters)
        on_llamacpp = forward == "llama.cpp" and (settings.forward == "llama.cpp" or supports(model))
        if device == "cpu" and on_llamacpp:
            # `inference.threads` are llama.cpp's. Torch only samples from a few rows of logits here, and its idle
            # threads would spin on the cores llama.cpp's threads wait for each other on.
            torch.set_num_threads(1)
        elif device == "cpu" and settings.threads:
            torch.set_num_threads(settings.threads)
        elif device == "cpu" and "OMP_NUM_THREADS" not in os.environ:
            # Matmul threads get every core but one, which stays with the asyncio loop (HTTP, recording): when
            # intra-op threads outnumber free cores, torch's barriers stall and decoding slows several-fold.
            # An explicit OMP_NUM_THREADS wins.
            torch.set_num_threads(max(1, usable_cores() - 1))
        if on_llamacpp:
            self.compact = llamacpp_forward(settings, model, device)
        else:  # `auto` on a model neither forward reproduces: the transformers forward, as the torch one would
            self.compact = compact_forward(model, device, settings.dtype)
        if device == "cpu" and not supports(model):
            log.warning(
                "local model %s is a %s (%s), not a Llama: it runs on transformers' own forward, slower than the "
                "compact and llama.cpp forwards, which reproduce Llama-family models only",
                self.model_name,
                getattr(model.config, "model_type", "?"),
                type(model).__name__,
            )
        if not getattr(tokenizer, "chat_template", None):
            log.warning(
                "local model %s ships no chat template: prompts are a plain `Role:` transcript between its BOS "
                "and EOS tokens (reef.inference.local.prompt.PLAIN_TEMPLATE)",
                self.model_name,
            )
        scheduler = Scheduler(
            self._adapters,
            pad_id=tokenizer.pad_token_id,
            eos_ids=eos_ids,
            max_batch_size=settings.max_batch_size,
            max_queue=settings.max_queue,
            compact=self.compact,
        )
        scheduler.start()
        self._vocab_size = int(model.config.vocab_size)
        max_positions = int(getattr(model.config, "max_position_embeddings", 0) or 1 << 20)
        self._setup = RequestSetup(tokenizer, scheduler, self._bindings, settings.default_max_new_tokens, max_positions)
        log.info(
            "local model %s loaded from %s on %s in %.1fs (%s)",
            self.model_name,
            self.model_dir,
            device,
            time.perf_counter() - started,
            "transformers forward"
            if self.compact is None
            else f"{type(self.compact).__name__}, {self.compact.precision}",
        )

    @property
    def setup(self) -> RequestSetup:
        if self._setup is None:
            raise RuntimeError("LocalEngine.start() has not been awaited")
        return self._setup

    async def complete(self, dialect: Dialect, body: dict[str, Any], ctx: RequestContext) -> Completion:
        setup = self.setup
        return await complete(submit(setup, dialect, body, ctx), setup.tokenizer, self.model_name, body)

    async def stream(self, dialect: Dialect, body: dict[str, Any], ctx: RequestContext) -> CompletionStream:
        setup = self.setup
        submitted = submit(setup, dialect, body, ctx)
        first = await submitted.next_event()  # so that a failure before the first token is raised here
        if isinstance(first, Failed):
            raise_failure(first)
        return LocalStream(submitted, first, setup.tokenizer, self.model_name, body)

    async def count_tokens(self, body: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        chat = to_chat(Dialect.MESSAGES, body)
        return {
            "input_tokens": len(
                prompt_ids_of(self.setup.tokenizer, chat, ctx.system_prompt, example_turns=ctx.example_turns)
            )
        }

    async def score(self, prompt_ids: list[int], completion_ids: list[int], ctx: RequestContext) -> list[float]:
        setup, adapters = self.setup, self._adapters
        assert adapters is not None
        check_score_request(prompt_ids, completion_ids, self._vocab_size, setup.max_positions)
        binding = self._bindings.for_request(ctx.scenario, ctx.release_id, ctx.candidate_path)
        scheduler = setup.scheduler

        def forward() -> list[float]:
            # On the scheduler thread, between decode steps: it alone may load adapters or run the model.
            # Scored by the forward that would sample these tokens, so scores and recorded log-probs agree.
            name = binding.adapter_name
            if name is not None and binding.adapter_path is not None:
                adapters.ensure(name, binding.adapter_path, scheduler.in_use())
            with torch.inference_mode():
                if self.compact is not None and adapters.compact(name):
                    scores: list[float] = self.compact.score(prompt_ids, completion_ids, adapters.lora(name)).tolist()
                    return scores
                with adapters.selected(name):
                    return completion_logprobs(adapters.model, prompt_ids, completion_ids)

        scores: list[float] = await asyncio.wrap_future(scheduler.call(forward))
        return scores

    async def score_answer(self, body: dict[str, Any], answer: str, ctx: RequestContext) -> list[float]:
        tokenizer = self.setup.tokenizer
        prompt_ids = prompt_ids_of(
            tokenizer, to_chat(Dialect.CHAT, body), ctx.system_prompt, example_turns=ctx.example_turns
        )
        return await self.score(prompt_ids, reply_ids(tokenizer, answer), ctx)

    async def activate(self, scenario: str, release: Release | None, path: Path | None) -> None:
        binding = Binding() if release is None else binding_for(release.release_id, path)
        if binding.adapter_name is not None and binding.adapter_path is not None:
            await self.preload(binding)
        self._bindings.set(scenario, binding)

    async def preload(self, binding: Binding) -> None:
        """Load `binding`'s adapter now (between decode steps) so its first request does not wait for it."""
        adapters, scheduler = self._adapters, self.setup.scheduler
        assert adapters is not None and binding.adapter_name is not None and binding.adapter_path is not None
        name, path = binding.adapter_name, binding.adapter_path
        await asyncio.wrap_future(scheduler.call(lambda: adapters.ensure(name, path, scheduler.in_use())))

    def active_release_id(self, scenario: str) -> str | None:
        return self._bindings.current(scenario).release_id

    def models(self) -> list[dict[str, Any]]:
        return [{"id": self.model_name, "object": "model", "created": self._created, "owned_by": "reef"}]

    async def aclose(self) -> None:
        if self._setup is not None:
            await asyncio.to_thread(self._setup.scheduler.stop)
            self._setup = None
            if self.compact is not None:
                self.compact.close()


def resolve_forward(settings: InferenceSettings, device: str) -> str:
    """`settings.forward`, with `auto` resolved: `llama.cpp` on a CPU for a GGUF model (or 'smollm2') where the
    llama-cpp-python package is installed, else `torch`."""
    if settings.forward != "auto":
        return settings.forward
    from reef.inference.local import llamacpp

    assert settings.model_path is not None
    if device == "cpu" and gguf_source(settings.model_path) is not None and llamacpp.available():
        return "llama.cpp"
    return "torch"


def compact_forward(model: Any, device: str, dtype: str) -> LlamaForward | None:
    """The compact forward for `model` on a CPU, with bfloat16 matmuls where `dtype` (`auto`: where this CPU runs
    them natively) says so; None where it does not apply (CUDA, float16, a model it does not reproduce)."""
    if device != "cpu" or dtype == "float16" or not supports(model):
        return None
    bfloat16 = dtype == "bfloat16" or (dtype == "auto" and bfloat16_supported())
    return LlamaForward(model, torch.bfloat16 if bfloat16 else torch.float32)


def llamacpp_forward(settings: InferenceSettings, model: Any, device: str) -> SlotForward:
    """The llama.cpp forward over the GGUF file `settings.model_path` names; a 400 naming `inference.forward` where
    it cannot serve this model (not a GGUF, not a Llama, not on a CPU, the package missing).

    Its weights follow `settings.dtype`: `gguf` multiplies the file's own (e.g. Q4_1) blocks; `bfloat16`, `float16`
    and `float32` the same weights de-quantized, converted once into the model cache; `auto`: whichever of those
    serves fastest here, measured once (`llamacpp_dtype.faster_dtype`)."""
    from reef.inference.local import llamacpp, llamacpp_amx

    assert settings.model_path is not None
    gguf = gguf_source(settings.model_path)
    if device != "cpu" or gguf is None or not supports(model):
        raise BadRequest(
            "inference.forward 'llama.cpp' serves a Llama-family .gguf model (or 'smollm2') on the CPU; "
            f"{settings.model_path!r} on {device} is not one",
            "inference.forward",
        )
    if not llamacpp.available():
        raise BadRequest(
            "inference.forward 'llama.cpp' needs the llama-cpp-python package: run `make setup-llamacpp`",
            "inference.forward",
        )
    dtype: str = settings.dtype
    amx = dtype in ("auto", "gguf") and llamacpp_amx.amx_usable(gguf, settings.model_cache_dir)
    source = gguf

    def weights(dtype: str) -> Path:
        if dtype == "gguf":
            return source
        return converted_once(
            source, settings.model_cache_dir, f".{dtype}.gguf", lambda out: llamacpp.convert(source, out, dtype)
        )

    if dtype == "auto":
        from reef.inference.local import llamacpp_dtype

        dtype = llamacpp_dtype.faster_dtype(source, settings.model_cache_dir, weights, amx)
    threads = settings.threads or llamacpp.default_threads()
    return llamacpp.LlamaCppForward(weights(dtype), settings.max_batch_size, threads, amx=amx and dtype == "gguf")


def _display_name(model_path: str) -> str:
    path = Path(model_path)
    return path.stem if path.suffix == ".gguf" else path.name or model_path


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    ids: set[int] = set()
    configured = getattr(model.generation_config, "eos_token_id", None)
    if isinstance(configured, int):
        ids.add(configured)
    elif configured:
        ids.update(configured)
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return ids
