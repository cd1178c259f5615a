"""The installer: a POSIX sh script that writes a release's rendered tree where the agent reads it and binds the
agent's model to this Reef server with the token from `REEF_TOKEN`.

The script is idempotent: it stamps `.reef-release` in the agent directory and, run again for the same release,
server and scenario, prints "already current" and changes nothing. Files the previous install wrote and the new
release no longer has are removed (listed in `.reef-files`). The token never appears in the script itself, and
the server's address is the configured one (`reef.public_url`), never one a request names.
"""

from __future__ import annotations

import hashlib
import json
import re

from reef.core.errors import BadRequest
from reef.harness.catalog import Adapter

STAMP_FILE = ".reef-release"
MANIFEST_FILE = ".reef-files"
_SAFE_RELATIVE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*")


def install_script(
    adapter: Adapter, files: dict[str, str], *, release_id: str, scenario: str, base_url: str, model: str
) -> str:
    """The installer for `files` (already rendered for `adapter`) of release `release_id`."""
    for relative in files:
        # Node names are checked on admission; a tree from elsewhere must still not name a path the shell reads.
        if not _SAFE_RELATIVE.fullmatch(relative) or ".." in relative.split("/"):
            raise BadRequest(f"{relative!r} is not a plain relative path", field="nodes.config.name")
    base_url = base_url.rstrip("/")
    stamp = hashlib.sha256(f"{release_id}\n{base_url}\n{scenario}\n{model}".encode()).hexdigest()[:16]
    lines = [
        "#!/bin/sh",
        f"# Reef harness installer: scenario {scenario}, release {release_id}, adapter {adapter.name}.",
        "# Usage: REEF_TOKEN=<token> sh install.sh   (REEF_TOKEN may be empty when the server has no tokens)",
        "set -eu",
        'REEF_TOKEN="${REEF_TOKEN:-}"',
        f"REEF_URL={_quote(base_url)}",
        f"REEF_SCENARIO={_quote(scenario)}",
        f"REEF_MODEL={_quote(model)}",
        f'DIR="{adapter.install_dir}"',
        f"STAMP={_quote(release_id + ' ' + stamp)}",
        f'if [ -f "$DIR/{STAMP_FILE}" ] && [ "$(cat "$DIR/{STAMP_FILE}")" = "$STAMP" ]; then',
        f'  echo "reef: $DIR already current (release {release_id})"',
        "  exit 0",
        "fi",
        'mkdir -p "$DIR"',
        f'if [ -f "$DIR/{MANIFEST_FILE}" ]; then',
        f'  while IFS= read -r old; do [ -n "$old" ] && rm -f "$DIR/$old"; done < "$DIR/{MANIFEST_FILE}"',
        "fi",
    ]
    for relative, text in sorted(files.items()):
        parent = relative.rpartition("/")[0]
        if parent:
            lines.append(f'mkdir -p "$DIR/{parent}"')
        lines.append(f'printf %s {_quote(text)} > "$DIR/{relative}"')
    lines += _binding(adapter.binding)
    manifest = "\n".join(sorted(files)) + "\n"
    lines += [
        f'printf %s {_quote(manifest)} > "$DIR/{MANIFEST_FILE}"',
        f'printf %s "$STAMP" > "$DIR/{STAMP_FILE}"',
        f'echo "reef: installed release {release_id} ({len(files)} files) into $DIR"',
        "",
    ]
    return "\n".join(lines)


def _binding(kind: str) -> list[str]:
    """Shell lines writing the model binding (endpoint, token, scenario header, model) — install time only."""
    key = '"${REEF_TOKEN:-reef}"'
    if kind == "pi":
        template = json.dumps(
            {
                "providers": {
                    "reef": {
                        "api": "openai-completions",
                        "baseUrl": "%s/v1",
                        "apiKey": "%s",
                        "headers": {"x-reef-scenario": "%s"},
                        "models": [{"id": "%s"}],
                    }
                }
            },
            indent=2,
        )
        return [
            "(umask 077;",
            f'  printf {_quote(template + chr(10))} "$REEF_URL" {key} "$REEF_SCENARIO" "$REEF_MODEL" '
            '> "$DIR/models.json")',
            'echo "reef: pi is bound to $REEF_URL (run: pi --provider reef --model $REEF_MODEL)"',
        ]
    exports = {
        "claude": [
            ("ANTHROPIC_BASE_URL", '"$REEF_URL"'),
            ("ANTHROPIC_AUTH_TOKEN", key),
            ("ANTHROPIC_CUSTOM_HEADERS", '"x-reef-scenario: $REEF_SCENARIO"'),
            ("ANTHROPIC_MODEL", '"$REEF_MODEL"'),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ],
        "openai-env": [
            ("OPENAI_BASE_URL", '"$REEF_URL/v1"'),
            ("OPENAI_API_KEY", key),
            ("REEF_SCENARIO", '"$REEF_SCENARIO"'),
            ("REEF_MODEL", '"$REEF_MODEL"'),
        ],
        "env": [
            ("REEF_BASE_URL", '"$REEF_URL"'),
            ("REEF_API_KEY", key),
            ("REEF_SCENARIO", '"$REEF_SCENARIO"'),
            ("REEF_MODEL", '"$REEF_MODEL"'),
        ],
    }[kind]
    body = "".join(f"printf 'export {name}=%s\\n' \"$(_q {value})\"; " for name, value in exports)
    return [
        '_q() { printf "\'%s\'" "$(printf %s "$1" | sed "s/\'/\'\\\\\\\\\'\'/g")"; }',
        f'(umask 077; {{ {body}}} > "$DIR/reef.env")',
        'echo "reef: model binding written to $DIR/reef.env (source it before starting the agent)"',
    ]


def _quote(text: str) -> str:
    """Single-quote `text` for POSIX sh (byte-exact, no expansion)."""
    return "'" + text.replace("'", "'\\''") + "'"
