"""The llama.cpp forward (`inference.forward: llama.cpp`) on the real SmolLM2 GGUF: its log-probs against the torch
forward on the same weights, rows joining and leaving, a LoRA release written for llama.cpp against peft's, and
the engine serving, recording and switching adapters under load through it."""

from __future__ import annotations

import asyncio
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from reef.core.errors import BadRequest
from reef.core.scenarios import Dialect
from reef.core.settings import InferenceSettings
from reef.inference.base import RequestContext
from reef.inference.local import (
    LocalEngine,
    llamacpp,
    llamacpp_amx,
    llamacpp_dtype,
    load_base_model,
    prefixes,
    render_prompt_ids,
)
from reef.inference.local.engine import resolve_forward
from reef.inference.local.llama import LlamaForward, lora_of
from reef.inference.local.model_files import converted_once, gguf_source

from .test_local_adapters import ask, drain, release, text_of, train_adapter

pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(not llamacpp.available(), reason="llama-cpp-python is not installed (make setup-llamacpp)"),
]

QUESTIONS = ["Describe the sea.", "What is 17 times 3?", "Write a haiku about rain.", "List three colors."]
PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@pytest.fixture(scope="module")
def base(model_dir: Path) -> tuple[Any, Any]:
    return load_base_model(model_dir, "cpu", "float32")


@pytest.fixture(scope="module")
def forwards(base) -> Iterator[tuple[llamacpp.LlamaCppForward, LlamaForward]]:
    model, _ = base
    gguf = gguf_source("smollm2")
    assert gguf is not None
    cpp = llamacpp.LlamaCppForward(gguf, max_rows=4, threads=1)
    yield cpp, LlamaForward(model, torch.float32)
    cpp.close()


def greedy(forward: Any, prompt: list[int], steps: int) -> list[int]:
    cache = forward.new_cache()
    logits = forward.prefill(cache, [prompt], 0, None)
    out = []
    for _ in range(steps):
        out.append(int(logits[0].argmax()))
        logits = forward.decode(cache, torch.tensor(out[-1:]), None)
    forward.release(cache)
    return out


def test_llamacpp_scores_the_gguf_as_the_float32_torch_forward_does(base, forwards):
    _, tokenizer = base
    cpp, exact = forwards
    assert cpp.precision == "llama.cpp-q4_1"
    with torch.inference_mode():
        gaps = []
        for question in QUESTIONS:
            prompt = render_prompt_ids(tokenizer, [{"role": "user", "content": question}])
            completion = greedy(exact, prompt, 24)
            gaps.append(cpp.score(prompt, completion, None) - exact.score(prompt, completion, None))
    gap = torch.cat(gaps).abs()
    # The same Q4_1 weights; llama.cpp multiplies them against 8-bit activations (measured: mean 0.02-0.06).
    assert gap.mean() < 0.1 and gap.max() < 1.0


def test_amx_usable_asks_a_child_once_per_build_and_a_crash_there_says_no(tmp_path, monkeypatch, caplog):
    gguf = gguf_source("smollm2")
    assert gguf is not None
    monkeypatch.setattr(llamacpp_amx, "_cpu_flags", lambda: {"avx512f"})
    assert not llamacpp_amx.amx_usable(gguf, tmp_path)  # no AMX-INT8: nothing to probe
    assert not list(tmp_path.iterdir())
    monkeypatch.setattr(llamacpp_amx, "_cpu_flags", lambda: {"amx_int8", "amx_tile"})
    crash = [sys.executable, "-c", "import os; os.kill(os.getpid(), 11)"]  # what an unfixed build does
    monkeypatch.setattr(llamacpp_amx, "_probe_command", lambda gguf: crash)
    assert not llamacpp_amx.amx_usable(gguf, tmp_path)
    assert "exited with -11" in caplog.text and "make setup-llamacpp" in caplog.text
    fine = [sys.executable, "-c", 'print(\'{"usable": true, "reason": ""}\')']
    monkeypatch.setattr(llamacpp_amx, "_probe_command", lambda gguf: fine)
    assert not llamacpp_amx.amx_usable(gguf, tmp_path)  # the answer is kept for this build
    for answer in tmp_path.glob("*.amx.json"):
        answer.unlink()
    assert llamacpp_amx.amx_usable(gguf, tmp_path)


