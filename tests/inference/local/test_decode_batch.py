"""`DecodeBatch` on a model with sliding-window layers: rows that join, decode and leave at different lengths get
the logits the model gives each row's sequence alone (a tiny random Gemma 3, no model files)."""

from __future__ import annotations

import torch

from reef.inference.local.adapters import AdapterSet
from reef.inference.local.decode_batch import DecodeBatch


class _Row:
    def __init__(self, prompt_ids: list[int]) -> None:
        self.prompt_ids = prompt_ids
        self.completion_ids: list[int] = []


def _sliding_window_model() -> torch.nn.Module:
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    config = Gemma3TextConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, sliding_window=4, layer_types=["sliding_attention", "full_attention"],
        max_position_embeddings=128, pad_token_id=0, attn_implementation="eager",
    )  # fmt: skip
    return Gemma3ForCausalLM(config).eval()


def _alone(model: torch.nn.Module, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0, -1]


def test_rows_joining_and_leaving_a_sliding_window_batch_get_the_logits_of_their_sequence_alone() -> None:
    model = _sliding_window_model()
    batch = DecodeBatch(AdapterSet(model, 1), None, pad_id=0)
    rows = [_Row([5, 6, 7, 8, 9, 10, 11]), _Row([12, 13])]
    with torch.inference_mode():
        logits = batch.add(rows)
        for step in range(6):
            if step == 2:
                late = _Row([20, 21, 22, 23, 24, 25, 26, 27, 28])
                logits = torch.cat([logits, batch.add([late])])
                rows.append(late)
            if step == 4:
                batch.keep([1, 2])
                logits, rows = logits[1:], rows[1:]
            for row, row_logits in zip(rows, logits, strict=True):
                expected = _alone(model, row.prompt_ids + row.completion_ids)
                torch.testing.assert_close(row_logits, expected, atol=1e-4, rtol=1e-4)
                row.completion_ids.append(int(row_logits.argmax()))
            logits = batch.decode()
