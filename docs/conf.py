"""Sphinx configuration: numpydoc API reference, MyST pages, sphinx-gallery over examples/.

Build (from the repository root; fails on any warning):

    python -m sphinx -W --keep-going -b html docs docs/_build/html

``EBM_DOCS_FAST=1`` skips executing the gallery examples (the pages are still built). Executed,
the gallery takes about a minute on one CPU thread (its slowest example about 35 s), so CI runs
it in full: no example needs fewer epochs there.
"""

from __future__ import annotations

import importlib.util
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

# --- Links to other projects' docs: off by default so that the build needs no network
intersphinx_mapping: dict = {}


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


# --- Gallery: plot_*.py are executed; other example scripts are shown, not run
sphinx_gallery_conf = {
    "examples_dirs": [str(ROOT / "examples")],
    "gallery_dirs": ["auto_examples"],
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py",
    "plot_gallery": "False" if os.environ.get("EBM_DOCS_FAST") else "True",
    "download_all_examples": False,
    "within_subsection_order": "FileNameSortKey",
    "remove_config_comments": True,
    "min_reported_time": 1,
    "matplotlib_animations": False,
    "capture_repr": (),
    "write_computation_times": False,
    "image_scrapers": (_figure_scraper, "matplotlib"),
}

# JEMClassifier joins the reference only where ebmclassifier/jem.py exists in this checkout.
HAS_JEM = importlib.util.find_spec("ebmclassifier.jem") is not None
_JEM_PAGE = "JEM\n===\n\n" + (
    ".. currentmodule:: ebmclassifier.jem\n\n"
    ".. autosummary::\n   :toctree: generated/\n   :template: estimator.rst\n\n"
    "   JEMClassifier\n"
    if HAS_JEM
    else "``JEMClassifier`` (``ebmclassifier/jem.py``) is not part of this checkout.\n"
)
(Path(__file__).parent / "api" / "jem.rst").write_text(_JEM_PAGE)  # generated, git-ignored

# --- HTML
html_theme = "pydata_sphinx_theme"
html_title = f"ebmclassifier {release}"
html_theme_options = {"navigation_depth": 2, "show_toc_level": 2}
html_static_path = ["_static"]
html_css_files = ["custom.css"]  # long API titles wrap instead of being cut off
html_show_sourcelink = False

suppress_warnings = ["config.cache"]