def test_amx_kernels_score_a_batch_as_the_float32_torch_forward_does(base, forwards, tmp_path):
    gguf = gguf_source("smollm2")
    assert gguf is not None
    if not llamacpp_amx.amx_usable(gguf, tmp_path):
        pytest.skip("this CPU has no AMX-INT8, or this llama.cpp build's AMX kernels do not work")
    _, tokenizer = base
    _, exact = forwards
    amx = llamacpp.LlamaCppForward(gguf, max_rows=4, threads=2, amx=True)
    try:
        assert amx.precision == "llama.cpp-q4_1-amx"
        prompts = [render_prompt_ids(tokenizer, [{"role": "user", "content": q}]) for q in QUESTIONS]
        with torch.inference_mode():
            completions = [greedy(exact, prompt, 16) for prompt in prompts]
            # Four rows decoded together: a batch of rows is what the AMX tiles multiply (one row takes VNNI).
            cache = amx.new_cache()
            logits = amx.prefill(cache, prompts, 0, None)
            rows: list[list[torch.Tensor]] = [[] for _ in prompts]
            for step in range(16):
                for row, logprobs in enumerate(torch.log_softmax(logits, dim=-1)):
                    rows[row].append(logprobs[completions[row][step]])
                logits = amx.decode(cache, torch.tensor([c[step] for c in completions]), None)
            amx.release(cache)
            scored = zip(rows, prompts, completions, strict=True)
            gaps = [torch.stack(row) - exact.score(prompt, completion, None) for row, prompt, completion in scored]
    finally:
        amx.close()
    gap = torch.cat(gaps).abs()
    # The same Q4_1 weights against 8-bit activations, as without AMX (measured: mean 0.02-0.06).
    assert gap.mean() < 0.1 and gap.max() < 1.0


def test_rows_that_join_and_leave_keep_their_own_positions(base, forwards):
    _, tokenizer = base
    cpp, _ = forwards
    prompts = [render_prompt_ids(tokenizer, [{"role": "user", "content": q}]) for q in QUESTIONS]
    rows = [list(p) for p in prompts[:3]]
    logprobs: list[list[float]] = [[], [], []]
    with torch.inference_mode():
        cache = cpp.new_cache()
        logits = cpp.prefill(cache, rows, 0, None)
        for step in range(20):
            for row, row_logits, kept in zip(rows, logits, logprobs, strict=True):
                token = int(row_logits.argmax())
                row.append(token)
                kept.append(float(torch.log_softmax(row_logits, -1)[token]))
            if step == 5:  # the middle row leaves (its sequence is freed), a new one joins
                cache.keep([0, 2])
                rows, logprobs = [rows[0], rows[2]], [logprobs[0], logprobs[2]]
                joined = list(prompts[3])
                first = cpp.prefill(cache, [joined], 0, None)[0]
                joined.append(int(first.argmax()))
                rows.append(joined)
                logprobs.append([float(torch.log_softmax(first, -1)[joined[-1]])])
            logits = cpp.decode(cache, torch.tensor([row[-1] for row in rows]), None)
        cpp.release(cache)
        # Each row, scored alone from scratch, gets about the log-probs it was decoded with in the batch (llama.cpp's
        # kernels for one row and for a prompt round differently: measured mean 0.03, max 0.1; a row reading
        # another row's cells or positions would be off by whole nats).
        for row, kept in zip(rows, logprobs, strict=True):
            prompt = next(p for p in prompts if row[: len(p)] == p)
            gap = (cpp.score(prompt, row[len(prompt) :], None) - torch.tensor(kept)).abs()
            assert gap.mean() < 0.06 and gap.max() < 0.3


