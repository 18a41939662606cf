"""benchmarks/quoted_figures.py: the figures the README and the docs quote are the recorded
outputs of the commands that produced them (#50: the README's demo and JEM figures were not
what a fresh run printed), a figure changed by hand fails, and a fresh run of the cheap
commands reproduces them (slow)."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from .scripts import load_script

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def quoted():
    return load_script("benchmarks/quoted_figures.py")


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


def _fake_runs(quoted, table, monkeypatch, edit=lambda name, out: out):
    """``--rerun`` with each command's process replaced by its recorded output (``edit``ed)."""
    outputs = quoted.recorded_outputs(table)
    ran = []

    def run(args, **kwargs):
        out = args[-1]  # the temporary folder of a command that writes a report
        (name,) = [
            n
            for n, r in table["runs"].items()
            if r["command"].format(out=out).split()[1:] == args[1:]
        ]
        ran.append(name)
        return subprocess.CompletedProcess(args, 0, edit(name, outputs[name]), "")

    monkeypatch.setattr(quoted.subprocess, "run", run)
    return ran


def test_a_rerun_compares_each_cheap_commands_fresh_output(quoted, table, monkeypatch, capsys):
    # the fresh run itself (minutes of CPU) is CI's own step: .ci/run runs
    # `python benchmarks/quoted_figures.py --rerun` after the tests
    ran = _fake_runs(quoted, table, monkeypatch)
    assert quoted.main(["--rerun"]) == 0, capsys.readouterr().out
    assert ran == [name for name, run in table["runs"].items() if run["cheap"]]
    figures = [q for q in table["quotes"] if q["run"] in ran and q.get("run_line")]
    assert figures
    for quote in figures:

        def edit(name, out, quote=quote):  # the quoted line's first figure, moved by 0.5
            if name != quote["run"]:
                return out
            lines = out.splitlines(keepends=True)
            i = next(i for i, line in enumerate(lines) if quote["run_line"] in line)
            figure = quoted.numbers(lines[i].split(quote["run_line"], 1)[1])[0]
            decimals = len(figure.split(".")[1]) if "." in figure else 0
            lines[i] = lines[i].replace(figure, f"{float(figure) + 0.5:.{decimals}f}", 1)
            return "".join(lines)

        _fake_runs(quoted, table, monkeypatch, edit)
        assert quoted.main(["--rerun"]) == 1, quote


def test_on_another_machine_an_exact_figure_is_held_to_the_cross_machine_tolerance(
    quoted, table, monkeypatch, capsys
):
    quote = next(q for q in table["quotes"] if q.get("run_line") and q.get("tolerance") is None)
    tolerance = table["tolerances"]["another_machine"]["value"]

    def moved_by(shift):
        def edit(name, out):
            if name != quote["run"]:
                return out
            lines = out.splitlines(keepends=True)
            i = next(i for i, line in enumerate(lines) if quote["run_line"] in line)
            figure = quoted.numbers(lines[i].split(quote["run_line"], 1)[1])[0]
            decimals = len(figure.split(".")[1])
            lines[i] = lines[i].replace(figure, f"{float(figure) + shift:.{decimals}f}", 1)
            return "".join(lines)

        return edit

    here = quoted.environment()
    for cpu, shift, status in (
        (here["cpu"], tolerance / 2, 1),  # the recorded machine: exact
        ("another CPU", tolerance / 2, 0),
        ("another CPU", tolerance * 2, 1),
    ):
        monkeypatch.setattr(quoted, "environment", lambda cpu=cpu: {**here, "cpu": cpu})
        recorded = {n: {**r["environment"], "cpu": here["cpu"]} for n, r in table["runs"].items()}
        runs = {n: {**r, "environment": recorded[n]} for n, r in table["runs"].items()}
        monkeypatch.setattr(quoted.json, "loads", lambda text, runs=runs: {**table, "runs": runs})
        _fake_runs(quoted, table, monkeypatch, moved_by(shift))
        assert quoted.main(["--rerun"]) == status, (cpu, shift, capsys.readouterr().out)


def test_ci_reruns_the_cheap_commands():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python benchmarks/quoted_figures.py --rerun" in ci
