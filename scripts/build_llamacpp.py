"""Build and install llama-cpp-python for this CPU, with one fix to llama.cpp's AMX kernels (`make setup-llamacpp`).

    python scripts/build_llamacpp.py VERSION

llama-cpp-python has no binary wheel on PyPI: pip compiles `libllama` from the source distribution. This script
does what `pip install llama-cpp-python==VERSION` does, with three differences:

- **The AMX tile configuration is kept.** GCC's `_tile_loadconfig` tells the compiler it reads 8 bytes of the
  64-byte tile configuration, so GCC drops the stores of the tile shapes and the first batch multiplied by llama.cpp's
  AMX kernels faults (SIGSEGV in `ggml_backend_amx_mul_mat`). One line (a compiler barrier before the load) keeps
  them. The engine uses those kernels only where a probe says they work
  (`reef.inference.local.llamacpp_amx.amx_usable`).
- **ggml's own thread pool instead of OpenMP** (`GGML_OPENMP=OFF`). With OpenMP, llama.cpp's barriers are libgomp's,
  and torch loads the same libgomp: once torch's threads and llama.cpp's outnumber the cores, libgomp stops spinning
  at barriers and a decode step's ~900 barriers each sleep and wake (README: the llama.cpp forward).
- **No `llama-common`.** llama-cpp-python turns on llama.cpp's common library (argument parsing, chat templates,
  JSON schemas for its command-line tools), which the Python package never loads; it is as much to compile as
  `libllama` itself, so it is left out.

The wheel is built once per version, patch, build flags and CPU (`GGML_NATIVE`: it runs only on CPUs like this one)
and kept under ~/.cache/reef/wheels, so a second checkout on the same machine installs it in seconds.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

CMAKE_ARGS = "-DLLAVA_BUILD=OFF -DGGML_NATIVE=ON -DGGML_OPENMP=OFF"
AMX_FILE = "vendor/llama.cpp/ggml/src/ggml-cpu/amx/mmq.cpp"
AMX_ANCHOR = "    _tile_loadconfig(&tc);\n"
AMX_FIX = (
    "    // Reef: GCC's _tile_loadconfig declares an 8-byte read, so without this the tile shapes are never stored\n"
    '    __asm__ __volatile__("" : : "r"(&tc) : "memory");\n'
)
# (file, text, replacement): each text must occur exactly once in the source distribution.
EDITS = [
    (AMX_FILE, AMX_ANCHOR, AMX_FIX + AMX_ANCHOR),
    (
        "CMakeLists.txt",
        'set(LLAMA_BUILD_COMMON ON CACHE BOOL "Build llama.cpp common library" FORCE)',
        'set(LLAMA_BUILD_COMMON OFF CACHE BOOL "Build llama.cpp common library" FORCE)',
    ),
]


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    version = sys.argv[1]
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    edits = [part for edit in EDITS for part in edit]
    key = hashlib.sha256("\n".join([version, *edits, CMAKE_ARGS, _cpu_flags()]).encode()).hexdigest()[:12]
    wheels = Path("~/.cache/reef/wheels").expanduser() / f"llama-cpp-python-{version}-{key}"
    if not any(wheels.glob("*.whl")):
        with tempfile.TemporaryDirectory(prefix="reef-llamacpp-") as tmp:
            subprocess.run(
                [*pip, "download", "--no-deps", "--no-binary", ":all:", f"llama-cpp-python=={version}", "-d", tmp],
                check=True,
            )
            archive = next(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
            with tarfile.open(archive) as tar:
                tar.extractall(tmp, filter="data")
            source = next(path for path in Path(tmp).iterdir() if path.is_dir())
            for file, text, replacement in EDITS:
                _edit(source / file, text, replacement)
            print(f"building llama-cpp-python {version} for this CPU (about 3 minutes on 2 cores)", flush=True)
            staging = Path(tmp) / "wheel"
            subprocess.run(
                [*pip, "wheel", "--no-deps", "-w", str(staging), str(source)],
                check=True,
                env={**os.environ, "CMAKE_ARGS": CMAKE_ARGS},
            )
            wheels.mkdir(parents=True, exist_ok=True)
            for wheel in staging.glob("*.whl"):  # whole files only: an interrupted copy leaves no wheel there
                partial = wheels / (wheel.name + ".part")
                shutil.copyfile(wheel, partial)
                os.replace(partial, wheels / wheel.name)
    subprocess.run([*pip, "install", "--force-reinstall", "--no-deps", *map(str, wheels.glob("*.whl"))], check=True)
    subprocess.run([*pip, "install", f"llama-cpp-python=={version}"], check=True)  # its dependencies


def _edit(path: Path, text: str, replacement: str) -> None:
    source = path.read_text()
    if source.count(text) != 1:
        raise SystemExit(f"{path}: {text.strip()!r} is not where this build expects it (once)")
    path.write_text(source.replace(text, replacement))


def _cpu_flags() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return ""
    return next((line for line in lines if line.startswith("flags")), "")


if __name__ == "__main__":
    main()
