"""The embedded local model engine: transformers + continuous batching + a LoRA adapter per release."""

from reef.inference.local.engine import LocalEngine
from reef.inference.local.model_files import load_base_model, resolve_model_path
from reef.inference.local.prompt import render_prompt_ids

__all__ = ["LocalEngine", "load_base_model", "render_prompt_ids", "resolve_model_path"]
