"""`guidance_ttt`: the trained model is a guide; a frozen executor writes the attempts.

The next step's parents carry the guide's prompt (`messages`: the task, the parent's score and its checker summary,
never the solution) and `executor_template`, the executor's prompt with `{guidance}` to fill. A client asks the
guide R times through `/v1/*` (with `guide_response_format`, which asks for the block itself); an answer that does
not end with a `<guidance>…</guidance>` block scores 0 and the executor is skipped; otherwise it asks the executor —
the scenario's base release (`executor_release_id`, served with `x-reef-release-id`: the base model, adapter off) or
any OpenAI-compatible endpoint — with the parent and the guidance, evaluates that attempt and reports it citing the
guide's answer only, so only the guide's tokens train.
Everything else (the grid, advantages, the archive in each release) is `tttd`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from reef.core.views import NextStepView
from reef.discovery.guidance import GUIDE_RESPONSE_FORMAT, executor_prompt, guide_prompt
from reef.recipes.tttd import TTTDRecipe


class GuidanceTTTRecipe(TTTDRecipe):
    """Test-time training of a guide whose advice a frozen executor follows."""

    name: ClassVar[str] = "guidance_ttt"

    def next_step(self, release_dir: Path, groups: int) -> NextStepView:
        step = super().next_step(release_dir, groups)
        archive, problem = self.archive_of(release_dir), self.problem()
        for parent in step["parents"]:
            entry = archive.entries[parent["parent_id"]]
            prompt = guide_prompt(problem, entry)
            parent.update(
                prompt=prompt,
                messages=[{"role": "user", "content": prompt}],
                executor_template=executor_prompt(problem, entry, "{guidance}"),
            )
        return {**step, "mode": "guidance", "guide_response_format": GUIDE_RESPONSE_FORMAT}


RECIPE = GuidanceTTTRecipe
