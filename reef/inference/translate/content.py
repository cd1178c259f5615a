"""Content shapes shared by the three dialects: text extraction and image references."""

from __future__ import annotations

from typing import Any

_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})


def text_of(content: Any) -> str:
    """The text of a content value in any dialect: a string, or a list of text parts/blocks joined together."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        return content.get("text", "") if content.get("type") in _TEXT_PART_TYPES else ""
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("type") in _TEXT_PART_TYPES:
            texts.append(part.get("text", ""))
        elif isinstance(part, dict) and part.get("type") == "tool_result":
            texts.append(text_of(part.get("content")))
    return "\n".join(texts)


def image_url_source(url: str) -> dict[str, Any]:
    """An OpenAI image URL (http(s) or `data:` URL) → an Anthropic image `source`."""
    if url.startswith("data:") and ";base64," in url:
        header, data = url[5:].split(";base64,", 1)
        return {"type": "base64", "media_type": header or "image/png", "data": data}
    return {"type": "url", "url": url}


def data_url(source: dict[str, Any]) -> str:
    """An Anthropic image `source` → an OpenAI image URL."""
    if source.get("type") == "base64":
        return f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    return str(source.get("url", ""))
