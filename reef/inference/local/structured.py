"""Structured output: an OpenAI `response_format` honoured by grammar-constrained sampling (llguidance).

`{"type": "json_schema", "json_schema": {"schema": {...}}}` constrains the answer to compact JSON valid against the
schema (llguidance's JSON-schema compiler: types, `minItems`/`maxItems`, `minimum`/`maximum`, `multipleOf`, `enum`,
…); `{"type": "json_object"}` to any JSON object; `{"type": "text"}` (or no field) leaves decoding free. Before each
token the row's matcher gives the set of tokens that keep the answer a prefix of a valid one; the others are masked
out of the sampling distribution, and end-of-sequence is allowed only once the answer is complete.

Log-probs are still recorded as the model's own temperature-1 log-probs of the chosen token, before any mask (see
`reef.inference.local.sampling`): the trainer recomputes exactly that quantity under the new weights, so importance
ratios compare like with like. The sampling distribution itself is the masked, temperature-scaled one.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import llguidance
import llguidance.hf
import numpy as np
import torch

from reef.core.errors import BadRequest

_FIELD = "response_format"
_TOKENIZERS: dict[int, llguidance.LLTokenizer] = {}
_TOKENIZERS_LOCK = threading.Lock()


@dataclasses.dataclass(frozen=True, slots=True)
class Grammar:
    """A compiled-to-text llguidance grammar (hashable, so it can sit in frozen sampling parameters)."""

    text: str


def grammar_of(body: dict[str, Any]) -> Grammar | None:
    """The grammar a chat body's `response_format` asks for (None: free text); BadRequest naming the field."""
    response_format = body.get(_FIELD)
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        raise BadRequest("must be an object", _FIELD)
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return Grammar(_json_grammar({"type": "object"}))
    if kind != "json_schema":
        raise BadRequest("must be 'text', 'json_object' or 'json_schema'", f"{_FIELD}.type")
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict):
        raise BadRequest("must be an object holding `schema`", f"{_FIELD}.json_schema")
    schema = spec.get("schema")
    if not isinstance(schema, dict):
        raise BadRequest("must be a JSON Schema object", f"{_FIELD}.json_schema.schema")
    text = _json_grammar(schema)
    problem = llguidance.LLMatcher.validate_grammar(text)
    if problem:
        raise BadRequest(f"is not a schema the engine can enforce: {problem}", f"{_FIELD}.json_schema.schema")
    return Grammar(text)


def _json_grammar(schema: dict[str, Any]) -> str:
    # Compact separators and no free whitespace: the answer is the JSON itself, nothing to wander off into.
    try:
        return str(llguidance.LLMatcher.grammar_from_json_schema(schema, defaults={"whitespace_flexible": False}))
    except ValueError as error:
        raise BadRequest(f"is not a JSON Schema: {error}", f"{_FIELD}.json_schema.schema") from error


class Constraint:
    """One sequence's grammar state: which next tokens are allowed, fed every token the sequence takes."""

    def __init__(self, tokenizer: Any, grammar: Grammar) -> None:
        self._matcher = llguidance.LLMatcher(_ll_tokenizer(tokenizer), grammar.text, log_level=0)
        if self._matcher.is_error():
            raise BadRequest(self._matcher.get_error(), f"{_FIELD}.json_schema.schema")

    def allowed(self, vocab_size: int, eos_ids: tuple[int, ...]) -> torch.Tensor:
        """A bool mask [vocab_size] of the tokens that keep the answer valid (the logits may be wider than the
        tokenizer's vocabulary: the extra ids are never allowed). A matcher with nothing left to allow (it failed)
        allows only end-of-sequence, so the row ends instead of sampling from an empty distribution."""
        bits = np.unpackbits(np.frombuffer(self._matcher.compute_bitmask(), dtype=np.uint8), bitorder="little")
        mask = torch.zeros(vocab_size, dtype=torch.bool)
        width = min(vocab_size, bits.size)
        mask[:width] = torch.from_numpy(bits[:width].astype(bool))
        if not bool(mask.any()):
            mask[list(eos_ids)] = True
        return mask

    def take(self, token_id: int) -> None:
        """Advance past a sampled token (one the mask allowed)."""
        self._matcher.consume_token(token_id)

    @property
    def complete(self) -> bool:
        """The answer is a whole valid document and nothing more may follow."""
        return bool(self._matcher.is_stopped())


def _ll_tokenizer(tokenizer: Any) -> llguidance.LLTokenizer:
    # Building llguidance's view of a 49k-token vocabulary takes about a second: once per tokenizer.
    with _TOKENIZERS_LOCK:
        found = _TOKENIZERS.get(id(tokenizer))
        if found is None:
            found = llguidance.hf.from_tokenizer(tokenizer)
            _TOKENIZERS[id(tokenizer)] = found
        return found


def warm(tokenizer: Any) -> None:
    """Build llguidance's view of `tokenizer` now (at engine start), not on the first constrained request."""
    _ll_tokenizer(tokenizer)
