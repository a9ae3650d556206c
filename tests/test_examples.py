"""The shipped examples run offline from a fresh workspace and do what their docs promise."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SRC = Path(__file__).resolve().parents[1] / "src"
# The window after the run, as each compacting example prints it, and its compaction trigger.
WINDOWS = {
    "openai_agents_memory": (r"(\d+) items in the window", 30),
    "pydantic_ai_memory": (r"(\d+) messages in the history", 30),
    "langchain_middleware": (r"messages in the state: (\d+)", 20),
}


def _run(name: str, tmp_path: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), str(tmp_path / "ws")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


@pytest.mark.parametrize("name", sorted(p.stem for p in EXAMPLES.glob("*.py")))
def test_the_example_runs(name: str, tmp_path: Path) -> None:
    out = _run(name, tmp_path)
    if name in WINDOWS:
        pattern, trigger = WINDOWS[name]
        found = re.search(pattern, out)
        assert found is not None, out
        assert int(found.group(1)) < trigger  # compacted, as the example's docs say
