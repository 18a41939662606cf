"""docs/check_offline.py, which CI runs on the built docs, finds what a page loads remotely."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("check_offline", ROOT / "docs" / "check_offline.py")
check_offline = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_offline)


def _site(tmp_path, page: str, mathjax: bool = True) -> Path:
    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "page.html").write_text(page)
    if mathjax:
        (tmp_path / "_static" / "mathjax").mkdir(parents=True)
        (tmp_path / "_static" / "mathjax" / "tex-chtml.js").write_text("")
    return tmp_path


def test_a_cdn_script_fails_and_is_named(tmp_path, capsys):
    cdn = "https://cdn.jsdelivr.net/npm/mathjax@4/tex-mml-chtml.js"
    site = _site(tmp_path, f'<p><script defer src="{cdn}"></script><link href="//x/y.css">')
    assert check_offline.remote_loads(site) == {"api/page.html": sorted([cdn, "//x/y.css"])}
    assert check_offline.main(["", str(site)]) == 1
    assert cdn in capsys.readouterr().out


def test_local_loads_and_links_to_follow_pass(tmp_path):
    page = '<script src="../_static/mathjax/tex-chtml.js"></script><a href="https://arxiv.org">'
    assert check_offline.main(["", str(_site(tmp_path, page))]) == 0


def test_missing_local_mathjax_fails(tmp_path):
    assert check_offline.main(["", str(_site(tmp_path, "<p>", mathjax=False))]) == 1


def test_the_docs_configuration_ships_mathjax():
    conf = (ROOT / "docs" / "conf.py").read_text()
    assert '"sphinx-mathjax-offline"' in conf
