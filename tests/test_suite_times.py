"""benchmarks/suite_times.py: what it reads from pytest's durations, and what it refuses."""

import pytest

from .scripts import load_script


@pytest.fixture(scope="module")
def suite_times():
    return load_script("benchmarks/suite_times.py")


def test_an_items_phases_add_up_and_items_under_the_least_are_left_out(
    suite_times, tmp_path, capsys
):
    quiet, busy = tmp_path / "quiet.txt", tmp_path / "busy.txt"
    quiet.write_text(
        "1.50s setup    tests/a.py::test_x\n0.50s call     tests/a.py::test_x\n"
        "0.40s call     tests/b.py::test_y[1]\nnot a duration line\n"
    )
    busy.write_text("5.00s call     tests/a.py::test_x\n1.00s call     tests/b.py::test_y[1]\n")
    assert suite_times.durations(quiet) == {"tests/a.py::test_x": 2.0, "tests/b.py::test_y[1]": 0.4}
    suite_times.compare(quiet, busy, least=1.0)
    out = capsys.readouterr().out
    assert "1 items of at least 1 s" in out and " 2.50x " in out and "test_y" not in out


def test_an_unknown_step_is_refused_before_anything_runs(suite_times, tmp_path):
    with pytest.raises(SystemExit):
        suite_times.main(["full", "nope", "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()
