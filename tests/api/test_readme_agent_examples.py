"""The README's Anthropic SDK and Responses examples run as written (against the shared server's address)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "## Anthropic Messages and OpenAI Responses APIs"


def _examples() -> list[str]:
    text = README.read_text()
    start = text.index(SECTION)
    section = text[start : text.index("\n## ", start + len(SECTION))]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_section_has_both_examples() -> None:
    examples = _examples()
    assert len(examples) == 2
    assert "anthropic.Anthropic(" in examples[0] and "responses.create(" in examples[1]


@pytest.mark.parametrize("index", [0, 1])
def test_example_runs(local_server, capsys: pytest.CaptureFixture[str], index: int) -> None:
    code = _examples()[index].replace("http://127.0.0.1:9997", local_server.endpoint)
    exec(compile(code, f"README example {index + 1}", "exec"), {})  # noqa: S102 - our own README's code
    printed = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert len(printed) >= 2
    if index == 0:  # the answer with its stop reason, then the token count
        assert printed[-1].isdigit() and int(printed[-1]) > 0
