"""The openclawrl loss on small tensors: the policy-gradient term on the judge's reward, the hint-conditioned
distillation term on hinted turns only, each reported per step."""

from __future__ import annotations

import contextlib
import types

import pytest
import torch

from reef.recipes.openclawrl import OpenClawRLConfig
from reef.training.hindsight import HindsightStep
from reef.training.teacher import SelfTeacher, completion_logits

VOCAB = 11


class TinyLM(torch.nn.Module):
    """A causal LM small enough to reason about: logits from the running mean of token embeddings, plus an
    "adapter" that `disable_adapter()` switches off (the frozen base, as peft does)."""

    def __init__(self, adapter_scale: float = 0.0) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(VOCAB, 8)
        self.head = torch.nn.Linear(8, VOCAB)
        self.adapter = torch.nn.Linear(8, 8, bias=False)
        torch.nn.init.normal_(self.adapter.weight, std=adapter_scale) if adapter_scale else torch.nn.init.zeros_(
            self.adapter.weight)  # fmt: skip
        self.adapter_on = True

    def forward(self, input_ids, attention_mask):
        hidden = self.embed(input_ids).cumsum(1) / torch.arange(1, input_ids.shape[1] + 1).view(1, -1, 1)
        if self.adapter_on:
            hidden = hidden + self.adapter(hidden)
        return types.SimpleNamespace(logits=self.head(hidden))

    @contextlib.contextmanager
    def disable_adapter(self):
        self.adapter_on = False
        try:
            yield
        finally:
            self.adapter_on = True


class CountingTeacher(SelfTeacher):
    calls = 0

    def logits(self, model, rows, pad_id, device):
        CountingTeacher.calls += 1
        return super().logits(model, rows, pad_id, device)


def recorded_logprobs(model: TinyLM, prompt: list[int], completion: list[int]) -> list[float]:
    """The log-probs the engine would have recorded for this completion under `model` (ratio 1 at the start)."""
    with torch.no_grad():
        logits, _ = completion_logits(model, [(prompt, completion)], 0, "cpu")
    return torch.log_softmax(logits, -1)[0].gather(-1, torch.tensor(completion).unsqueeze(-1)).squeeze(-1).tolist()


def sample(model: TinyLM, advantage: float, hint: bool = False, completion: tuple[int, ...] = (3, 4, 5)) -> dict:
    prompt = [1, 2]
    row = {
        "prompt_ids": prompt,
        "completion_ids": list(completion),
        "old_logprobs": recorded_logprobs(model, prompt, list(completion)),
        "advantage": advantage,
        "weight": 1.0 if hint else 0.0,
    }
    row["teacher_prompt_ids"] = [1, 9, 9, 2] if hint else prompt  # the hint's tokens before the question
    return row


def step(model: TinyLM, **config) -> HindsightStep:
    CountingTeacher.calls = 0
    recipe_config = OpenClawRLConfig(divergence="forward_kl", top_k=4, **config)
    return HindsightStep(recipe_config, model, 0, "cpu", CountingTeacher())


def test_at_the_rollout_policy_the_rl_term_is_minus_the_mean_advantage_per_token() -> None:
    model = TinyLM()
    loss, terms = step(model, w_opd=0.0).loss([sample(model, 1.0), sample(model, 1.0, completion=(6, 7))])
    assert terms["loss_rl"] == pytest.approx(-1.0) and float(loss.detach()) == pytest.approx(-1.0)

    _, terms = step(model).loss([sample(model, 1.0), sample(model, -1.0)])  # equal lengths, opposite rewards
    assert terms["loss_rl"] == pytest.approx(0.0, abs=1e-6)


def test_turns_without_hints_skip_the_teacher_pass_and_their_distillation_term_is_zero() -> None:
    model = TinyLM(adapter_scale=0.5)
    _, terms = step(model).loss([sample(model, -1.0), sample(model, 1.0)])
    assert terms["loss_opd"] == 0.0 and terms["hinted"] == 0 and CountingTeacher.calls == 0


def test_the_distillation_term_is_the_top_k_kl_to_the_hinted_base_on_hinted_turns_only() -> None:
    same = TinyLM()  # a zero adapter: the student is the base; only the hint in the teacher's prompt differs
    _, terms = step(same, w_rl=0.0).loss([sample(same, -1.0, hint=True)])
    assert terms["loss_opd"] > 0 and terms["hinted"] == 1 and CountingTeacher.calls == 1

    unhinted = sample(same, -1.0, hint=True)
    unhinted["teacher_prompt_ids"] = unhinted["prompt_ids"]  # the teacher sees what the student saw
    _, terms = step(same, w_rl=0.0).loss([unhinted])
    assert terms["loss_opd"] == pytest.approx(0.0, abs=1e-6)


def test_both_terms_add_up_with_their_weights() -> None:
    model = TinyLM(adapter_scale=0.5)
    batch = [sample(model, -1.0, hint=True), sample(model, 1.0, completion=(6, 7, 8, 9))]
    loss, terms = step(model, w_rl=0.5, w_opd=2.0).loss(batch)
    assert float(loss.detach()) == pytest.approx(0.5 * terms["loss_rl"] + 2.0 * terms["loss_opd"], rel=1e-5)


def test_an_optimizer_step_on_a_rewarded_turn_makes_its_tokens_more_likely_and_a_punished_one_less() -> None:
    for advantage in (1.0, -1.0):
        model = TinyLM()
        row = sample(model, advantage)
        before = sum(row["old_logprobs"])
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        loss, _ = step(model, w_opd=0.0).loss([row])
        loss.backward()
        optimizer.step()
        after = sum(recorded_logprobs(model, row["prompt_ids"], row["completion_ids"]))
        assert (after - before) * advantage > 0
