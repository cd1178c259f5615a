"""What a recipe needs from the engine that serves its scenario, and what each engine supplies.

A recipe declares `needs`; an engine backend declares what it supplies (`ENGINE_SUPPLIES`). `reef serve` refuses a
recipe its engine cannot feed (`reef.application.capability.check_engine_capability`) instead of starting and
skipping every report.
"""

from __future__ import annotations

import enum


class Capability(enum.StrEnum):
    """One thing a recipe may need from the serving engine."""

    # Every served answer recorded with its prompt and completion token ids and each completion token's log-prob.
    TOKEN_CAPTURE = "token_capture"
    # Teacher-forced log-probs of given tokens after a prompt (`Engine.score`): the likelihood gate.
    SCORE_GIVEN_TOKENS = "score_given_tokens"
    # Serving a trained LoRA adapter as a release (weights that are trained must be servable, or nothing changes).
    SERVE_ADAPTER = "serve_adapter"


ALL = frozenset(Capability)

_LAUNCHED = frozenset({Capability.TOKEN_CAPTURE, Capability.SERVE_ADAPTER})
# What each `inference.backend` supplies. The upstream provider serves its own weights and returns no token ids, so
# it supplies nothing; vLLM and SGLang return token ids and log-probs when asked (`reef.inference.capture`) and load
# adapters at run time, but score a chat answer only through the embedded engine's tokenizer, which they lack; the
# embedded engine does all of it in process.
ENGINE_SUPPLIES: dict[str, frozenset[Capability]] = {
    "upstream": frozenset(),
    "local": ALL,
    "vllm": _LAUNCHED,
    "sglang": _LAUNCHED,
}
