"""Claude Code's PreCompact and SessionStart hooks, run the way Claude Code runs them, offline.

Claude Code writes the hook's input as JSON on stdin of the command in settings.json
(docs/adapters/claude-code.md). Here the shipped sample transcript plays the session.
Run: ``python examples/claude_code_hooks.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

transcript = Path(__file__).parent / "transcripts" / "coupon-api.claude-code.jsonl"
workspace = tempfile.mkdtemp(prefix="memdir-claude-code-")
hook = [sys.executable, "-m", "memdir", "-w", workspace, "hook", "claude-code"]
session = {"session_id": "5b1e0c2a-9f4d-4c7e-8a36-2f0d7c1b9e44", "cwd": str(Path.cwd())}

pre_compact = {
    **session,
    "transcript_path": str(transcript),
    "permission_mode": "default",
    "hook_event_name": "PreCompact",
    "trigger": "auto",
    "custom_instructions": "",
}
for attempt in ("first", "second"):
    done = subprocess.run(hook, input=json.dumps(pre_compact), capture_output=True, text=True)
    print(f"PreCompact ({attempt} time): exit {done.returncode}; {done.stderr.strip()}")

start = {
    **session,
    "transcript_path": str(transcript),
    "hook_event_name": "SessionStart",
    "source": "compact",
    "model": "claude-sonnet-4-5",
}
done = subprocess.run(hook, input=json.dumps(start), capture_output=True, text=True)
context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
print("\nSessionStart (source compact) adds this to Claude's context:\n")
print(context)
