"""Fuzzing the `/v1/*` inference routes: bad input never earns a 5xx, and a refusal stores nothing.

Every client dialect meets every upstream dialect (the fake provider) and, for a few cases, the embedded SmolLM2.
Bodies start from well-formed requests, then one field gets a value of the wrong type, loses a required key or
gains nested garbage; there are also random objects over the known fields, non-object JSON and non-JSON bytes.
An answer is either a 200 whose record is durable, or a 400 whose message starts with the offending field
(`messages.0.content: must be …`) and after which the scenario holds no new record.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes.reef_process import ReefProcess
from tests.fakes.upstream import FakeUpstream

pytestmark = pytest.mark.e2e

CHAT_ROUTE, RESPONSES_ROUTE, MESSAGES_ROUTE, COUNT_ROUTE = (
    "/v1/chat/completions",
    "/v1/responses",
    "/v1/messages",
    "/v1/messages/count_tokens",
)
ROUTES = [CHAT_ROUTE, RESPONSES_ROUTE, MESSAGES_ROUTE, COUNT_ROUTE]
UPSTREAM_APIS = ["openai", "responses", "anthropic"]
# Required somewhere: a refusal of a random object may name one of these even when the body lacks it.
REQUIRED_FIELDS = {"messages", "input", "max_tokens"}
FUZZ = settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
IMAGE = "data:image/png;base64,iVBORw0KGgo="
CHAT_BODIES: list[dict[str, Any]] = [
    {
        "model": "fake-model",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [{"type": "text", "text": "Weather?"}, {"type": "image_url", "image_url": {"url": IMAGE}}],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ],
        "max_tokens": 4,
        "temperature": 0.5,
        "stop": ["END"],
        "tools": [{"type": "function", "function": {"name": "weather", "description": "d", "parameters": SCHEMA}}],
        "tool_choice": {"type": "function", "function": {"name": "weather"}},
    },
    {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_completion_tokens": 4,
        "top_p": 0.9,
        "user": "u",
        "metadata": {"k": "v"},
        "parallel_tool_calls": False,
        "tool_choice": "auto",
    },
]
MESSAGES_BODIES: list[dict[str, Any]] = [
    {
        "model": "fake-model",
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Weather?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]}
                ],
            },
        ],
        "max_tokens": 4,
        "temperature": 0.5,
        "stop_sequences": ["END"],
        "tools": [{"name": "weather", "description": "d", "input_schema": SCHEMA}],
        "tool_choice": {"type": "tool", "name": "weather", "disable_parallel_tool_use": True},
        "metadata": {"user_id": "u"},
    },
    {
        "model": "fake-model",
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4,
        "stream": True,
        "top_p": 0.9,
        "top_k": 5,
    },
]
RESPONSES_BODIES: list[dict[str, Any]] = [
    {
        "model": "fake-model",
        "instructions": "Be brief.",
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Weather?"}, {"type": "input_image", "image_url": IMAGE}],
            },
            {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": '{"city":"Oslo"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
            {"role": "user", "content": "thanks"},
        ],
        "max_output_tokens": 4,
        "temperature": 0.5,
        "tools": [{"type": "function", "name": "weather", "description": "d", "parameters": SCHEMA, "strict": False}],
        "tool_choice": {"type": "function", "name": "weather"},
        "metadata": {"k": "v"},
        "user": "u",
    },
    {"model": "fake-model", "input": "hi", "stream": True, "parallel_tool_calls": True, "tool_choice": "auto"},
]
BODIES = {
    CHAT_ROUTE: CHAT_BODIES,
    RESPONSES_ROUTE: RESPONSES_BODIES,
    MESSAGES_ROUTE: MESSAGES_BODIES,
    COUNT_ROUTE: [{k: v for k, v in body.items() if k not in ("stream", "max_tokens")} for body in MESSAGES_BODIES],
}
KNOWN_FIELDS = {route: sorted({key for body in bodies for key in body}) for route, bodies in BODIES.items()}

# --- strategies ----------------------------------------------------------------------------------------------

# Keys and words of the three dialects, so that garbage often looks almost right (a part with a known type, ...).
SHAPE_KEYS = [
    "type", "role", "content", "text", "image_url", "url", "source", "function", "name", "arguments", "id",
    "tool_calls", "tool_call_id", "tool_use_id", "input", "output", "call_id", "parameters", "input_schema",
]  # fmt: skip
SHAPE_WORDS = [
    "text", "image_url", "image", "tool_use", "tool_result", "function", "message", "function_call",
    "function_call_output", "input_text", "output_text", "input_image", "user", "assistant", "system", "tool",
]  # fmt: skip
_text = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=12)
_scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | _text
json_values = st.recursive(
    _scalars | st.sampled_from(SHAPE_WORDS),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(SHAPE_KEYS) | _text, children | st.sampled_from(SHAPE_WORDS), max_size=4)
    ),
    max_leaves=8,
)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    return "number" if isinstance(value, int | float) else type(value).__name__


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into `value`'s objects and lists."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    out: list[tuple] = []
    for key, child in items:
        out.append((*prefix, key))
        out += _paths(child, (*prefix, key))
    return out


def _get(value: Any, path: tuple) -> Any:
    for key in path:
        value = value[key]
    return value


@dataclasses.dataclass(frozen=True)
class Case:
    """A body to send and whom a refusal may blame: the mutated path, or (for random bodies) any field in it."""

    content: bytes
    blamed: tuple | None = None

    def parsed(self) -> Any:
        try:
            return orjson.loads(self.content)
        except orjson.JSONDecodeError:
            return None


@st.composite
def mutated_bodies(draw: st.DrawFn, route: str) -> Case:
    """A well-formed body with one field of the wrong type, one key gone, or garbage added to one list."""
    body = orjson.loads(orjson.dumps(draw(st.sampled_from(BODIES[route]))))
    paths = _paths(body)
    lists = [p for p in paths if isinstance(_get(body, p), list)]
    how = draw(st.sampled_from(["wrong type", "missing", "garbage in a list"] if lists else ["wrong type", "missing"]))
    if how == "missing":
        path = draw(st.sampled_from([p for p in paths if isinstance(p[-1], str)]))
        del _get(body, path[:-1])[path[-1]]
    elif how == "garbage in a list":
        where = draw(st.sampled_from(lists))
        path = (*where, len(_get(body, where)))
        _get(body, where).append(draw(json_values))
    else:
        path = draw(st.sampled_from(paths))
        was = _kind(_get(body, path))
        _get(body, path[:-1])[path[-1]] = draw(json_values.filter(lambda v: _kind(v) != was))
    return Case(orjson.dumps(body), blamed=path)


@st.composite
def random_bodies(draw: st.DrawFn, route: str) -> Case:
    """An object over the route's known fields with arbitrary values, non-object JSON, or bytes that are no JSON."""
    how = draw(st.sampled_from(["object", "object", "not an object", "not JSON"]))
    if how == "object":
        fields = {key: json_values for key in KNOWN_FIELDS[route]}
        fields["model"] = st.sampled_from(["fake-model", ""]) | json_values.filter(lambda v: not isinstance(v, str))
        return Case(orjson.dumps(draw(st.fixed_dictionaries({}, optional=fields))))
    if how == "not an object":
        return Case(orjson.dumps(draw(json_values.filter(lambda v: not isinstance(v, dict)))))
    return Case(draw(st.binary(max_size=40) | _text.map(str.encode)))


