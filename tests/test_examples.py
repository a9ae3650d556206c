"""The examples run as a user runs them: ``python examples/<name>.py`` in a subprocess, offline,
and do what their docs promise."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# Runs an example with the named packages made unimportable, as when they are not installed.
_WITHOUT = (
    "import runpy, sys\n"
    "for name in sys.argv[3:]:\n"
    "    sys.modules[name] = None\n"
    "sys.argv = sys.argv[1:3]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)
# The window after the run, as each compacting example prints it, and its compaction trigger.
WINDOWS = {
    "openai_agents_memory": (r"(\d+) items in the window", 30),
    "pydantic_ai_memory": (r"(\d+) messages in the history", 30),
    "langchain_middleware": (r"messages in the state: (\d+)", 20),
}


def run_example(name: str, tmp_path: Path, *, without: tuple[str, ...] = ()) -> tuple[str, str]:
    """``(stdout, stderr)`` of a successful run of ``examples/<name>`` (workspace in tmp_path)."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONIOENCODING": "utf-8"}
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT, str(EXAMPLES / name), str(tmp_path / "ws"), *without],
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=tmp_path,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout, done.stderr


@pytest.mark.parametrize("name", sorted(p.stem for p in EXAMPLES.glob("*.py")))
def test_the_example_runs(name: str, tmp_path: Path) -> None:
    out, _ = run_example(f"{name}.py", tmp_path)
    if name in WINDOWS:
        pattern, trigger = WINDOWS[name]
        found = re.search(pattern, out)
        assert found is not None, out
        assert int(found.group(1)) < trigger  # compacted, as the example's docs say


@pytest.mark.parametrize("installed", [True, False], ids=["with-langmem", "without-langmem"])
def test_langgraph_store_example_says_when_it_skips_langmem(
    tmp_path: Path, installed: bool
) -> None:
    without = () if installed else ("langmem",)
    out, err = run_example("langgraph_store.py", tmp_path, without=without)
    assert "graph: Alice prefers dark mode" in out  # the store part runs either way
    if installed:
        assert "langmem search:" in out and "Carol" in out
        assert "skipped" not in err
    else:
        assert "langmem" not in out
        assert "LangMem part skipped: langmem is not installed" in err
        assert "pip install 'memdir[langmem]'" in err
