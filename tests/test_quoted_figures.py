"""benchmarks/quoted_figures.py: the figures the README and the docs quote are the recorded
outputs of the commands that produced them (#50: the README's demo and JEM figures were not
what a fresh run printed), a figure changed by hand fails, and a fresh run of the cheap
commands reproduces them (slow)."""

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "quoted_figures.py"


@pytest.fixture(scope="module")
def quoted():
    spec = importlib.util.spec_from_file_location("quoted_figures", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def table(quoted):
    return json.loads(quoted.TABLE.read_text())


def test_every_quoted_figure_is_its_commands_recorded_output(quoted, table):
    assert quoted.check(table, quoted.recorded_outputs(table)) == []
    runs = {quote["run"] for quote in table["quotes"]}
    assert runs == set(table["runs"])  # every recorded command is quoted somewhere
    for name, run in table["runs"].items():  # each says what it holds for
        assert {"torch", "threads", "cpu"} <= set(run["environment"]), name
        assert {"date", "cpu_seconds", "wall_seconds", "load_average"} <= set(run["cost"]), name
    for quote in table["quotes"]:  # every tolerance is named and explained
        names = quote.get("tolerance", "exact")
        for name in [names] if isinstance(names, str) else names:
            assert table["tolerances"][name]["why"], name


def _docs_copy(tmp_path, table):
    for doc in {quote["doc"] for quote in table["quotes"]}:
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / doc, tmp_path / doc)
    return tmp_path


def _changed(tmp_path, doc, old, new):
    text = (tmp_path / doc).read_text()
    assert text.count(old) >= 1, old
    (tmp_path / doc).write_text(text.replace(old, new, 1))


def test_a_figure_changed_by_hand_fails(quoted, table, tmp_path):
    outputs = quoted.recorded_outputs(table)
    for quote in table["quotes"]:
        root = _docs_copy(tmp_path / f"q{table['quotes'].index(quote)}", table)
        line = quoted._find((root / quote["doc"]).read_text().splitlines(), quote["line"],
                            quote.get("doc_after"))  # fmt: skip
        figure = quoted.numbers(quoted._cells(line, quote.get("cells")))[0]
        names = quote.get("tolerance", "exact")
        tolerance = table["tolerances"][names if isinstance(names, str) else names[0]]["value"]
        decimals = len(figure.split(".")[1])
        moved = f"{float(figure) + tolerance * 2 + 2 * 10**-decimals:.{decimals}f}"
        _changed(root, quote["doc"], line, line.replace(figure, moved, 1))
        problems = quoted.check(table, outputs, root)
        assert problems and f"quotes {moved}," in problems[0], (quote["line"], problems)


def test_a_verdict_reworded_by_hand_fails(quoted, table, tmp_path):
    sentences = [q for q in table["quotes"] if q.get("cells") is None]
    assert sentences  # the printed verdicts are quoted as sentences
    quote = sentences[0]
    root = _docs_copy(tmp_path, table)
    line = quoted._find((root / quote["doc"]).read_text().splitlines(), quote["line"],
                        quote.get("doc_after"))  # fmt: skip
    _changed(root, quote["doc"], line, line.replace(" ", "  ", 1).replace("is", "was", 1))
    problems = quoted.check(table, quoted.recorded_outputs(table), root)
    assert any("words differ" in problem for problem in problems), problems


def test_a_jem_figure_within_its_tolerance_passes_and_beyond_it_fails(quoted, table, tmp_path):
    jem = [q for q in table["quotes"] if "jem" in str(q.get("tolerance", ""))]
    assert jem
    quote = next(q for q in jem if isinstance(q["tolerance"], list))
    position = quote["tolerance"].index("jem")
    tolerance = table["tolerances"]["jem"]["value"]
    root = _docs_copy(tmp_path, table)
    doc_lines = (root / quote["doc"]).read_text().splitlines()
    line = quoted._find(doc_lines, quote["line"], quote.get("doc_after"))
    cells = quoted._cells(line, quote.get("cells"))
    figure = quoted.numbers(cells)[position]
    for shift, passes in ((tolerance * 0.5, True), (tolerance * 1.5, False)):
        moved = f"{float(figure) - shift:.3f}"
        _changed(root, quote["doc"], line, line.replace(cells, cells.replace(figure, moved), 1))
        problems = quoted.check(table, quoted.recorded_outputs(table), root)
        assert (problems == []) == passes, (moved, problems)
        shutil.copy(ROOT / quote["doc"], root / quote["doc"])


@pytest.mark.slow
def test_a_fresh_run_of_the_cheap_commands_gives_the_quoted_figures(quoted, capsys):
    # demo and compare --data digits, on one thread: a few minutes of CPU
    assert quoted.main(["--rerun"]) == 0, capsys.readouterr().out
