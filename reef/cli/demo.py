"""`reef demo`: the command; the driver is `reef.demo.run`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from reef.demo.recipes import PROFILES, SCORED, recipe_config_flag, seed_count_flag, serve_flags_flag, task_count_flag
from reef.demo.run import VALIDATION_TASKS
from reef.demo.stream import ARMS, LESSON_CODES, LESSONS, arms_flag, lesson_codes_flag, lesson_count_flag
from reef.demo.suites import SUITES


def add_demo_command(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="watch Reef learn: held-out score before and after live training rounds",
        description=(
            "Start Reef on the embedded defaults, measure a held-out test set, run training rounds through the "
            "API (answers graded and reported), and measure again after every published release."
        ),
    )
    parser.add_argument("--recipe", choices=sorted(PROFILES), default="sft", help="learning recipe (default sft)")
    parser.add_argument(
        "--rounds",
        type=int,
        help="training rounds, one learner step each (default: the recipe's on the suite; sft: 12 on skills, 3 on "
        "catalogue; with --stream, per lesson: 2)",
    )
    parser.add_argument(
        "--time-budget",
        type=float,
        default=600.0,
        help="seconds; no round starts that would end past it (600; with --stream, per lesson)",
    )
    parser.add_argument("--json", action="store_true", help="print only the result JSON on stdout")
    parser.add_argument("--report", type=Path, help="write a self-contained HTML report here")
    parser.add_argument("--port", type=int, help="port for the server (default: a free one)")
    parser.add_argument("--state-dir", type=Path, help="Reef's state directory (default: a temporary one)")
    parser.add_argument("--keep-state", action="store_true", help="keep the state directory afterwards")
    parser.add_argument("--learning-rate", type=float, help="override the recipe's training learning rate")
    parser.add_argument("--epochs", type=int, help="override the recipe's epochs per batch")
    parser.add_argument("--seed", type=int, default=0, help="task generation seed (the first one, with --seeds)")
    parser.add_argument(
        "--seeds",
        type=seed_count_flag,
        default=1,
        metavar="K",
        help="run the demo at K seeds (--seed, --seed+1, …), each with its task instances regenerated, and report "
        "baseline, final and each control as means over the seeds with 95%% intervals over the seeds (default 1)",
    )
    parser.add_argument(
        "--suite",
        choices=sorted(SUITES),
        default="skills",
        help="skills (default): short answers the base model knows but buries in a sentence; catalogue: an "
        "invented product catalogue (codes to departments) asked in phrasings never trained on",
    )
    parser.add_argument(
        "--feedback",
        choices=["recipe", "score"],
        default="recipe",
        help="what the simulated users report: recipe (default), what the recipe learns best from (sft: the right "
        "answer; rl, grpo: partial credit); score: only a 0/1 score of the sampled answer, nothing else (rl, grpo), "
        "with a memory control beside the prompt control",
    )
    parser.add_argument(
        "--no-controls",
        dest="controls",
        action="store_false",
        help="skip the control arms (weights recipes: the base model with the suite's instruction and solved "
        "examples; harness methods: the method with its proposer off, a second run)",
    )
    parser.add_argument(
        "--validation-tasks",
        type=task_count_flag,
        default=VALIDATION_TASKS,
        metavar="N",
        help=f"the learner's gate tasks, cycling through the families (default {VALIDATION_TASKS}: two per family; "
        "not openclawrl, whose gate questions are fixed)",
    )
    parser.add_argument(
        "--sample-from",
        choices=["serving", "lineage"],
        default="serving",
        help="who answers the training prompts: the serving release (default) or the learner's lineage tip, the "
        "kept-but-unpublished weights its next step trains from (on-policy; the held-out set is always measured "
        "on the serving release; not openclawrl, whose sessions go to the serving release)",
    )
    parser.add_argument("--single-phase", action="store_true", help="sdft: one phase on every family instead of two")
    parser.add_argument("--compare", choices=["sft"], help="sdft: run the same stream with sft too")
    parser.add_argument(
        "--recipe-config",
        type=recipe_config_flag,
        metavar="JSON",
        help='keys to set in the recipe\'s learning.recipe_config, e.g. \'{"teacher": "ema"}\' for sdft',
    )
    parser.add_argument(
        "--teacher-rounds", type=int, default=8, help="opd: sft rounds that train the teacher first (default 8)"
    )
    parser.add_argument(
        "--serve-flags",
        type=serve_flags_flag,
        default=[],
        metavar="FLAGS",
        help="more `reef serve` flags after the demo's own (a later flag wins), e.g. "
        "--serve-flags='--inference.dtype float32 --training.compute-dtype float32' to measure another precision",
    )
    parser.add_argument(
        "--stream",
        action="store_true",
        help="teach a stream of lessons (invented catalogues) one after another to one scenario, measure every "
        "lesson so far after each, and report the learning curve, forgetting, transfer and final average per arm",
    )
    parser.add_argument(
        "--lessons",
        type=lesson_count_flag,
        default=LESSONS,
        metavar="K",
        help=f"--stream: how many lessons (default {LESSONS})",
    )
    parser.add_argument(
        "--lesson-codes",
        type=lesson_codes_flag,
        default=LESSON_CODES,
        metavar="N",
        help=f"--stream: the invented codes a lesson teaches (default {LESSON_CODES}; from 4 to 40): three training "
        "prompts, two held-out and one gate task each, so a lesson's steps take time in proportion",
    )
    parser.add_argument(
        "--arms",
        type=arms_flag,
        default=list(ARMS),
        metavar="NAMES",
        help=f"--stream: the arms to run, separated by commas (default {','.join(ARMS)}): "
        + "; ".join(f"{arm.name}: {arm.summary}" for arm in ARMS.values()),
    )
    parser.add_argument(
        "--rollout",
        choices=["immediate", "canary"],
        default="immediate",
        help="canary: show a live rollout instead (sft; a better release promoted, a worse one the gate accepts "
        "rolled back by scripted users' reports; prints the reports each decision took and who saw the canary)",
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    if args.feedback == "score" and (args.recipe not in SCORED or args.stream or args.rollout != "immediate"):
        print(f"reef demo: --feedback score runs {' and '.join(SCORED)} alone (not --stream or --rollout)",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.stream:
        from reef.demo.stream import run_stream_demo

        return run_stream_demo(args)
    if args.rollout == "canary":
        from reef.demo.rollout import run_rollout_demo

        return run_rollout_demo(args)
    from reef.demo.run import run_demo

    return run_demo(args)
