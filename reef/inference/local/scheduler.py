"""The decoding thread: continuous batching of concurrent requests on one model.

Requests wait in a bounded queue; between decode steps the scheduler admits as many as the batch has room for
(prefilling their prompts together), then runs one decode step per adapter group (rows served by the same
adapter share a forward). Each row stops on its own conditions and leaves the batch at once. Results go back
to the asyncio side through `Sequence.emit`, which must be thread-safe and must not block.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import Any

import torch

from reef.core.errors import Unavailable
from reef.inference.local.adapters import AdapterSet, Binding
from reef.inference.local.decode_batch import Batch, DecodeBatch, SlotBatch, SlotForward
from reef.inference.local.detokenize import TextTracker
from reef.inference.local.sampling import Choice, SamplingParams, pick_tokens
from reef.inference.local.structured import Constraint

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class Delta:
    """One decoded token of a sequence and the text it settled (possibly empty)."""

    text: str
    choice: Choice


@dataclasses.dataclass(frozen=True, slots=True)
class Finished:
    """The sequence ended: `reason` is `stop` (end of sequence / stop string) or `length`."""

    reason: str


@dataclasses.dataclass(frozen=True, slots=True)
class Failed:
    message: str


Event = Delta | Finished | Failed


@dataclasses.dataclass(eq=False, slots=True)
class Sequence:
    """One request's decoding state; owned by the scheduler thread once submitted (except `cancelled`)."""

    prompt_ids: list[int]
    params: SamplingParams
    binding: Binding
    emit: Callable[[Event], None]
    tracker: TextTracker
    generator: torch.Generator | None = None
    completion_ids: list[int] = dataclasses.field(default_factory=list)
    logprobs: list[float] = dataclasses.field(default_factory=list)
    cancelled: bool = False  # set by the asyncio side when the client goes away
    constraint: Constraint | None = None  # the `response_format` grammar's state, when the request has one
    precision: str = ""  # the dtype of the matmuls that computed its tokens' distributions (set when admitted)