# --- checking one answer -------------------------------------------------------------------------------------


def _blamed_field(response: httpx.Response) -> str:
    error = response.json()["error"]
    message = error["message"]
    assert ": " in message, f"the refusal names no field: {message!r}"
    return message.split(": ", 1)[0]


def _related(field: str, path: tuple) -> bool:
    """Whether `field` (dotted) and `path` lie on one branch: the refusal blames the mutation or what holds it.

    A changed `type` changes what the rest of its object must hold, so any field of that object may be blamed.
    """
    if path[-1] == "type":
        path = path[:-1]
    named, mutated = field.split("."), [str(key) for key in path]
    shorter = min(len(named), len(mutated))
    return named[:shorter] == mutated[:shorter]


def _refusal_blames_the_right_field(case: Case, field: str) -> bool:
    if case.blamed is not None:
        return _related(field, case.blamed)
    body = case.parsed()
    if not isinstance(body, dict):
        return field == "body"
    return field.split(".")[0] in set(body) | REQUIRED_FIELDS | {"body"}


class Scenario:
    """One scenario of a server, with the sequence of its last record seen."""

    def __init__(self, http: httpx.Client, name: str) -> None:
        self.http = http
        self.name = name
        assert http.post("/reef/scenarios", json={"name": name}).status_code in (200, 201)
        self.seen = self._page(0)[1]

    def _page(self, after: int) -> tuple[list[dict[str, Any]], int]:
        response = self.http.get(f"/reef/scenarios/{self.name}/records", params={"after_sequence": after})
        assert response.status_code == 200, response.text
        records = response.json()["records"]  # the cursor is null at the end: resume from the last row seen
        return records, records[-1]["sequence"] if records else after

    def new_records(self) -> list[dict[str, Any]]:
        records, self.seen = self._page(self.seen)
        return records

    def send(self, route: str, case: Case) -> int:
        """Post `case`, check the answer and what was stored for it; returns the status."""
        headers = {"x-reef-scenario": self.name, "content-type": "application/json"}
        response = self.http.post(route, content=case.content, headers=headers)
        stored = self.new_records()
        assert response.status_code in (200, 400), (response.status_code, response.text[:500], case)
        if response.status_code == 400:
            field = _blamed_field(response)
            assert _refusal_blames_the_right_field(case, field), (field, response.text[:500], case)
            assert stored == [], f"a refused body was recorded: {case}"
        elif route == COUNT_ROUTE:
            assert isinstance(response.json()["input_tokens"], int) and stored == []
        else:
            assert len(stored) == 1, (stored, case)
            receipt = response.headers.get("x-reef-agent-record-id")
            assert receipt is None or receipt == stored[0]["agent_record_id"]
        return response.status_code


