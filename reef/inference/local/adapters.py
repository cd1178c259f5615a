"""LoRA adapters resident on the one base model, and which release each scenario is served with.

`AdapterSet` is touched only by the scheduler thread (loading an adapter rewrites modules a forward may be
using); `Bindings` is touched only by the asyncio side. A request is bound to one release when it is admitted.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reef.core.errors import NotFound
from reef.inference.local.llama import LoraWeights, lora_of

log = logging.getLogger(__name__)

ADAPTER_CONFIG = "adapter_config.json"


@dataclasses.dataclass(frozen=True, slots=True)
class Binding:
    """What serves a request: a release id (None = base) and its adapter (None = base weights)."""

    release_id: str | None = None
    adapter_name: str | None = None
    adapter_path: Path | None = None


def binding_for(release_id: str | None, path: Path | None) -> Binding:
    """A binding for the files at `path`: a LoRA adapter if they hold one, else base weights (e.g. a harness)."""
    if path is None or not (Path(path) / ADAPTER_CONFIG).exists():
        return Binding(release_id)
    path = Path(path).resolve()
    # Named by location and content time, so a directory rewritten in place is loaded again.
    stamp = max((f.stat().st_mtime_ns for f in path.iterdir() if f.is_file()), default=0)
    name = "lora_" + hashlib.sha256(f"{path}:{stamp}".encode()).hexdigest()[:16]
    return Binding(release_id, name, path)


class Bindings:
    """Scenario → serving release, plus every release seen so far (so a request may pin one)."""

    def __init__(self) -> None:
        self._current: dict[str, Binding] = {}
        self._known: dict[str, Binding] = {}

    def set(self, scenario: str, binding: Binding) -> None:
        self._current[scenario] = binding
        if binding.release_id is not None:
            self._known[binding.release_id] = binding

    def current(self, scenario: str) -> Binding:
        return self._current.get(scenario, Binding())

    def for_request(self, scenario: str, release_id: str | None, candidate_path: Path | None) -> Binding:
        """The binding a new request is served with: a candidate dir, a pinned release, or the scenario's own."""
        if candidate_path is not None:
            return binding_for(release_id, candidate_path)
        if release_id is None:
            return self.current(scenario)
        current = self.current(scenario)
        if current.release_id == release_id:
            return current
        if release_id in self._known:
            return self._known[release_id]
        raise NotFound(f"release {release_id!r} is not loaded in this engine")


class AdapterSet:
    """Adapters loaded into the base model with peft, at most `max_resident` kept, least recently used evicted."""

    def __init__(self, model: Any, max_resident: int) -> None:
        self.model = model  # the base model; peft injects LoRA layers into it in place
        self._max_resident = max_resident
        self._peft: Any = None
        self._resident: collections.OrderedDict[str, Path] = collections.OrderedDict()
        self._lora: dict[str, LoraWeights | None] = {}  # the compact forward's view of each adapter (None: it can't)

    @property
    def resident(self) -> list[str]:
        return list(self._resident)

    def ensure(self, name: str, path: Path, in_use: set[str]) -> None:
        """Load adapter `name` from `path` unless resident; evict unused adapters beyond the bound."""
        if name in self._resident:
            self._resident.move_to_end(name)
            return
        from peft import PeftModel

        if self._peft is None:
            self._peft = PeftModel.from_pretrained(self.model, str(path), adapter_name=name, is_trainable=False)
        else:
            self._peft.load_adapter(str(path), adapter_name=name, is_trainable=False)
        self._peft.eval()
        self._resident[name] = path
        log.info("loaded adapter %s from %s", name, path)
        for victim in list(self._resident):
            if len(self._resident) <= self._max_resident:
                break
            if victim != name and victim not in in_use:
                self._peft.delete_adapter(victim)
                del self._resident[victim]
                self._lora.pop(victim, None)
                log.info("evicted adapter %s", victim)

    def compact(self, name: str | None) -> bool:
        """Whether the compact Llama forward can serve adapter `name` (None, the base weights, always)."""
        return name is None or self.lora(name) is not None

    def lora(self, name: str | None) -> LoraWeights | None:
        """Resident adapter `name`'s LoRA factors for the compact forward (None for the base or when it can't)."""
        if name is None:
            return None
        if name not in self._lora:
            self._lora[name] = lora_of(self._peft, name, int(self.model.config.num_hidden_layers))
        return self._lora[name]

    @contextlib.contextmanager
    def selected(self, name: str | None) -> Iterator[None]:
        """Within the block, forwards of `self.model` use adapter `name` (None = the base weights)."""
        if self._peft is None:
            yield
        elif name is None:
            with self._peft.disable_adapter():
                yield
        else:
            self._peft.set_adapter(name)
            self._resident.move_to_end(name)
            yield
