"""`inference.backend: vllm | sglang`: launch that engine as a subprocess and proxy to it.

Thin on purpose: the subprocess is an OpenAI-compatible server, so requests go through the upstream engine;
what this module adds is the command line, the wait for health, LoRA releases through the engine's runtime
adapter endpoints (vLLM `/v1/load_lora_adapter`, SGLang `/load_lora_adapter`), selected per request by `model`,
and the token capture and scoring the on-policy recipes need (`reef.inference.capture`).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import hashlib
import importlib.util
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import aiohttp
import orjson

from reef.core.capabilities import ENGINE_SUPPLIES
from reef.core.errors import NotFound, UpstreamError
from reef.core.releases import Release
from reef.core.scenarios import Dialect
from reef.core.settings import InferenceSettings
from reef.inference.base import Completion, CompletionStream, Engine, RequestContext
from reef.inference.capture import client_view, score_request, scores_from, training_from_chat, with_capture
from reef.inference.capture_stream import CapturingStream

log = logging.getLogger(__name__)

Backend = Literal["vllm", "sglang"]
STARTUP_TIMEOUT_S = 900.0
MAX_LORA_RANK = 64
_MODULES: dict[str, str] = {"vllm": "vllm.entrypoints.openai.api_server", "sglang": "sglang.launch_server"}
_LOAD_PATHS: dict[str, tuple[str, str]] = {
    "vllm": ("/v1/load_lora_adapter", "/v1/unload_lora_adapter"),
    "sglang": ("/load_lora_adapter", "/unload_lora_adapter"),
}


def build_command(backend: Backend, settings: InferenceSettings, model_dir: Path, port: int) -> list[str]:
    """The command line that starts `backend` serving `model_dir` on 127.0.0.1:`port` with runtime LoRA on."""
    loras = str(settings.max_resident_adapters)
    model_flag = "--model" if backend == "vllm" else "--model-path"
    command = [sys.executable, "-m", _MODULES[backend], model_flag, str(model_dir), "--host", "127.0.0.1"]
    command += ["--port", str(port), "--served-model-name", served_name(settings), "--enable-lora"]
    command += ["--max-lora-rank", str(MAX_LORA_RANK)]
    if backend == "vllm":
        command += ["--max-loras", loras, "--max-num-seqs", str(settings.max_batch_size)]
    else:
        command += ["--max-loras-per-batch", loras, "--lora-target-modules", "all"]
        command += ["--max-running-requests", str(settings.max_batch_size)]
    if settings.dtype != "auto":
        command += ["--dtype", settings.dtype]
    if settings.device == "cpu" and backend == "vllm":
        command += ["--device", "cpu"]
    return command


def launch_environment(backend: Backend) -> dict[str, str]:
    # vLLM only serves its runtime adapter endpoints when this is set.
    extra = {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"} if backend == "vllm" else {}
    return {**os.environ, **extra}


def served_name(settings: InferenceSettings) -> str:
    return settings.served_model_name or Path(settings.model_path or "model").stem


def adapter_name(path: Path) -> str:
    """A stable adapter name for the files at `path` (the engine selects adapters by this `model` name)."""
    return "reef-" + hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:16]


def load_adapter_request(backend: Backend, name: str, path: Path) -> tuple[str, dict[str, Any]]:
    """(URL path, JSON body) that loads adapter `name` from `path`."""
    return _LOAD_PATHS[backend][0], {"lora_name": name, "lora_path": str(path)}


def unload_adapter_request(backend: Backend, name: str) -> tuple[str, dict[str, Any]]:
    """(URL path, JSON body) that unloads adapter `name`."""
    return _LOAD_PATHS[backend][1], {"lora_name": name}


def with_model(body: dict[str, Any], model: str) -> dict[str, Any]:
    """The body addressed to `model` (an adapter name or the base); every dialect names it in `model`."""
    return {**body, "model": model}


@dataclasses.dataclass(frozen=True, slots=True)
class _Bound:
    release_id: str | None
    model: str


class LaunchedEngine(Engine):
    """A vLLM / SGLang subprocess behind the upstream engine, with one LoRA adapter per scenario's release."""

    # `score` works (prompt log-probs), but `score_answer` (the likelihood gate) needs the chat template here:
    # until then the gate does not count on scoring (`scores_completions` stays False).
    supplies = ENGINE_SUPPLIES["vllm"]

    def __init__(self, settings: InferenceSettings, backend: Backend) -> None:
        if importlib.util.find_spec(_MODULES[backend].split(".")[0]) is None:
            raise ValueError(f"inference.backend {backend}: the {backend!r} package is not installed")
        self._settings = settings
        self._backend = backend
        self._port = _free_port()
        self._base_url = f"http://127.0.0.1:{self._port}"
        self._process: subprocess.Popen[bytes] | None = None
        self._upstream: Any = None
        self._bound: dict[str, _Bound] = {}
        self._known: dict[str, _Bound] = {}
        self._resident: collections.OrderedDict[str, Path] = collections.OrderedDict()
        self._adapter_paths: dict[str, Path] = {}  # every adapter ever loaded, so an evicted one can come back

    async def start(self) -> None:
        from reef.inference.local.model_files import resolve_model_path
        from reef.inference.upstream import UpstreamEngine

        settings = self._settings
        assert settings.model_path is not None
        model_dir = await asyncio.to_thread(resolve_model_path, settings.model_path, settings.model_cache_dir)
        command = build_command(self._backend, settings, model_dir, self._port)
        log.info("launching %s: %s", self._backend, " ".join(command))
        self._process = subprocess.Popen(command, env=launch_environment(self._backend))
        await self._wait_healthy()
        upstream = settings.model_copy(
            update={"upstream_url": self._base_url, "upstream_api": "openai", "upstream_model": served_name(settings)}
        )
        self._upstream = UpstreamEngine(upstream)
        await self._upstream.start()

    async def _wait_healthy(self) -> None:
        deadline = asyncio.get_running_loop().time() + STARTUP_TIMEOUT_S
        async with aiohttp.ClientSession() as session:
            while asyncio.get_running_loop().time() < deadline:
                if self._process is not None and self._process.poll() is not None:
                    raise UpstreamError(f"{self._backend} exited with status {self._process.returncode}")
                try:
                    async with session.get(self._base_url + "/health", timeout=aiohttp.ClientTimeout(total=2)) as r:
                        if r.status == 200:
                            return
                except (aiohttp.ClientError, TimeoutError):
                    pass
                await asyncio.sleep(1.0)
        raise UpstreamError(f"{self._backend} did not become healthy within {STARTUP_TIMEOUT_S:g} s")

    async def _post(self, request: tuple[str, dict[str, Any]]) -> Any:
        path, body = request
        async with aiohttp.ClientSession() as session, session.post(self._base_url + path, json=body) as response:
            if response.status >= 400:
                raise UpstreamError(f"{self._backend} {path} answered {response.status}: {await response.text()}")
            return await response.json(content_type=None) if response.content_length != 0 else None

    async def _ensure_adapter(self, path: Path) -> str:
        name = adapter_name(path)
        self._adapter_paths[name] = path
        if name in self._resident:
            self._resident.move_to_end(name)
            return name
        await self._post(load_adapter_request(self._backend, name, path))
        self._resident[name] = path
        in_use = {b.model for b in self._bound.values()}
        for victim in list(self._resident):
            if len(self._resident) <= self._settings.max_resident_adapters:
                break
            if victim != name and victim not in in_use:
                await self._post(unload_adapter_request(self._backend, victim))
                del self._resident[victim]
        return name

    async def _route(self, body: dict[str, Any], ctx: RequestContext) -> tuple[dict[str, Any], RequestContext]:
        base = served_name(self._settings)
        if ctx.candidate_path is not None:
            model = await self._ensure_adapter(Path(ctx.candidate_path))
            return with_model(body, model), ctx
        bound = self._bound.get(ctx.scenario, _Bound(None, base))
        if ctx.release_id is not None and ctx.release_id != bound.release_id:
            if ctx.release_id not in self._known:
                raise NotFound(f"release {ctx.release_id!r} is not loaded in this engine")
            bound = self._known[ctx.release_id]
        if bound.model != base:
            await self._ensure_adapter(self._adapter_paths[bound.model])
        return with_model(body, bound.model), dataclasses.replace(ctx, release_id=bound.release_id)

    async def complete(self, dialect: Dialect, body: dict[str, Any], ctx: RequestContext) -> Completion:
        body, ctx = await self._route(body, ctx)
        if dialect is not Dialect.CHAT:  # captured in the chat dialect only (the server's own)
            return await self._upstream.complete(dialect, body, ctx)
        completion = await self._upstream.complete(dialect, with_capture(body), ctx)
        if completion.status >= 400:
            return completion
        view = client_view(completion.body, body)
        return dataclasses.replace(
            completion, raw=orjson.dumps(view), body=view, training=training_from_chat(completion.body)
        )

    async def score(self, prompt_ids: list[int], completion_ids: list[int], ctx: RequestContext) -> list[float]:
        routed, _ = await self._route({}, ctx)
        base = served_name(self._settings)
        request = score_request(self._backend, routed["model"], base, prompt_ids, completion_ids)
        answer = await self._post(request)
        try:
            return scores_from(self._backend, answer if isinstance(answer, dict) else {}, completion_ids)
        except ValueError as error:
            raise UpstreamError(f"{self._backend} scoring: {error}")

    async def stream(self, dialect: Dialect, body: dict[str, Any], ctx: RequestContext) -> CompletionStream:
        body, ctx = await self._route(body, ctx)
        if dialect is not Dialect.CHAT or self._backend != "vllm":  # SGLang streams no token ids
            return await self._upstream.stream(dialect, body, ctx)
        return CapturingStream(await self._upstream.stream(dialect, with_capture(body), ctx), body)

    async def count_tokens(self, body: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        return await self._upstream.count_tokens(body, ctx)

    async def activate(self, scenario: str, release: Release | None, path: Path | None) -> None:
        model = served_name(self._settings)
        if release is not None and path is not None and (Path(path) / "adapter_config.json").exists():
            model = await self._ensure_adapter(Path(path))
        bound = _Bound(release.release_id if release is not None else None, model)
        self._bound[scenario] = bound
        if bound.release_id is not None:
            self._known[bound.release_id] = bound

    def active_release_id(self, scenario: str) -> str | None:
        bound = self._bound.get(scenario)
        return bound.release_id if bound else None

    def models(self) -> list[dict[str, Any]]:
        return self._upstream.models() if self._upstream is not None else []

    async def aclose(self) -> None:
        if self._upstream is not None:
            await self._upstream.aclose()
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                await asyncio.to_thread(self._process.wait, 30)
            except subprocess.TimeoutExpired:
                self._process.kill()


def launched_engine(settings: InferenceSettings) -> LaunchedEngine:
    """The engine for `inference.backend: vllm | sglang`."""
    backend = settings.resolved_backend()
    if backend not in ("vllm", "sglang"):
        raise ValueError(f"launched_engine needs backend vllm or sglang, not {backend!r}")
    if not settings.model_path:
        raise ValueError("inference.model_path is required for the vllm / sglang backends")
    if settings.dtype == "gguf":
        raise ValueError(
            "inference.dtype 'gguf' is for the embedded engine's llama.cpp forward; vllm / sglang take no such dtype"
        )
    return LaunchedEngine(settings, backend)  # type: ignore[arg-type]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
