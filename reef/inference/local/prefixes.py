"""Which cells a batch's new prompts can share: the plan `LlamaCppForward.prefill` follows (`shared_prefixes`).

A prompt that begins as a running row or an earlier new prompt does (the same system prompt, or one question sampled
several times) reuses that row's key/value cells for the common prefix and computes only the rest.
"""

from __future__ import annotations

MIN_SHARED_PREFIX = 8  # positions: a shorter common prefix is computed again rather than waited for


def shared_prefixes(running: list[list[int]], prompts: list[list[int]]) -> list[tuple[int, int, int]]:
    """For each of `prompts`, the `(wave, donor, shared)` its prefill follows: share the first `shared` positions of
    donor's cells (an index into `running` + `prompts`; `shared` 0: none), then compute the rest in wave `wave`.

    The donor is the running row or earlier prompt with the longest common prefix (at least `MIN_SHARED_PREFIX`,
    and short of the whole prompt: its last position must be computed for its logits), the earliest wave on a tie.
    A prompt computes in the wave after its donor's (running rows are wave -1): its cells must exist first.
    """
    known = list(running)
    waves = [-1] * len(running)
    plan: list[tuple[int, int, int]] = []
    for prompt in prompts:
        best = (0, 0, 0)  # (shared, -wave, donor)
        for donor, tokens in enumerate(known):
            shared = min(_common_prefix(tokens, prompt), len(prompt) - 1)
            if shared >= MIN_SHARED_PREFIX and (shared, -waves[donor]) > best[:2]:
                best = (shared, -waves[donor], donor)
        shared, _, donor = best
        wave = waves[donor] + 1 if shared else 0
        plan.append((wave, donor, shared))
        waves.append(wave)
        known.append(prompt)
    return plan


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    low, high = 0, n  # a[:low] == b[:low], a[:high] != b[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle
    return low
