"""The resolved configuration of a Reef deployment (values only; loading lives in `reef.application.config`).

Every key here is reachable as `--section.key-name` on the command line and as `section: {key_name: …}` in YAML.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(8900, ge=0, le=65535)
    token: SecretStr | None = None
    tokens: list[SecretStr] = Field(default_factory=list)
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
    max_body_bytes: int = Field(16 * 1024 * 1024, gt=0)
    implicit_scenarios: bool = True
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # Serving processes on one port (SO_REUSEPORT), sharing one record writer; one learner per scenario by election.
    workers: int = Field(1, gt=0)
    # This replica's name in GET /reef/status and in learner elections; None: `<hostname>:<pid>`.
    replica_id: str | None = Field(None, min_length=1, max_length=200)

    @field_validator("tokens", "admin_tokens", mode="before")
    @classmethod
    def _one_token_is_a_list(cls, value: Any) -> Any:
        # `--reef.admin-tokens s3cret` and env REEF_ADMIN_TOKEN give one string: a list of one token.
        return [value] if isinstance(value, str) else value

    def all_tokens(self) -> list[str]:
        found = [t.get_secret_value() for t in self.tokens]
        if self.token is not None:
            found.append(self.token.get_secret_value())
        return [t for t in found if t]

    def all_admin_tokens(self) -> list[str]:
        """The admin tokens (reef.admin_tokens), empty ones dropped."""
        return [t.get_secret_value() for t in self.admin_tokens if t.get_secret_value()]


class InferenceSettings(_Section):
    backend: Literal["auto", "upstream", "local", "vllm", "sglang"] = "auto"
    upstream_url: str | None = None
    upstream_model: str | None = None
    upstream_api: Literal["openai", "responses", "anthropic"] = "openai"
    upstream_api_key: SecretStr | None = None
    timeout_s: float = Field(600.0, gt=0)
    max_connections: int = Field(256, gt=0)
    model_path: str | None = None
    device: Literal["cpu", "cuda", "auto"] = "auto"
    # the local engine's weights and matmuls; `gguf`: a GGUF file's own quantized weights (llama.cpp forward only)
    dtype: Literal["auto", "float32", "bfloat16", "float16", "gguf"] = "auto"
    # what computes the local engine's logits on a CPU; `auto`: llama.cpp for a GGUF model (or 'smollm2') where
    # llama-cpp-python is installed (`make setup-llamacpp`), else torch
    forward: Literal["auto", "torch", "llama.cpp"] = "auto"
    model_cache_dir: Path = Path("~/.cache/reef/models")
    max_batch_size: int = Field(16, gt=0)
    max_queue: int = Field(256, gt=0)
    max_resident_adapters: int = Field(8, gt=0)
    threads: int = Field(0, ge=0)  # the local engine's torch (or llama.cpp) threads on a CPU; 0: chosen by it
    default_max_new_tokens: int = Field(256, gt=0)
    served_model_name: str | None = None

    def resolved_backend(self) -> str:
        """`auto` means: upstream when an upstream URL is set, else the local model."""
        if self.backend != "auto":
            return self.backend
        return "upstream" if self.upstream_url else "local"


class StorageSettings(_Section):
    dir: Path = Path(".reef")
    record_backend: Literal["sqlite", "postgres"] = "sqlite"
    record_database_url: str | None = None
    release_repository: str | None = None  # default: <dir>/releases.git
    retention_max_body_bytes: int | None = None
    # How often a replica reads the release store's heads and activates a release another replica published (the
    # guarantee; on PostgreSQL a NOTIFY after each publish wakes the replicas sooner).
    release_poll_s: float = Field(1.0, gt=0)

    def release_repository_location(self) -> str:
        return self.release_repository or str(self.dir / "releases.git")


class LearningSettings(_Section):
    recipe: str = "basic"
    # The training mode a new scenario starts in (each scenario's own is changed with POST /reef/scenarios/{s}/update):
    # `auto` steps whenever a batch is ready, `manual` only when asked (POST /reef/train), `hybrid` both.
    mode: Literal["auto", "manual", "hybrid"] = "auto"
    batch_size: int = Field(8, gt=0)
    review: bool = False
    poll_interval_s: float = Field(1.0, gt=0)
    # A scenario whose learner's replica died (or lost its lock) gets a new learner on another replica within this.
    election_timeout_s: float = Field(15.0, gt=0)
    recipe_config: dict[str, Any] = Field(default_factory=dict)
    max_upstream_tokens_per_hour: int = Field(
        0,
        ge=0,
        description=(
            "Per scenario, the most tokens the learner's own traffic (proposer, judge, gate generation and gate "
            "episodes' requests) may spend upstream over a sliding hour, counted from the upstream's `usage`; past "
            'it the learner pauses (status `blocked: "budget: …"`) until the window allows. 0: no limit.'
        ),
    )


class TrainingSettings(_Section):
    backend: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    # What a Ray training task asks for; custom resources place it (e.g. {trainer: 1} on nodes that declare them).
    ray_num_cpus: float = Field(1.0, gt=0)
    ray_num_gpus: float = Field(0.0, ge=0)
    ray_resources: dict[str, float] = Field(default_factory=dict)
    lora_rank: int = Field(16, gt=0)
    lora_alpha: int = Field(32, gt=0)
    lora_dropout: float = Field(0.0, ge=0, lt=1)
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )
    full_finetune: bool = False
    # Measured (benchmarks/learns_by_default.py): at 2e-4 three rounds of 32 demonstrations moved a held-out exact
    # match by +0.15 only; at 6e-4 by +0.83 in the first round.
    learning_rate: float = Field(6e-4, gt=0)
    epochs: int = Field(1, gt=0)
    micro_batch_size: int = Field(8, gt=0)
    max_seq_len: int = Field(512, gt=0)
    seed: int = 0
    threads: int = Field(0, ge=0)  # local backend's torch threads; 0: all cores but one (serving keeps a core)
    # The training step's matmul precision (fp32 master weights either way): `auto` is bfloat16 for a LoRA on CUDA and
    # on CPUs with AMX or AVX-512 BF16 (about 1.8x faster here, per-token log-probs within ~0.03 of fp32), else float32.
    compute_dtype: Literal["auto", "float32", "bfloat16"] = "auto"


class EvaluationSettings(_Section):
    tasks: Path | None = None
    # `mean`: for 0/1 checkers the same as wins > losses; for partial credit (the held-out split's `f1`) it
    # publishes what raises the average, where wins − losses rejected candidates whose mean was higher.
    policy: str = "mean"
    margin: float = 0.0
    max_new_tokens: int = Field(64, gt=0)
    temperature: float = Field(0.0, ge=0)
    # How a gate task is scored: `checker` (the model answers; the task's checker scores the text) or `likelihood`
    # (no generation: the geometric-mean probability of the task's known `answer` and end of turn, teacher-forced;
    # continuous, so a few tasks tell small differences apart; needs an engine that scores, i.e. the local one).
    scoring: Literal["checker", "likelihood"] = "checker"
    max_parallel_tasks: int = Field(8, gt=0)  # tasks in flight at once (each sends candidate and current together)
    # With no tasks of its own (API or file), a scenario's gate holds out about one in `holdout_every` reports that
    # carry a known answer (0: never) and waits until it has `holdout_min_tasks` of them.
    holdout_every: int = Field(4, ge=0)
    holdout_min_tasks: int = Field(4, gt=0)
    max_tasks_bytes: int = Field(8 * 1024 * 1024, gt=0)  # one POST /reef/scenarios/{s}/tasks body
    # Policy `floor` (the selection of user-directed harness steps): publish unless the candidate's mean is below it.
    floor_score: float = 0.0
    allow_api_code: bool = Field(
        False,
        description=(
            "Accept, through POST /reef/scenarios/{s}/tasks, task fields that run code on this machine: a "
            "`module:function` checker, `check.command` and `workspace.dir` (the operator's own evaluation.tasks "
            "file may always use them). Off, such a task is a 400 naming the field."
        ),
    )
    checker_modules: list[str] = Field(
        default_factory=list,
        description=(
            "The modules whose functions a task given through the API may name as its `module:function` checker "
            "(with evaluation.allow_api_code true); a checker in any other module is a 400. Default: none."
        ),
    )


class HarnessSettings(_Section):
    proposer_url: str | None = None  # default: the served model through Reef itself
    proposer_api: Literal["openai", "anthropic"] = "openai"
    proposer_model: str | None = None
    proposer_api_key: SecretStr | None = None
    episode_timeout_s: float = Field(120.0, gt=0)
    max_parallel_episodes: int = Field(2, gt=0)
    # The scenario's adapter: what GET /reef/harness renders by default and, for an adapter with an agent binary
    # (pi), what the gate runs in sandboxed episodes; `chat` judges through the system prompt.
    default_adapter: str = "chat"
    gate: Literal["agent", "chat"] = "agent"  # chat: judge every adapter's candidates through the system prompt
    episode_max_tokens: int | None = Field(None, gt=0)  # the agent's completion budget inside gate episodes
    # An episode that crashes or times out is an error: its pair is dropped; more than this fraction fails closed.
    max_error_fraction: float = Field(0.5, ge=0, le=1)


class SandboxSettings(_Section):
    allow_unsandboxed: bool = Field(
        False,
        description=(
            "Run untrusted code (agent episodes, task checks, discovery attempts) even where no isolating sandbox "
            "(bubblewrap that can start) exists: it then sees the host's files and network. Off, such a run "
            "refuses and the learner's step fails closed with the reason in its status."
        ),
    )


class ObservabilitySettings(_Section):
    # OpenTelemetry: spans per request and per learner step go to this OTLP/HTTP endpoint (e.g.
    # http://127.0.0.1:4318); None (the default) is off and costs nothing on the hot path.
    otlp_endpoint: str | None = None
    service_name: str = "reef"


class Settings(_Section):
    """Everything `reef serve` runs with."""

    reef: ServerSettings = ServerSettings()
    inference: InferenceSettings = InferenceSettings()
    storage: StorageSettings = StorageSettings()
    learning: LearningSettings = LearningSettings()
    training: TrainingSettings = TrainingSettings()
    evaluation: EvaluationSettings = EvaluationSettings()
    harness: HarnessSettings = HarnessSettings()
    sandbox: SandboxSettings = SandboxSettings()
    observability: ObservabilitySettings = ObservabilitySettings()
