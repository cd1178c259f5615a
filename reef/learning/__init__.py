"""The learning loop: processors, recipes, training backends, evaluation and the per-scenario learner."""
