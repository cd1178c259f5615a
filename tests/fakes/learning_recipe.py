"""Fake recipes for learner tests: demonstrations arrive as reports `{"feedback": {"prompt", "answer"}}`.

`DemoRecipe` is a weights recipe (grown by the training backend), `ReplayableDemoRecipe` one that rehearses;
`FileRecipe` grows its own candidate directory (as harness recipes do) without any backend; `ForgetfulTreeRecipe`
grows a harness tree of worked examples a chat agent is served, and forgets the ones a report names;
`CitingDemoRecipe` joins reports with the inference records they cite and holds some out for the gate, as `sft` does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from reef.core.errors import BadRequest
from reef.core.records import Record
from reef.harness.render import write_tree
from reef.harness.tree import HarnessTree, Node, load_tree
from reef.learning.base import Batch, Candidate, Extensions, GrowContext, Processor, Recipe
from reef.learning.report import Report
from reef.learning.surface import HARNESS, Surface
from reef.recipes.harness_method import HARNESS_TREE
from reef.recipes.reports import CitedInference
from reef.recipes.sft import SFTProcessor, SFTReport
from reef.recipes.weights import WeightsRecipe
from tests.fakes.dict_engine import ANSWERS_FILE, read_answers


class DemoProcessor(Processor):
    """One unit per report carrying a demonstration; a built batch stays reserved until acknowledged."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self.units: list[dict[str, Any]] = []
        self.reserved: dict[str, list[dict[str, Any]]] = {}
        self.ingested: list[str] = []

    def ingest(self, record: Record) -> None:
        self.ingested.append(record.agent_record_id)
        feedback = (record.payload or {}).get("feedback")
        if record.request_type == "report" and isinstance(feedback, dict):
            self.units.append(
                {"prompt": feedback["prompt"], "answer": feedback["answer"], "record_id": record.agent_record_id}
            )

    def ready(self) -> int:
        return len(self.units)

    def build_batch(self, partial: bool = False) -> Batch | None:
        if not self.units:
            return None
        taken, self.units = self.units[: self.batch_size], self.units[self.batch_size :]
        batch_id = f"batch-{taken[0]['record_id']}"
        self.reserved[batch_id] = taken
        return Batch(batch_id, taken, [unit["record_id"] for unit in taken])

    def acknowledge(self, batch_id: str) -> None:
        self.reserved.pop(batch_id)


class DemoReport(Report):
    """Demonstrations as `{"feedback": {"prompt", "answer"}}`."""

    def check(self, recipe: Recipe) -> None:
        feedback = self.feedback
        if not isinstance(feedback, dict) or not isinstance(feedback.get("answer"), str):
            raise BadRequest("must be an object with `prompt` and `answer`", field="feedback")


class DemoRecipe(WeightsRecipe):
    name: ClassVar[str] = "demo"
    loss_name = "sft"  # the fake training backend reads only the samples
    report_model: ClassVar[type[Report]] = DemoReport

    def processor(self) -> Processor | None:
        return DemoProcessor(self.settings.learning.batch_size)


class ReplayableDemoProcessor(DemoProcessor):
    """`DemoProcessor` whose samples may be replayed by rehearsal, as `sft`'s may."""

    replayable: ClassVar[bool] = True


class ReplayableDemoRecipe(DemoRecipe):
    """`DemoRecipe` that rehearses (`learning.rehearsal_share`)."""

    name: ClassVar[str] = "replayable-demo"

    def processor(self) -> Processor | None:
        return ReplayableDemoProcessor(self.settings.learning.batch_size)