def test_prompts_share_the_cells_of_a_common_prefix_in_the_earliest_wave_they_can():
    system = list(range(100, 124))  # 24 positions every prompt begins with
    first, second = system + [1, 2, 3, 4], system + [5, 6, 7]
    running = [system + [9, 9, 9]]
    plan = prefixes.shared_prefixes(running, [first, first, second, second, [7] * 30, list(range(100, 105))])
    assert plan == [
        (0, 0, 24),  # the running row's system prompt
        (1, 1, 27),  # the prompt before it, all but its last position (whose logits must be computed)
        (0, 0, 24),  # the running row and the first prompt share as much: the running row's cells exist already
        (1, 3, 26),
        (0, 0, 0),  # nothing in common
        (0, 0, 0),  # a common prefix shorter than MIN_SHARED_PREFIX
    ]


def test_rows_that_share_a_prefix_decode_as_rows_computed_alone_and_outlive_their_donor(base, forwards, monkeypatch):
    _, tokenizer = base
    cpp, _ = forwards
    prompts = [render_prompt_ids(tokenizer, [{"role": "user", "content": q}]) for q in QUESTIONS[:2]]
    grid = [prompts[0], prompts[0], prompts[1]]  # the second shares all but one position, the third the system prompt
    assert [shared for _, _, shared in prefixes.shared_prefixes([], grid)][1:] == [len(prompts[0]) - 1, 24]

    def run(share: bool) -> tuple[list[list[int]], list[list[float]]]:
        monkeypatch.setattr(prefixes, "MIN_SHARED_PREFIX", 8 if share else 10**9)
        rows, kept = [list(p) for p in grid], [[], [], []]
        with torch.inference_mode():
            cache = cpp.new_cache()
            logits = cpp.prefill(cache, grid, 0, None)
            for step in range(12):
                for row, row_logits, lps in zip(rows, logits, kept, strict=True):
                    row.append(int(row_logits.argmax()))
                    lps.append(float(torch.log_softmax(row_logits, -1)[row[-1]]))
                if step == 3:  # the donor of both others leaves: their shared cells must stay
                    cache.keep([1, 2])
                    rows, kept = rows[1:], kept[1:]
                logits = cpp.decode(cache, torch.tensor([row[-1] for row in rows]), None)
            cpp.release(cache)
        return rows, kept

    alone_rows, alone = run(share=False)
    shared_rows, shared = run(share=True)
    assert shared_rows == alone_rows
    gaps = (torch.tensor(shared) - torch.tensor(alone)).abs()
    assert gaps.mean() < 0.03 and gaps.max() < 0.15  # kernels round a 1-position and a 30-position prefill apart
    for row, lps in zip(shared_rows, shared, strict=True):
        prompt = next(p for p in prompts if row[: len(p)] == p)
        scored = cpp.score(prompt, row[len(prompt) :], None)
        assert (scored - torch.tensor(lps)).abs().max() < 0.3


def test_a_lora_release_moves_llamacpps_logprobs_as_it_moves_the_torch_forwards(base, model_dir, forwards):
    _, tokenizer = base
    cpp, exact = forwards
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    model, _ = load_base_model(model_dir, "cpu", "float32")
    peft_model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=PROJECTIONS))
    for name, parameter in peft_model.named_parameters():
        if "lora_B" in name:
            parameter.data.normal_(0, 0.3)  # large enough that the adapter's effect dwarfs 8-bit rounding
    lora = lora_of(peft_model, "default", len(model.model.layers))
    assert lora is not None
    prompt = render_prompt_ids(tokenizer, [{"role": "user", "content": QUESTIONS[0]}])
    with torch.inference_mode():
        completion = greedy(exact, prompt, 24)
        torch_effect = exact.score(prompt, completion, lora) - exact.score(prompt, completion, None)
        cpp_effect = cpp.score(prompt, completion, lora) - cpp.score(prompt, completion, None)
    assert torch_effect.abs().mean() > 0.3  # the adapter matters
    assert torch.corrcoef(torch.stack([torch_effect, cpp_effect]))[0, 1] > 0.98
    assert (cpp_effect - torch_effect).abs().mean() < 0.25 * torch_effect.abs().mean()


