"""Docs generated from code stay in step with it."""

import code
import contextlib
import io
import re

from conftest import ROOT

from profkit import schema


def test_schema_doc_is_current():
    assert (ROOT / "docs" / "schema.md").read_text() == schema.markdown_reference(), "run: python scripts/schema_doc.py"


def _no_gpu_snippet() -> str:
    """The README's first runnable example (the CPU capture), wherever the docs keep it."""
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S):
            if "testing.cpu_autotuner()" in block:
                return block
    raise AssertionError("no ```python block with testing.cpu_autotuner() in README.md or docs/")


def test_the_no_gpu_example_runs_as_pasted_into_the_plain_repl():
    """Line by line, as the interactive interpreter reads a paste: a block needs its blank line."""
    class Console(code.InteractiveConsole):
        errors: list[str] = []

        def write(self, data):
            self.errors.append(data)

    console, more = Console(), False
    with contextlib.redirect_stdout(io.StringIO()) as shown:
        for line in _no_gpu_snippet().splitlines():
            more = console.push(line)
    assert not more and console.errors == []
    cap = console.locals["cap"]
    assert len(cap.winners) == 7 and shown.getvalue().startswith(f"Capture {cap.run_id} (closed)")
    assert "object at 0x" not in shown.getvalue()
