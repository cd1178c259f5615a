"""The vLLM / SGLang launcher: command lines and adapter requests (the engines themselves cannot run here)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from reef.core.settings import InferenceSettings
from reef.inference.launch import (
    adapter_name,
    build_command,
    launch_environment,
    launched_engine,
    load_adapter_request,
    unload_adapter_request,
    with_model,
)

SETTINGS = InferenceSettings(backend="vllm", model_path="smollm2", served_model_name="smol", max_resident_adapters=4)


def flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_the_vllm_command_serves_the_model_dir_on_the_port_with_runtime_lora():
    command = build_command("vllm", SETTINGS, Path("/models/smol"), 9123)
    assert command[:3] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    assert flag(command, "--model") == "/models/smol" and flag(command, "--port") == "9123"
    assert flag(command, "--served-model-name") == "smol" and flag(command, "--max-loras") == "4"
    assert "--enable-lora" in command and flag(command, "--host") == "127.0.0.1"
    assert launch_environment("vllm")["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"


def test_the_sglang_command_names_its_own_flags_and_passes_the_dtype():
    settings = SETTINGS.model_copy(update={"backend": "sglang", "dtype": "bfloat16"})
    command = build_command("sglang", settings, Path("/models/smol"), 9124)
    assert command[:3] == [sys.executable, "-m", "sglang.launch_server"]
    assert flag(command, "--model-path") == "/models/smol" and flag(command, "--max-loras-per-batch") == "4"
    assert "--enable-lora" in command and flag(command, "--dtype") == "bfloat16"


def test_adapters_load_and_unload_through_each_engines_runtime_endpoint(tmp_path):
    name = adapter_name(tmp_path)
    assert name == adapter_name(tmp_path) and name.startswith("reef-")
    assert load_adapter_request("vllm", name, tmp_path) == (
        "/v1/load_lora_adapter",
        {"lora_name": name, "lora_path": str(tmp_path)},
    )
    assert load_adapter_request("sglang", name, tmp_path)[0] == "/load_lora_adapter"
    assert unload_adapter_request("vllm", name) == ("/v1/unload_lora_adapter", {"lora_name": name})
    assert unload_adapter_request("sglang", name) == ("/unload_lora_adapter", {"lora_name": name})


def test_a_request_is_addressed_to_the_adapter_by_its_model_field():
    body = {"model": "smol", "messages": [{"role": "user", "content": "hi"}]}
    assert with_model(body, "reef-abc") == {**body, "model": "reef-abc"} and body["model"] == "smol"


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed here")
def test_a_backend_that_is_not_installed_is_refused_at_startup():
    with pytest.raises(ValueError, match="not installed"):
        launched_engine(SETTINGS)
