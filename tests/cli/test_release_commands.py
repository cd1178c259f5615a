"""`reef releases / rollback / promote` against a small HTTP shim over a real git release store."""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from reef.cli.releases import add_release_commands
from reef.core.errors import ReefError
from reef.releases import GitReleaseStore

TOKEN = "secret-token"


def _handler_for(store: GitReleaseStore) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _reply(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _route(self) -> tuple[str, str] | None:
            if self.headers.get("authorization") != f"Bearer {TOKEN}":
                self._reply(401, {"error": {"type": "authentication_error", "message": "bad token"}})
                return None
            _, _, _, scenario, action = self.path.split("/")
            return scenario, action

        def do_GET(self) -> None:  # noqa: N802
            if route := self._route():
                head = store.head(route[0])
                current = head.release_id if head else None
                releases = [r.to_json(current=r.release_id == current) for r in store.list(route[0])]
                self._reply(200, {"releases": releases})

        def do_POST(self) -> None:  # noqa: N802
            if route := self._route():
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                try:
                    release = store.republish(route[0], body["release_id"], route[1])
                except ReefError as error:
                    self._reply(error.status, {"error": {"type": error.type, "message": error.message}})
                    return
                self._reply(200, release.to_json(current=True))

    return Handler


@pytest.fixture
def store(tmp_path: Path) -> GitReleaseStore:
    return GitReleaseStore(str(tmp_path / "releases.git"), tmp_path / "work")


@pytest.fixture
def server_url(store: GitReleaseStore) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(store))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def reef(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="reef")
    add_release_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return int(args.handler(args))


@pytest.fixture
def history(store, content):
    first = store.publish("demo", content("v1", {"a": "1"}), None, operation="creation", recipe="sft")
    second = store.publish("demo", content("v2", {"a": "2"}), first.release_id, step=1, metrics={"score": 0.75})
    pending = store.publish("demo", content("v3", {"a": "3"}), second.release_id, step=2, pending=True)
    return first, second, pending


def test_releases_prints_a_table_of_the_history(server_url, history, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    assert reef("releases", "demo", "--url", server_url, "--token", TOKEN) == 0
    out = capsys.readouterr().out
    for release in history:
        assert release.release_id[:12] in out
    assert "serving" in out and "pending" in out and "score=0.75" in out


def test_releases_can_print_raw_json(server_url, history, capsys):
    assert reef("releases", "demo", "--json", "--url", server_url, "--token", TOKEN) == 0
    assert [r["release_id"] for r in json.loads(capsys.readouterr().out)["releases"]][-1] == history[0].release_id


def test_rollback_by_a_unique_prefix_serves_the_old_content_as_a_new_release(server_url, store, history, capsys):
    first = history[0]
    assert reef("rollback", "demo", first.release_id[:8], "--url", server_url, "--token", TOKEN) == 0
    head = store.head("demo")
    assert head.operation == "rollback" and head.content_id == first.content_id
    assert head.release_id[:12] in capsys.readouterr().out


def test_promote_serves_a_pending_release(server_url, store, history):
    pending = history[2]
    assert reef("promote", "demo", pending.release_id, "--url", server_url, "--token", TOKEN) == 0
    assert store.head("demo").content_id == pending.content_id


def test_a_refused_command_prints_the_servers_error_and_fails(server_url, store, history, capsys):
    serving = history[1]
    assert reef("rollback", "demo", serving.release_id, "--url", server_url, "--token", TOKEN) == 1
    assert "409 conflict_error" in capsys.readouterr().out
    assert reef("releases", "demo", "--url", server_url, "--token", "wrong") == 1
    assert "401" in capsys.readouterr().out
    assert reef("rollback", "demo", "ffff", "--url", server_url, "--token", TOKEN) == 1
    assert "no release" in capsys.readouterr().out


def test_an_unreachable_server_is_reported_in_one_line(capsys):
    assert reef("releases", "demo", "--url", "http://127.0.0.1:9") == 1
    assert "cannot reach" in capsys.readouterr().out
