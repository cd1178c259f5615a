"""Per coding agent: the wall time of one gate episode pair (candidate and serving tree side by side, sandboxed) on
the scripted model (tests/fakes/scripted_model.py), and the size of the agent's first model request in the serving
model's tokens, against that model's context.

Two sizes per agent: `request` is the system prompt, messages and tool schemas as the agent sends them (JSON text
tokenized), `rendered` the prompt the embedded engine renders through the model's chat template (the size its
context check sees; a template that ignores tools leaves them out).
Run: `.venv/bin/python benchmarks/agent_episodes.py [--model-path smollm2] [--agents pi,claude,codex,opencode]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reef.core.scenarios import Dialect  # noqa: E402
from reef.harness.agent_gate import AgentEvaluator  # noqa: E402
from reef.harness.episodes import AgentEpisodes  # noqa: E402
from reef.inference.translate import convert_request  # noqa: E402
from tests.fakes.scripted_model import start_scripted_model  # noqa: E402

DIALECTS = {"/v1/messages": Dialect.MESSAGES, "/v1/responses": Dialect.RESPONSES}


def tokenizer_of(model_path: str) -> Any:
    from transformers import AutoConfig, AutoTokenizer

    from reef.inference.local.model_files import gguf_source

    gguf = gguf_source(model_path)
    if gguf is not None:
        config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
        return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name), config
    return AutoTokenizer.from_pretrained(model_path), AutoConfig.from_pretrained(model_path)


def sizes(tokenizer: Any, path: str, body: dict[str, Any]) -> tuple[int, int]:
    """(the request's JSON in tokens, the prompt the engine renders in tokens)."""
    from reef.inference.local.prompt import render_prompt_ids

    request = len(tokenizer(json.dumps(body), add_special_tokens=False)["input_ids"])
    chat = convert_request(body, DIALECTS.get(path, Dialect.CHAT), Dialect.CHAT)
    try:
        rendered = len(render_prompt_ids(tokenizer, chat["messages"], chat.get("tools")))
    except Exception as exc:  # a conversation the template rejects
        print(f"  (could not render: {exc})")
        rendered = -1
    return request, rendered


async def one_pair(agent: str, url: str, root: Path) -> tuple[float, str]:
    """Wall seconds of one candidate/serving episode pair, as the gate runs it, and its scores."""
    from tests.harness.test_agent_episodes import gate

    evaluator: AgentEvaluator = gate(agent, _Model(url), root, [{"prompt": "Write the answer file.",
                                     "check": {"file": "answer.txt", "contains": "MARKER-7f3a"}}])  # fmt: skip
    started = time.perf_counter()
    candidate, current = await evaluator.paired_scores("s", root / "candidate", None)
    return time.perf_counter() - started, f"{candidate[0]:g}/{current[0]:g}"


class _Model:
    def __init__(self, url: str) -> None:
        self.url = url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model-path", default="smollm2")
    parser.add_argument("--agents", default="pi,claude,codex,opencode")
    args = parser.parse_args()
    tokenizer, config = tokenizer_of(args.model_path)
    context = int(getattr(config, "max_position_embeddings", 0))
    print(f"model {args.model_path}: context {context} tokens")
    print(f"{'agent':<10} {'version':<10} {'pair s':>7} {'scores':>7} {'request tok':>12} {'rendered tok':>13}  fits")
    for agent in args.agents.split(","):
        if not AgentEpisodes.available(agent):
            print(f"{agent:<10} not installed")
            continue
        model = start_scripted_model()
        try:
            with tempfile.TemporaryDirectory() as root:
                wall_s, scores = asyncio.run(one_pair(agent, model.url, Path(root)))
            first = next(r for r in model.received if r.body.get("tools"))
            request, rendered = sizes(tokenizer, first.path, first.body)
        finally:
            model.stop()
        version = AgentEpisodes(agent).agent.installed_version() or "?"
        fits = "yes" if max(request, rendered) <= context else "no"
        print(f"{agent:<10} {version:<10} {wall_s:>7.1f} {scores:>7} {request:>12} {rendered:>13}  {fits}")


if __name__ == "__main__":
    main()