# --- servers -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=UPSTREAM_APIS)
def proxy(request: pytest.FixtureRequest, upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory):
    """`reef serve` in front of the fake provider speaking each upstream dialect in turn."""
    api = request.param
    flags = ["--inference.upstream-url", upstream.url, "--inference.upstream-api", api]
    with (
        ReefProcess(tmp_path_factory.mktemp(f"fuzz-{api}"), *flags, "--inference.upstream-model", "fake-model") as proc,
        httpx.Client(base_url=proc.url, timeout=30) as http,
    ):
        yield api, http


def _scenario(http: httpx.Client, label: str, route: str) -> Scenario:
    return Scenario(http, f"fuzz-{label}-{route.strip('/').replace('/', '.')}")


@pytest.mark.parametrize("route", ROUTES)
def test_a_mutated_body_is_answered_or_refused_naming_the_field(proxy, route: str) -> None:
    api, http = proxy
    scenario = _scenario(http, f"{api}-mutated", route)

    @FUZZ
    @given(case=mutated_bodies(route))
    def check(case: Case) -> None:
        scenario.send(route, case)

    check()


@pytest.mark.parametrize("route", ROUTES)
def test_a_random_or_unreadable_body_is_answered_or_refused_naming_the_field(proxy, route: str) -> None:
    api, http = proxy
    scenario = _scenario(http, f"{api}-random", route)

    @settings(FUZZ, max_examples=40)
    @given(case=random_bodies(route))
    def check(case: Case) -> None:
        scenario.send(route, case)

    check()


MALFORMED = {
    CHAT_ROUTE: ({"messages": 5}, "messages"),
    RESPONSES_ROUTE: ({"input": 5}, "input"),
    MESSAGES_ROUTE: ({"messages": 5}, "messages"),
    COUNT_ROUTE: ({"messages": 5}, "messages"),
}


@pytest.mark.parametrize("route", ROUTES)
def test_a_conversation_that_is_a_number_is_a_400_naming_it_and_stores_nothing(proxy, route: str) -> None:
    api, http = proxy
    scenario = _scenario(http, f"{api}-regression", route)
    body, field = MALFORMED[route]
    for extra in ({}, {"stream": True}, {"max_tokens": 8, "model": "fake-model"}):
        response = http.post(route, json={**body, **extra}, headers={"x-reef-scenario": scenario.name})
        assert response.status_code == 400, response.text
        assert _blamed_field(response) == field
    assert scenario.new_records() == []


def test_a_well_formed_body_in_every_dialect_is_answered_and_recorded(proxy) -> None:
    api, http = proxy
    for route, bodies in BODIES.items():
        scenario = _scenario(http, f"{api}-wellformed", route)
        for body in bodies:
            assert scenario.send(route, Case(orjson.dumps(body))) == 200, (route, body)


# --- the embedded local engine -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """`reef serve` on the real SmolLM2, answering two tokens at most unless asked for fewer."""
    from reef.inference.local import resolve_model_path

    cache_dir = Path(os.environ.get("REEF_TEST_MODEL_CACHE", "~/.cache/reef/models")).expanduser()
    model_dir = resolve_model_path("smollm2", cache_dir)  # converted once, found by the server in the same cache
    flags = ["--inference.model-path", "smollm2", "--inference.model-cache-dir", str(model_dir.parent)]
    flags += ["--inference.default-max-new-tokens", "2"]
    with (
        ReefProcess(tmp_path_factory.mktemp("fuzz-local"), *flags) as proc,
        httpx.Client(base_url=proc.url, timeout=60) as http,
    ):
        yield http


@pytest.mark.model
@pytest.mark.parametrize("route", ROUTES)
def test_the_local_engine_refuses_a_malformed_body_naming_the_field(local: httpx.Client, route: str) -> None:
    scenario = _scenario(local, "local-regression", route)
    body, field = MALFORMED[route]
    cases = [
        ({**body, "stream": True}, field),
        ({**BODIES[route][0], "temperature": "hot"}, "temperature"),
        ({**BODIES[route][0], "tools": {"name": "x"}}, "tools"),
    ]
    for sent, blamed in [(body, field), *cases]:
        response = local.post(route, json=sent, headers={"x-reef-scenario": scenario.name})
        assert response.status_code == 400, response.text
        assert _blamed_field(response) == blamed
    assert scenario.new_records() == []


@pytest.mark.model
@pytest.mark.parametrize("route", ROUTES)
def test_the_local_engine_answers_or_refuses_a_mutated_body(local: httpx.Client, route: str) -> None:
    scenario = _scenario(local, "local-mutated", route)

    @settings(FUZZ, max_examples=12)
    @given(case=mutated_bodies(route))
    def check(case: Case) -> None:
        scenario.send(route, case)

    check()
