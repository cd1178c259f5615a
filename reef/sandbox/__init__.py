"""Running untrusted things (agent episodes, discovery attempts) in a fresh root.

Where `bwrap` (bubblewrap) exists the process sees the host read-only, a private /tmp, its own writable root, its
own PID and IPC namespaces and no network (`reef.sandbox.netbridge` brings one endpoint back in when an agent needs
its model). Without bubblewrap, `run_sandboxed` still gives a fresh root as working directory, an emptied
environment, CPU-time and memory rlimits and a wall timeout, but the host's files and network stay reachable:
`SandboxResult.sandboxed` says which one ran.
"""

from reef.sandbox.bubblewrap import bwrap_available, bwrap_prefix
from reef.sandbox.run import Limits, SandboxResult, run_sandboxed

__all__ = ["Limits", "SandboxResult", "bwrap_available", "bwrap_prefix", "run_sandboxed"]
