"""compare's report.md and results.json: files, sentences, several data sets combined."""

import json

import pytest

from ebmclassifier.experiments._report_figures import FIGURE_GUIDES
from ebmclassifier.experiments.compare import write_report


@pytest.mark.slow
def test_report_files(results, tmp_path):
    results, _ = results
    tabs = write_report(results, tmp_path, command="python -m ebmclassifier compare")
    report = (tmp_path / "report.md").read_text()
    assert "| ce_ts |" in report and "ce / energy" in report and "jem`: skipped" in report
    for name in tabs["figures"]:
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    # one reliability diagram per model, one OOD histogram per model with scores of its own
    # (ce_ts rescales ce's max softmax), every model's curves together in the other two
    assert list(tabs["figures"]) == [
        "reliability_ce.png", "reliability_ce_ts.png", "reliability_ngebm.png", "ood_ce.png",
        "ood_ngebm.png", "risk_coverage.png", "robustness.png",
    ]  # fmt: skip
    saved = json.loads((tmp_path / "results.json").read_text())
    assert len(saved["runs"]) == 6 and "_figure_data" not in saved["runs"][0]
    assert saved["summary"]["ce"]["scalars"]["accuracy"]["n"] == 2
    assert any(line.startswith("OOD AUROC on uniform") for line in tabs["verdicts"])


@pytest.mark.slow
def test_report_states_divergences(results, tmp_path):
    import copy

    results, _ = results
    results = copy.deepcopy(results)
    for run in results["runs"]:
        if run["model"] == "ngebm":
            run["divergences"] = 0
    write_report(results, tmp_path / "none")
    assert (
        "`ngebm`: no training divergence in any fit." in (tmp_path / "none/report.md").read_text()
    )
    results["runs"][2]["divergences"] = 4  # seed 0's ngebm
    write_report(results, tmp_path / "some")
    text = (tmp_path / "some/report.md").read_text()
    assert "`ngebm` recovered from 2 [0, 4] training divergences per fit." in text


@pytest.mark.slow
def test_several_reports_are_combined_from_memory(results, tmp_path, monkeypatch):
    # write_compare_report used to read back each data set's report.md and results.json
    import copy
    from pathlib import Path

    from ebmclassifier.experiments.report import write_compare_report

    results, _ = results
    other = copy.deepcopy(results)
    other["data"]["name"] = "other"
    monkeypatch.setattr(Path, "read_text", lambda *a, **k: pytest.fail("a report was read back"))
    printed = write_compare_report(
        [results, other], tmp_path, command="python -m ebmclassifier compare"
    )
    monkeypatch.undo()
    assert len(printed) == 2 and printed[0]["main"] == printed[1]["main"]
    report = (tmp_path / "report.md").read_text()
    section = (tmp_path / "other" / "report.md").read_text()
    assert "## ebmclassifier compare: other" in report and "### Summary" in report
    assert "![risk_coverage.png](other/risk_coverage.png)" in report
    assert section.splitlines()[4] in report.splitlines()  # the data line, as in its folder
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["datasets"]["other"] == json.loads((tmp_path / "other/results.json").read_text())
    assert list(saved["datasets"]) == ["digits", "other"]


@pytest.mark.slow
def test_the_ce_ts_sentence_only_with_ce_ts(results, tmp_path):
    import copy

    results, _ = results
    sentence = "`ce_ts` trains nothing more than `ce` and keeps its predictions"
    write_report(results, tmp_path / "with")
    assert sentence in (tmp_path / "with" / "report.md").read_text()
    without = copy.deepcopy(results)
    del without["models"]["ce_ts"], without["calibrated"]["ce_ts"]
    without["runs"] = [r for r in without["runs"] if r["model"] != "ce_ts"]
    write_report(without, tmp_path / "without")
    text = (tmp_path / "without" / "report.md").read_text()
    assert sentence not in text and "`cost x CE`: seconds per epoch over the CE model's" in text


@pytest.mark.slow
def test_every_figure_has_a_caption_and_its_kind_a_reading_guide(results, tmp_path):
    results, _ = results
    captions = write_report(results, tmp_path)["figures"]
    lines = (tmp_path / "report.md").read_text().splitlines()
    images = [i for i, line in enumerate(lines) if line.startswith("![")]
    assert [lines[i] for i in images] == [f"![{name}]({name})" for name in captions]
    for i, name in zip(images, captions, strict=True):
        # the caption is the paragraph under the image: the file, what it shows
        assert lines[i + 2] == f"*`{name}`*: {captions[name]}" and len(captions[name]) > 20
    for heading, guide in FIGURE_GUIDES.values():
        assert f"### {heading}" in lines and guide in lines
    assert "Each model has one colour and marker in every figure" in "\n".join(lines)


@pytest.mark.slow
def test_the_report_opens_with_the_summary_table(results, tmp_path):
    results, _ = results
    printed = write_report(results, tmp_path)
    report = (tmp_path / "report.md").read_text()
    summary = report[report.index("## Summary") :]
    # the README's table first, then every model's full row with its seed range
    assert summary.index(printed["overview"]) < summary.index(printed["main"])
    rows = printed["overview"].splitlines()
    assert rows[0] == "|  | digits |" and rows[2].startswith("| ECE: ce / ce_ts / ngebm |")
