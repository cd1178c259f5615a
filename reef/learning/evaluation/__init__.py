"""The evaluation gate: held-out tasks, checkers, the paired evaluator and selection policies."""

from reef.learning.evaluation.checkers import check
from reef.learning.evaluation.evaluator import TaskEvaluator, answer_text
from reef.learning.evaluation.selectors import (
    Always,
    MeanImprovement,
    ScoreComparison,
    SignificantMeanImprovement,
    load_selector,
)
from reef.learning.evaluation.tasks import Task, load_tasks, parse_task

__all__ = [
    "Always",
    "MeanImprovement",
    "ScoreComparison",
    "SignificantMeanImprovement",
    "Task",
    "TaskEvaluator",
    "answer_text",
    "check",
    "load_selector",
    "load_tasks",
    "parse_task",
]
