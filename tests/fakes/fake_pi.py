"""A stand-in for the `pi` binary (copied into a temp dir with a shebang by tests): it reads the AGENTS.md and
models.json an episode prepared and prints pi-like `--mode json` events. Tasks steer it:
`sleep` hangs (for timeouts), `spawn` leaves a background child running, `write-home` writes outside its root,
`connect:PORT,…` reports which 127.0.0.1 ports answer, `read:PATH,…` reports which files it could read,
`copy-agents:NAME` writes its AGENTS.md into NAME in its working directory, `fail` exits with status 3,
`refused:MESSAGE` prints MESSAGE as pi prints a model's 400 and exits with status 1.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

agent = Path(os.environ["PI_CODING_AGENT_DIR"])
task = sys.argv[sys.argv.index("-p") + 1]
models = json.loads((agent / "models.json").read_text())
agents_md = (agent / "AGENTS.md").read_text() if (agent / "AGENTS.md").exists() else ""
if task == "sleep":
    time.sleep(60)
if task == "spawn":
    subprocess.Popen(["sleep", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if task == "fail":
    sys.exit(3)
if task.startswith("refused:"):
    error = {"role": "assistant", "content": [], "stopReason": "error", "errorMessage": "400 " + task[8:]}
    print(json.dumps({"type": "message_end", "message": error}))
    sys.exit(1)
if task.startswith("copy-agents:"):
    Path(task[len("copy-agents:") :]).write_text(agents_md)
if task.startswith("write:"):
    Path(task[len("write:") :]).write_text("residue")
if task.startswith("read:"):  # read:PATH,PATH… → print which files it could read
    seen = []
    for name in task[len("read:") :].split(","):
        try:
            Path(name).read_bytes()
            seen.append(f"{name}=read")
        except OSError:
            seen.append(f"{name}=hidden")
    task = "seen " + " ".join(seen)
if task.startswith("connect:"):  # connect:PORT,PORT… → print which 127.0.0.1 ports answered
    import socket

    reached = []
    for port in task[len("connect:") :].split(","):
        try:
            with socket.create_connection(("127.0.0.1", int(port)), timeout=3) as conn:
                conn.sendall(b"GET /v1/models HTTP/1.1\r\nhost: reef\r\n\r\n")  # the bridge relays HTTP only
                reached.append(f"{port}={conn.recv(16).decode()}")
        except OSError:
            reached.append(f"{port}=refused")
    task = "reached " + " ".join(reached)
print(json.dumps({"type": "session", "cwd": os.getcwd()}))
reply = {"role": "assistant", "content": [{"type": "text", "text": f"saw: {agents_md.strip()[:200]}"}]}
print(json.dumps({"type": "message_end", "message": {"role": "user", "content": [{"type": "text", "text": task}]}}))
print(json.dumps({"type": "message_end", "message": reply, "provider": list(models["providers"])[0]}))