class Scheduler:
    """Owns the model while running; every model access (forwards, adapter loads) happens on its thread."""

    def __init__(
        self,
        adapters: AdapterSet,
        pad_id: int,
        eos_ids: set[int],
        max_batch_size: int,
        max_queue: int,
        compact: SlotForward | None = None,
    ) -> None:
        self._adapters = adapters
        self._compact = compact  # the compact (or llama.cpp) forward, for the model and adapters it reproduces
        self._pad_id = pad_id
        self._eos_ids = tuple(sorted(eos_ids))
        self._max_batch_size = max_batch_size
        self._max_queue = max_queue
        self._wake = threading.Condition()
        self._waiting: collections.deque[Sequence] = collections.deque()
        self._calls: collections.deque[tuple[Callable[[], Any], concurrent.futures.Future[Any]]] = collections.deque()
        self._groups: dict[str | None, Batch] = {}
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="reef-local-engine", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop after the current step; sequences still running or waiting are failed."""
        with self._wake:
            self._stopping = True
            self._wake.notify()
        self._thread.join()

    @property
    def running(self) -> int:
        return sum(len(group) for group in self._groups.values())

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def submit(self, sequence: Sequence) -> None:
        """Queue a sequence; raise Unavailable when the queue is full."""
        with self._wake:
            if len(self._waiting) >= self._max_queue:
                # Roughly how long until a batch's worth of the queue has drained, for Retry-After.
                raise Unavailable("the local engine's queue is full", retry_after_s=max(1.0, self._max_queue / 64))
            self._waiting.append(sequence)
            self._wake.notify()

    def call(self, fn: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        """Run `fn` on the scheduler thread between steps (e.g. load an adapter); returns its future."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._wake:
            self._calls.append((fn, future))
            self._wake.notify()
        return future

    def in_use(self) -> set[str]:
        """Adapters that running or waiting sequences are bound to (never evicted)."""
        names = {name for name, group in self._groups.items() if name is not None and len(group)}
        with self._wake:
            names.update(s.binding.adapter_name for s in self._waiting if s.binding.adapter_name)
        return names

    def _run(self) -> None:
        with torch.inference_mode():
            while True:
                with self._wake:
                    while not (self._stopping or self._calls or self._waiting or self.running):
                        self._wake.wait()
                    if self._stopping:
                        break
                    calls = list(self._calls)
                    self._calls.clear()
                for fn, future in calls:
                    self._run_call(fn, future)
                self._admit()
                for name in [n for n, group in self._groups.items() if len(group)]:
                    self._step(name, self._groups[name])
        self._fail_all("the local engine stopped")

    @staticmethod
    def _run_call(fn: Callable[[], Any], future: concurrent.futures.Future[Any]) -> None:
        # A caller that gave up (its task cancelled, e.g. a learner stopped mid-activation) cancelled the future:
        # setting its result would raise and kill the engine thread.
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn())
        except BaseException as exc:  # handed to the caller, who raises it
            future.set_exception(exc)

    def _admit(self) -> None:
        room = self._max_batch_size - self.running
        admitted: list[Sequence] = []
        with self._wake:
            while room > 0 and self._waiting:
                sequence = self._waiting.popleft()
                if sequence.cancelled:
                    sequence.emit(Failed("cancelled"))
                else:
                    admitted.append(sequence)
                    room -= 1
        by_adapter: dict[str | None, list[Sequence]] = {}
        admitted_names = {s.binding.adapter_name for s in admitted if s.binding.adapter_name}
        for sequence in admitted:
            binding = sequence.binding
            if binding.adapter_name is not None and binding.adapter_path is not None:
                try:
                    self._adapters.ensure(binding.adapter_name, binding.adapter_path, self.in_use() | admitted_names)
                except Exception as exc:
                    log.exception("could not load adapter %s", binding.adapter_path)
                    sequence.emit(Failed(f"could not load the adapter at {binding.adapter_path}: {exc}"))
                    continue
            by_adapter.setdefault(binding.adapter_name, []).append(sequence)
        for name, sequences in by_adapter.items():
            group = self._groups.get(name) or self._new_batch(name)
            try:
                logits = group.add(sequences)
            except Exception as exc:
                log.exception("prefill failed")
                for sequence in sequences:
                    sequence.emit(Failed(f"the local engine failed: {exc}"))
                continue
            self._groups[name] = group
            running = len(group) - len(sequences)
            keep = self._advance(sequences, logits)
            self._keep(name, group, list(range(running)) + [running + i for i in keep])

    def _keep(self, name: str | None, group: Batch, keep: list[int]) -> None:
        group.keep(keep)
        if not keep:
            del self._groups[name]  # with its cache: an idle adapter holds no memory

    def _new_batch(self, name: str | None) -> Batch:
        if self._compact is not None and self._adapters.compact(name):
            return SlotBatch(self._compact, self._adapters, name, self._pad_id)
        return DecodeBatch(self._adapters, name, self._pad_id)

    def _step(self, name: str | None, group: Batch) -> None:
        try:
            logits = group.decode()
        except Exception as exc:
            log.exception("decode step failed")
            for sequence in group.rows:
                sequence.emit(Failed(f"the local engine failed: {exc}"))
            self._keep(name, group, [])
            return
        self._keep(name, group, self._advance(group.rows, logits))

    def _advance(self, sequences: list[Sequence], logits: torch.Tensor) -> list[int]:
        """Pick each row's next token, emit it; return the indices of rows that go on decoding."""
        # A grammar alone decides when a constrained answer may end (`min_tokens` does not apply to it).
        banned = [
            (self._eos_ids + s.params.stop_token_ids)
            if s.constraint is None and len(s.completion_ids) < s.params.min_tokens
            else ()
            for s in sequences
        ]
        vocab_size = logits.shape[-1]
        allowed = [None if s.constraint is None else s.constraint.allowed(vocab_size, self._eos_ids) for s in sequences]
        params, generators = [s.params for s in sequences], [s.generator for s in sequences]
        choices = pick_tokens(logits, params, generators, banned, allowed)
        keep = []
        for index, (sequence, choice) in enumerate(zip(sequences, choices, strict=True)):
            if sequence.cancelled:
                sequence.emit(Failed("cancelled"))  # wakes anyone still waiting on this sequence
                continue
            reason = self._take(sequence, choice)
            if reason is None:
                keep.append(index)
            else:
                sequence.emit(Finished(reason))
        return keep

    def _take(self, sequence: Sequence, choice: Choice) -> str | None:
        """Record one token; emit its text; return the finish reason if the sequence is done."""
        params = sequence.params
        token = choice.token_id
        sequence.completion_ids.append(token)
        sequence.logprobs.append(choice.logprob)
        text = sequence.tracker.push(token)
        reason: str | None = None
        ended = (token in self._eos_ids and not params.ignore_eos) or token in params.stop_token_ids
        if sequence.constraint is not None:
            sequence.constraint.take(token)
            ended = ended or sequence.constraint.complete
        if ended or sequence.tracker.stopped:
            reason = "stop"
        elif len(sequence.completion_ids) >= params.max_new_tokens:
            reason = "length"
        if reason is not None:
            text += sequence.tracker.flush()
        sequence.emit(Delta(text, choice))
        return reason

    def _fail_all(self, message: str) -> None:
        for group in self._groups.values():
            for sequence in group.rows:
                sequence.emit(Failed(message))
        self._groups.clear()
        with self._wake:
            waiting, self._waiting = list(self._waiting), collections.deque()
            calls, self._calls = list(self._calls), collections.deque()
        for sequence in waiting:
            sequence.emit(Failed(message))
        for _, future in calls:
            future.set_exception(RuntimeError(message))
