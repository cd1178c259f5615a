"""The built-in recipes, one module each; `learning.recipe: <name>` loads `reef.recipes.<name>.RECIPE`.

- `basic`: records only (surface `none`).
- `sft`: demonstrations → masked NLL (surface `weights`).
- `rl`: scores → single-rollout clipped policy gradient against a running baseline (surface `weights`).
- `grpo`: grouped rollouts → group-normalized advantages, same clipped loss (surface `weights`).
- `openclawrl`: no reports; sessions from traffic, a next-state judge's rewards and hints (surface `weights`).
"""