@pytest.fixture(scope="module")
def cpp_engine(local_settings: InferenceSettings) -> Iterator[LocalEngine]:
    update = {"model_path": "smollm2", "forward": "llama.cpp", "dtype": "gguf", "threads": 1}
    engine = LocalEngine(local_settings.model_copy(update=update))
    asyncio.run(engine.start())
    yield engine
    asyncio.run(engine.aclose())


async def test_the_engine_on_llamacpp_answers_with_exact_token_capture_and_its_precision(
    cpp_engine, tokenizer, local_settings
):
    completion = await cpp_engine.complete(Dialect.CHAT, ask(max_tokens=16), RequestContext("geo"))
    text = text_of(completion)
    assert "Paris" in text
    training = completion.training
    gguf = gguf_source("smollm2")
    assert gguf is not None
    amx = llamacpp_amx.amx_usable(gguf, local_settings.model_cache_dir)
    assert training is not None and training["precision"] == "llama.cpp-q4_1" + ("-amx" if amx else "")
    ids, logprobs = training["completion_token_ids"], training["logprobs"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == text
    assert len(logprobs) == len(ids) and all(math.isfinite(lp) and lp <= 0 for lp in logprobs)
    # `score` runs the forward that sampled, so it gives back the recorded log-probs.
    scored = await cpp_engine.score(training["prompt_token_ids"], ids, RequestContext("geo"))
    gaps = [abs(a - b) for a, b in zip(scored, logprobs, strict=True)]
    assert sum(gaps) / len(gaps) < 0.06 and max(gaps) < 0.3


async def test_llamacpp_serves_each_scenarios_adapter_and_switching_under_load_loses_no_request(
    cpp_engine, model_dir, tmp_path
):
    rome = train_adapter(model_dir, tmp_path / "rome", "Rome")
    await cpp_engine.activate("busy", release("busy", "rel-1"), rome)
    body = ask(stream=True, max_tokens=12, min_tokens=12, ignore_eos=True)
    contexts = [RequestContext("busy" if i % 2 else "plain") for i in range(8)]  # two adapters in flight
    streams = [await cpp_engine.stream(Dialect.CHAT, body, ctx) for ctx in contexts]
    second = tmp_path / "rel-2"
    second.mkdir()
    for file in rome.iterdir():
        (second / file.name).write_bytes(file.read_bytes())
    await cpp_engine.activate("busy", release("busy", "rel-2"), second)
    await asyncio.gather(*(drain(stream.frames()) for stream in streams))
    results = [stream.result() for stream in streams]
    assert all(r.complete and r.usage["completion_tokens"] == 12 for r in results)
    assert {stream.release_id for stream in streams[1::2]} == {"rel-1"}
    answers = {
        scenario: text_of(await cpp_engine.complete(Dialect.CHAT, ask(), RequestContext(scenario)))
        for scenario in ("busy", "plain")
    }
    assert "Rome" in answers["busy"] and "Paris" in answers["plain"]


async def test_llamacpp_refuses_a_model_directory_naming_the_field(local_settings):
    engine = LocalEngine(local_settings.model_copy(update={"forward": "llama.cpp"}))  # a safetensors directory
    with pytest.raises(BadRequest) as refused:
        await engine.start()
    assert refused.value.field == "inference.forward" and ".gguf" in str(refused.value)


def test_a_dtype_converts_the_gguf_once_to_the_weights_the_torch_engine_multiplies(base, model_dir, tmp_path):
    import gguf as gguf_files
    from safetensors.torch import load_file

    source = gguf_source("smollm2")
    assert source is not None
    path = converted_once(source, tmp_path, ".bfloat16.gguf", lambda out: llamacpp.convert(source, out, "bfloat16"))
    assert path.parent == tmp_path and [p.name for p in tmp_path.iterdir() if p.name != ".locks"] == [
        path.name
    ]  # no staging

    def built_again(out: Path) -> None:
        raise AssertionError("converted twice")

    assert converted_once(source, tmp_path, ".bfloat16.gguf", built_again) == path
    # Each Q4_1 value rounded once to bfloat16: bit for bit what the torch engine's bfloat16 matmuls multiply.
    tensors = {t.name: t for t in gguf_files.GGUFReader(path).tensors}
    hf = load_file(next(model_dir.glob("*.safetensors")))
    for name, hf_name in [
        ("blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight"),
        ("blk.7.attn_v.weight", "model.layers.7.self_attn.v_proj.weight"),
    ]:
        assert tensors[name].tensor_type.name == "BF16"
        stored = torch.from_numpy(tensors[name].data.view("int16").reshape(-1).copy()).view(torch.bfloat16)
        assert torch.equal(stored, hf[hf_name].to(torch.bfloat16).reshape(-1))
    model, tokenizer = base
    cpp = llamacpp.LlamaCppForward(path, max_rows=2, threads=1)
    try:
        assert cpp.precision == "llama.cpp-bf16"
        exact = LlamaForward(model, torch.float32)
        prompt = render_prompt_ids(tokenizer, [{"role": "user", "content": QUESTIONS[0]}])
        with torch.inference_mode():
            completion = greedy(exact, prompt, 24)
            gap = (cpp.score(prompt, completion, None) - exact.score(prompt, completion, None)).abs()
    finally:
        cpp.close()
    assert gap.mean() < 0.04 and gap.max() < 0.3  # measured mean 0.013 on sampled tokens (docs/results/)


def test_auto_picks_llamacpp_for_a_gguf_model_on_a_cpu_and_torch_otherwise(local_settings):
    builtin = local_settings.model_copy(update={"model_path": "smollm2"})
    assert builtin.forward == "auto"  # the default
    assert resolve_forward(builtin, "cpu") == "llama.cpp"
    assert resolve_forward(builtin, "cuda") == "torch"
    assert resolve_forward(local_settings, "cpu") == "torch"  # a safetensors directory: llama.cpp cannot read it
    assert resolve_forward(builtin.model_copy(update={"forward": "torch"}), "cpu") == "torch"  # as asked


def test_every_weight_format_this_cpu_can_serve_is_a_candidate(monkeypatch):
    monkeypatch.setattr(llamacpp_dtype, "bfloat16_supported", lambda: True)
    assert llamacpp_dtype.candidates() == ("gguf", "bfloat16", "float16", "float32")  # AVX-512 BF16 or AMX
    monkeypatch.setattr(llamacpp_dtype, "bfloat16_supported", lambda: False)
    assert llamacpp_dtype.candidates() == ("gguf", "float16", "float32")  # the file's own blocks among them


def test_the_faster_dtype_is_measured_once_and_kept_in_the_model_cache(tmp_path, monkeypatch):
    gguf = gguf_source("smollm2")
    assert gguf is not None
    asked: list[str] = []

    def weights(dtype: str) -> Path:
        asked.append(dtype)
        return gguf  # the same weights twice: the test is the bookkeeping, not the race

    monkeypatch.setattr(llamacpp_dtype, "bfloat16_supported", lambda: False)
    timings = iter([3.0, 2.0, 1.0])
    amx_asked: list[bool] = []
    enough_given: list[float] = []

    def mixed_load_s(path: Path, amx: bool, enough: float) -> float:
        amx_asked.append(amx)
        enough_given.append(enough)
        return next(timings)

    monkeypatch.setattr(llamacpp_dtype, "_mixed_load_s", mixed_load_s)
    assert llamacpp_dtype.faster_dtype(gguf, tmp_path, weights, amx=True) == "float32"
    assert asked == ["gguf", "float16", "float32"]
    assert amx_asked == [True, False, False]  # the AMX kernels multiply the file's own blocks only
    # a candidate stops after one run once it is clearly slower than the best so far
    assert enough_given == [float("inf"), 3.0 * llamacpp_dtype.CLEARLY_SLOWER, 2.0 * llamacpp_dtype.CLEARLY_SLOWER]
    assert llamacpp_dtype.faster_dtype(gguf, tmp_path, weights, amx=True) == "float32"  # kept: measured once
    assert asked == ["gguf", "float16", "float32"]
    (kept,) = tmp_path.glob("*.dtype.json")
    assert json.loads(kept.read_text())["seconds"] == {"gguf": 3.0, "float16": 2.0, "float32": 1.0}


def test_the_mixed_load_runs_on_the_real_weights(monkeypatch):
    gguf = gguf_source("smollm2")
    assert gguf is not None
    monkeypatch.setattr(llamacpp_dtype, "STEPS", 2)
    assert 0 < llamacpp_dtype._mixed_load_s(gguf, amx=False) < 600
    runs: list[int] = []
    real_new_cache = llamacpp.LlamaCppForward.new_cache
    monkeypatch.setattr(llamacpp.LlamaCppForward, "new_cache", lambda self: runs.append(1) or real_new_cache(self))
    assert llamacpp_dtype._mixed_load_s(gguf, amx=False, enough=0.0) > 0
    assert len(runs) == 1  # already over `enough` after the first run: not run again


async def test_the_engine_on_its_defaults_serves_smollm2_through_llamacpp(local_settings):
    engine = LocalEngine(local_settings.model_copy(update={"model_path": "smollm2", "threads": 1}))
    await engine.start()
    try:
        completion = await engine.complete(Dialect.CHAT, ask(max_tokens=16), RequestContext("geo"))
    finally:
        await engine.aclose()
    assert isinstance(engine.compact, llamacpp.LlamaCppForward)
    assert "Paris" in text_of(completion)
    gguf = gguf_source("smollm2")
    assert gguf is not None
    # The weights the measurement kept in the model cache are the ones that served.
    kept = max(local_settings.model_cache_dir.expanduser().glob(f"*.{gguf.stem}-*.dtype.json"), key=_modified)
    served = {"gguf": "llama.cpp-q4_1", "bfloat16": "llama.cpp-bf16", "float16": "llama.cpp-f16"}
    served["float32"] = "llama.cpp-f32"
    amx = llamacpp_amx.amx_usable(gguf, local_settings.model_cache_dir)
    dtype = json.loads(kept.read_text())["dtype"]
    assert completion.training is not None
    assert completion.training["precision"] == served[dtype] + ("-amx" if amx and dtype == "gguf" else "")


async def test_the_gguf_dtype_needs_the_llamacpp_forward_naming_the_field(local_settings):
    update = {"model_path": "smollm2", "dtype": "gguf", "forward": "torch"}
    engine = LocalEngine(local_settings.model_copy(update=update))
    with pytest.raises(BadRequest) as refused:
        await engine.start()
    assert refused.value.field == "inference.dtype" and "llama.cpp" in str(refused.value)


async def test_the_engine_on_llamacpp_serves_bfloat16_weights_converted_into_the_model_cache(local_settings):
    update = {"model_path": "smollm2", "forward": "llama.cpp", "dtype": "bfloat16", "threads": 1}
    engine = LocalEngine(local_settings.model_copy(update=update))
    await engine.start()
    try:
        completion = await engine.complete(Dialect.CHAT, ask(max_tokens=16), RequestContext("geo"))
    finally:
        await engine.aclose()
    assert "Paris" in text_of(completion)
    assert completion.training is not None and completion.training["precision"] == "llama.cpp-bf16"
    assert list(local_settings.model_cache_dir.expanduser().glob("SmolLM2-135M-Instruct.Q4_1-*.bfloat16.gguf"))


def _modified(path: Path) -> float:
    return path.stat().st_mtime
