#!/bin/sh
# The smallest full harness-evolution loop: serve SmolLM2 with Reef, send tasks, report scores, wait for an
# evolved release, pull the tree, and write work/replay.html. Usage: ./run.sh [recipe]  (default: evolve)
# ADAPTER=pi ./run.sh: the scenario's adapter is pi, so the gate runs pi episodes (candidate vs serving tree);
# ADAPTER=claude / codex / opencode run that agent instead. UPSTREAM_URL (+ UPSTREAM_API, UPSTREAM_MODEL and
# REEF_UPSTREAM_API_KEY) serves through that endpoint instead of SmolLM2; EPISODE_MAX_TOKENS sets the agent's
# answer budget per model request in the gate's episodes (default 24 for SmolLM2, 4096 with UPSTREAM_URL).
set -eu
cd "$(dirname "$0")"
RECIPE="${1:-evolve}"
ADAPTER="${ADAPTER:-chat}"
PORT="${REEF_PORT:-8930}"
URL="http://127.0.0.1:$PORT"
SCENARIO="${REEF_SCENARIO:-tutorial-$RECIPE}"
PYTHON="${PYTHON:-python}"
mkdir -p work
set --
if [ -n "${UPSTREAM_URL:-}" ]; then
  : "${UPSTREAM_MODEL:?UPSTREAM_MODEL names the model the endpoint at UPSTREAM_URL serves}"
  set -- --inference.upstream-url "$UPSTREAM_URL" --inference.upstream-api "${UPSTREAM_API:-anthropic}" \
    --inference.upstream-model "$UPSTREAM_MODEL" --harness.episode-max-tokens "${EPISODE_MAX_TOKENS:-4096}"
elif [ -n "${EPISODE_MAX_TOKENS:-}" ]; then
  set -- --harness.episode-max-tokens "$EPISODE_MAX_TOKENS"
fi
"$PYTHON" -m reef.cli.main serve -c configs/serve.yaml --reef.port "$PORT" --storage.dir work/state \
  --learning.recipe "$RECIPE" --harness.default-adapter "$ADAPTER" "$@" > "work/serve-$RECIPE.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true' EXIT INT TERM
printf 'waiting for Reef on %s ' "$URL"
i=0
until curl -fsS "$URL/healthz" > /dev/null 2>&1; do
  i=$((i + 1))
  if [ "$i" -gt 300 ] || ! kill -0 "$SERVER" 2>/dev/null; then echo; cat "work/serve-$RECIPE.log"; exit 1; fi
  printf .; sleep 1
done
echo " up"
TREE_ADAPTER="$ADAPTER"
[ "$ADAPTER" = chat ] && TREE_ADAPTER=pi
"$PYTHON" loop.py --url "$URL" --scenario "$SCENARIO" --tasks tasks/train.jsonl --work work --adapter "$TREE_ADAPTER"
