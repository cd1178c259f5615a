"""Engines that answer inference requests: upstream proxy, embedded local model, dialect translation, SSE."""

from reef.inference.base import Completion, CompletionStream, Engine, RequestContext, StreamFrame, StreamResult

__all__ = ["Completion", "CompletionStream", "Engine", "RequestContext", "StreamFrame", "StreamResult"]
