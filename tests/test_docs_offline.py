"""docs/check_offline.py, which CI runs on the built docs, finds what a page loads remotely."""

from pathlib import Path

import pytest

from .scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
check_offline = load_script("docs/check_offline.py")


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


# ---------------------------------------------------------------- links into other projects

import re  # noqa: E402
import zlib  # noqa: E402

INVENTORY_DIR = ROOT / "docs" / "_inventories"
make_inventories = load_script("docs/_inventories/make_inventories.py")

#: A cross-reference role in reST (:class:`~x.y`) or MyST ({class}`x.y`), and its target.
_ROLE = re.compile(r"(?::|\{)(?:py:)?(class|func|meth|ref)(?::|\})`(?:[^`<]*<)?~?([^`>]+)>?`")
_PROJECTS = ("numpy", "sklearn", "skorch", "torch")


def _inventory(path: Path) -> dict[str, str]:
    """``{name: role}`` of a Sphinx inventory (format 2: four header lines, then zlib)."""
    lines = zlib.decompress(path.read_bytes().split(b"\n", 4)[4]).decode().splitlines()
    return {line.split(" ")[0]: line.split(" ")[1] for line in lines}


def _references() -> set[tuple[str, str]]:
    """``(role, target)`` of every reference into the three projects, in the docs' pages and the
    package's docstrings (the roles Sphinx resolves through intersphinx)."""
    sources = [*(ROOT / "docs").rglob("*.rst"), *(ROOT / "docs").rglob("*.md")]
    sources += [*(ROOT / "ebmclassifier").rglob("*.py")]
    found = set()
    for source in sources:
        if "_build" in source.parts or "auto_examples" in source.parts:
            continue
        for role, target in _ROLE.findall(source.read_text()):
            if target.split(".")[0] in _PROJECTS:
                found.add((role, target))
    return found


def test_the_docs_link_other_projects_without_the_internet():
    # intersphinx reads each project's inventory from a committed file, never from its site
    conf = (ROOT / "docs" / "conf.py").read_text()
    assert '"sphinx.ext.intersphinx"' in conf and "from make_inventories import" in conf
    for project, (base, _, _) in make_inventories.INVENTORIES.items():
        assert base.startswith("https://") and (INVENTORY_DIR / f"{project}.inv").is_file()


def test_the_committed_inventories_are_what_the_script_writes():
    for project, (_, _, targets) in make_inventories.INVENTORIES.items():
        written = _inventory(INVENTORY_DIR / f"{project}.inv")
        assert written == {name: role for name, role, _, _ in targets}, project


def test_every_reference_into_scikit_learn_skorch_and_torch_is_in_an_inventory():
    # an unresolved reference renders as plain text without a warning: this is the check
    names = {}
    for project in make_inventories.INVENTORIES:
        names.update(_inventory(INVENTORY_DIR / f"{project}.inv"))
    references = _references()
    assert {"torch.nn.Module", "sklearn.pipeline.Pipeline"} <= {t for _, t in references}
    missing = sorted(target for _, target in references if target not in names)
    assert not missing, f"add to docs/_inventories/make_inventories.py: {missing}"


@pytest.mark.parametrize(
    "source, targets",
    [
        (
            "docs/user_guide/data.md",
            {
                "torch.utils.data.Dataset",
                "torch.utils.data.TensorDataset",
                "torch.utils.data.DataLoader",
                "torch.utils.data.IterableDataset",
                "sklearn.utils.validation.validate_data",
            },
        ),
        (
            "docs/user_guide/early_stopping.md",
            {
                "sklearn.neural_network.MLPClassifier",
                "skorch.callbacks.EarlyStopping",
                "skorch.dataset.ValidSplit",
            },
        ),
        (
            "ebmclassifier/_estimator/parameter_docs.py",
            {
                "sklearn.neural_network.MLPClassifier",
                "skorch.callbacks.EarlyStopping",
                "skorch.dataset.ValidSplit",
            },
        ),
    ],
)
def test_the_pages_on_data_and_early_stopping_link_what_they_are_about(source, targets):
    # the issue: no links into scikit-learn's, skorch's or PyTorch's docs; these pages named
    # the classes a skorch user knows in code spans, which render as plain text
    linked = {target for _, target in _ROLE.findall((ROOT / source).read_text())}
    assert targets <= linked, sorted(targets - linked)
