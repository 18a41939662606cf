"""The docs' front page: its ten-line example runs as written, and the top bar is short."""

import re
import textwrap
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.mark.slow
def test_the_front_page_example_runs_as_written():
    text = (DOCS / "index.rst").read_text()
    (block,) = re.findall(r"\.\. code-block:: python\n\n(.*?)\n\n\S", text, flags=re.S)
    namespace: dict = {}
    exec(compile(textwrap.dedent(block), "docs/index.rst", "exec"), namespace)  # noqa: S102
    assert namespace["clf"].score(namespace["X_test"], namespace["y_test"]) > 0.9
    assert namespace["proba"].shape == (len(namespace["X_test"]), 10)
    assert namespace["typical"].shape == (len(namespace["X_test"]),)


def test_the_top_bar_is_getting_started_user_guide_examples_and_api_reference():
    text = (DOCS / "index.rst").read_text()
    toctree = text.split(".. toctree::")[1].split("\n\n")[1]
    titles = [line.strip().split(" <")[0] for line in toctree.splitlines()]
    assert titles == ["Getting started", "User guide", "Examples", "API reference"]
