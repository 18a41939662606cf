"""Sphinx configuration: numpydoc API reference, MyST pages, sphinx-gallery over examples/.

Build (from the repository root; fails on any warning):

    python -m sphinx -W --keep-going -b html docs docs/_build/html

``EBM_DOCS_FAST=1`` skips executing the gallery examples (the pages are still built). Executed,
the gallery takes about a minute on one CPU thread (its slowest example about 35 s), so CI runs
it in full: no example needs fewer epochs there.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # document this checkout, not another installed copy

import ebmclassifier  # noqa: E402

project = "ebmclassifier"
author = "ebmclassifier developers"
copyright = "ebmclassifier developers"
release = ebmclassifier.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    # MathJax 3 shipped into _static/mathjax, so the maths renders with no internet (the
    # default loads it from a CDN and offline pages show raw LaTeX)
    "sphinx-mathjax-offline",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "auto_examples/*.ipynb", "**/*.ipynb", "latent_clusters/*.md"]
templates_path = ["_templates"]

# --- API reference
autosummary_generate = True
autodoc_typehints = "none"  # the numpydoc sections carry the types
# The templates in _templates/ choose the members: estimator.rst the user-facing methods (not
# skorch's), class.rst a class's own methods (not forward/backward, which the class documents),
# network.rst the networks' penultimate and last_layer (written once, on their private base).
numpydoc_show_class_members = False  # the class template lists the estimator's own methods
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks: set[str] = set()

# --- Markdown pages
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3

# --- Links to other projects' docs, built offline: each project's inventory is a small file in
# _inventories/ listing the targets these docs reference (make_inventories.py writes them), so
# intersphinx fetches nothing and the links lead to the projects' real pages
sys.path.insert(0, str(Path(__file__).parent / "_inventories"))
from make_inventories import HERE as _INVENTORIES  # noqa: E402
from make_inventories import INVENTORIES  # noqa: E402

intersphinx_mapping = {
    project: (base, str(_INVENTORIES / f"{project}.inv"))
    for project, (base, _, _) in INVENTORIES.items()
}
intersphinx_cache_limit = -1  # never refetch: there is nothing to fetch


def _figure_scraper(block, block_vars, gallery_conf):
    """Save the matplotlib ``Figure`` objects an example binds to a name.

    ``ebmclassifier.plotting`` returns figures that pyplot does not track (no global state), so
    sphinx-gallery's pyplot scraper would not see them. Figures that pyplot does track
    (``plt.subplots``) are left to that scraper, which runs after this one: saving them here
    too would show each twice.
    """
    from matplotlib.figure import Figure
    from sphinx_gallery.scrapers import figure_rst

    seen = block_vars.setdefault("ebm_scraped_figures", set())
    paths = []
    for obj in list(block_vars["example_globals"].values()):
        if isinstance(obj, Figure) and id(obj) not in seen:
            seen.add(id(obj))
            if obj.canvas.manager is not None:  # open in pyplot: its scraper saves it
                continue
            path = next(block_vars["image_path_iterator"])
            obj.savefig(path, dpi=90)
            paths.append(path)
    return figure_rst(paths, gallery_conf["src_dir"])


class GalleryOrder:
    """The gallery's order: first the example of the regime where NG-EBM helps (the README's
    main job, cross-entropy over-confident on MNIST-1D), then the others by file name."""

    FIRST = "plot_reliability_ce_vs_ngebm.py"

    def __init__(self, src_dir: str) -> None:
        self.src_dir = src_dir

    def __call__(self, filename: str) -> tuple[bool, str]:
        return (filename != self.FIRST, filename)


# --- Gallery: plot_*.py are executed; other example scripts are shown, not run
sphinx_gallery_conf = {
    "examples_dirs": [str(ROOT / "examples")],
    "gallery_dirs": ["auto_examples"],
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py",
    "plot_gallery": "False" if os.environ.get("EBM_DOCS_FAST") else "True",
    "download_all_examples": False,
    "within_subsection_order": GalleryOrder,
    "remove_config_comments": True,
    "min_reported_time": 1,
    "matplotlib_animations": False,
    "capture_repr": (),
    "write_computation_times": False,
    "image_scrapers": (_figure_scraper, "matplotlib"),
    # "Examples using this class" on each API page: the examples that use a name are
    # recorded per name, and the class template's ``minigallery`` shows them
    "backreferences_dir": "gen_modules/backreferences",
    "doc_module": ("ebmclassifier",),
}

# Earlier versions of this file generated api/jem.rst; JEMClassifier is on the Estimators page
# now, and a stale copy would be a page outside every toctree (a warning).
(Path(__file__).parent / "api" / "jem.rst").unlink(missing_ok=True)

# --- HTML
# The top bar holds the root's toctree captions' pages: Getting started, User guide, Examples,
# API reference (short titles, no "More" menu). The left sidebar shows the section's pages;
# pages without a section (the front page, Getting started) get none, so the text has the width.
html_theme = "pydata_sphinx_theme"
html_title = f"ebmclassifier {release}"
html_theme_options = {
    "navigation_depth": 2,
    "show_toc_level": 2,
    "header_links_before_dropdown": 5,
    "navbar_align": "left",
    "show_prev_next": False,
    "secondary_sidebar_items": ["page-toc"],
}
# The API pages (docs/_templates) and the front page drop the "On this page" column
# (``:html_theme.sidebar_secondary.remove:``): a class page has its own table of methods, and
# the column would take the width their code needs.
html_sidebars = {"index": [], "user_guide/getting_started": []}
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_show_sourcelink = False

suppress_warnings = ["config.cache"]
