"""Running untrusted things (agent episodes, task checks, discovery attempts) in a fresh root that hides the host.

The API, for every caller that runs code Reef did not write:
- `choose_sandbox(allow_unsandboxed, what) -> bool`: ask first. True: run under bubblewrap; False: the operator set
  `sandbox.allow_unsandboxed` and no isolating sandbox can start here, so run unsandboxed; `SandboxRefused` (naming
  the setting) otherwise — fail the step closed with that message. `isolation()` says whether bubblewrap starts
  here (probed once per process); `describe_sandbox` is the line `reef serve` logs at start.
- `bwrap_prefix(root, workdir, visible)`: the `bwrap … --` argv to put before a command: system directories, the
  Python environment and each `visible` path (e.g. an agent's install directory: `needed_by(binary_dir)`)
  read-only, `root` read-write, a private /tmp, no network, its own PID namespace. The state directory, the record
  database, the release repository and the real home directory are never bound.
- `run_sandboxed(command, files, limits, sandbox=…)`: write `files` into a fresh root and run `command` there to
  completion with CPU, memory and wall limits (`Limits`), an emptied environment; returns a `SandboxResult`.
- `reef.sandbox.netbridge`: brings one TCP endpoint (the model's) into a sandbox that has no network.

Put an agent's HOME and config directories inside the root (HOME=<root>/home, XDG_CONFIG_HOME under it), never the
real ones.
"""

from reef.sandbox.bubblewrap import bwrap_available, bwrap_prefix, needed_by, python_environment
from reef.sandbox.policy import Isolation, SandboxRefused, choose_sandbox, describe_sandbox, isolation
from reef.sandbox.run import Limits, SandboxResult, run_sandboxed

__all__ = [
    "Isolation",
    "Limits",
    "SandboxRefused",
    "SandboxResult",
    "bwrap_available",
    "bwrap_prefix",
    "choose_sandbox",
    "describe_sandbox",
    "isolation",
    "needed_by",
    "python_environment",
    "run_sandboxed",
]