class FileRecipe(DemoRecipe):
    """Grows a candidate directory itself (like a harness recipe): the parent's answers plus the batch's."""

    name: ClassVar[str] = "files"
    surface: ClassVar[Surface] = HARNESS

    def extensions(self) -> Extensions:
        return Extensions(seed=self.seed)

    def seed(self, directory: Path) -> None:
        (directory / "rules.md").write_text("Answer briefly.\n")

    async def grow(self, batch: Batch, parent_dir: Path | None, ctx: GrowContext) -> Candidate:
        answers = read_answers(parent_dir)
        answers.update({sample["prompt"]: sample["answer"] for sample in batch.samples})
        out = ctx.work_dir / "candidate"
        out.mkdir()
        (out / ANSWERS_FILE).write_text(json.dumps(answers, sort_keys=True))
        (out / "rules.md").write_text("Answer briefly.\n")
        ctx.progress({"proposals": len(batch.samples)})
        return Candidate(out, {"proposals": len(batch.samples)})


class ForgetfulProcessor(DemoProcessor):
    """`DemoProcessor` whose units also carry the prompts the report's `metadata.forget` names."""

    def ingest(self, record: Record) -> None:
        before = len(self.units)
        super().ingest(record)
        if len(self.units) > before:
            metadata = (record.payload or {}).get("metadata") or {}
            self.units[-1]["forget"] = [str(prompt) for prompt in metadata.get("forget") or []]


class ForgetfulTreeRecipe(FileRecipe):
    """A harness recipe for a chat agent: each demonstration becomes a worked example (a `Q: …\nA: …` memory node,
    which the `recall` fake provider answers from), added to the parent's; the prompts a report's `metadata.forget`
    lists lose theirs, so a test can grow a candidate that forgets part of an earlier lesson."""

    name: ClassVar[str] = "forgetful-tree"
    surface: ClassVar[Surface] = HARNESS_TREE

    def processor(self) -> Processor | None:
        return ForgetfulProcessor(self.settings.learning.batch_size)

    def seed(self, directory: Path) -> None:
        write_tree(HarnessTree.of([Node("rules", "rules", {"text": "Answer briefly."})]), directory)

    async def grow(self, batch: Batch, parent_dir: Path | None, ctx: GrowContext) -> Candidate:
        forgotten = {f"Q: {prompt}\nA: " for sample in batch.samples for prompt in sample["forget"]}
        parent = load_tree(parent_dir) if parent_dir is not None else HarnessTree()
        kept = [node for node in parent if not any(node.text.startswith(prefix) for prefix in forgotten)]
        learnt = [
            Node(f"example-{sample['record_id']}", "memory", {"text": f"Q: {sample['prompt']}\nA: {sample['answer']}"})
            for sample in batch.samples
        ]
        out = ctx.work_dir / "candidate"
        write_tree(HarnessTree.of(kept + learnt), out)
        return Candidate(out, {"examples": len(kept) + len(learnt), "forgotten": len(parent) - len(kept)})


class CitingDemoProcessor(SFTProcessor):
    """SFT's report joining and held-out split, with samples the fake backend understands."""

    def join(self, report: SFTReport, rollouts: list[CitedInference]) -> None:
        demonstration = report.demonstration(from_feedback=False)
        record_ids = self.record_ids(report, rollouts)
        prompt = rollouts[0].messages[-1]["content"] if rollouts and rollouts[0].messages else None
        if demonstration is None or prompt is None:
            self.skip(record_ids, "unusable")
            return
        self.add_unit(record_ids, [{"prompt": prompt, "answer": demonstration, "record_id": report.agent_record_id}])


class CitingDemoRecipe(DemoRecipe):
    """Reports cite an inference record and carry `metadata.demonstration`, as for `sft`."""

    name: ClassVar[str] = "citing-demo"
    report_model: ClassVar[type[Report]] = Report

    def processor(self) -> Processor | None:
        return CitingDemoProcessor(self.settings.learning.batch_size)


class SlowFileRecipe(FileRecipe):
    """`FileRecipe` whose growing takes `learning.recipe_config.grow_s` seconds (default 3): long enough for a test
    to kill the replica that is training."""

    name: ClassVar[str] = "slow-files"

    async def grow(self, batch: Batch, parent_dir: Path | None, ctx: GrowContext) -> Candidate:
        import asyncio

        await asyncio.sleep(float(self.settings.learning.recipe_config.get("grow_s", 3)))
        return await super().grow(batch, parent_dir, ctx)
