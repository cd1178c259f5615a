"""Discovery: one hard problem, a checker and an objective, searched by asking a model for improving attempts.

`problem` (what a problem is and how to load one), `evaluation` (scoring an attempt in the sandbox), `archive`
(the PUCT archive of attempts) and `search` (the archive kept as a release file, and the next step's prompts).
"""
