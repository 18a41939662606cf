"""The command line's own options (the commands are tested in test_compare / test_bench)."""

import pytest

import ebmclassifier
from ebmclassifier import cli


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"ebmclassifier {ebmclassifier.__version__}\n"
