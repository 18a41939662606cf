"""Fail when a built HTML page needs the internet to render (scripts, styles, fonts, MathJax).

Run after the build, as CI does:

    python docs/check_offline.py docs/_build/html

Links a reader may follow (``<a href="https://...">``) are fine; what a page *loads* is not.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# <script src=...>, <link href=...> (stylesheets, fonts, preloads), <img src=...>
_LOADED = re.compile(
    r"<(?:script|img)\b[^>]*\bsrc=[\"'](?P<src>(?:https?:)?//[^\"']+)"
    r"|<link\b[^>]*\bhref=[\"'](?P<href>(?:https?:)?//[^\"']+)",
    re.IGNORECASE,
)


def remote_loads(html_dir: Path) -> dict[str, list[str]]:
    """Map each page under ``html_dir`` that loads something remote to those URLs."""
    found = {}
    for page in sorted(html_dir.rglob("*.html")):
        urls = [m.group("src") or m.group("href") for m in _LOADED.finditer(page.read_text())]
        if urls:
            found[str(page.relative_to(html_dir))] = sorted(set(urls))
    return found


def main(argv: list[str]) -> int:
    html_dir = Path(argv[1] if len(argv) > 1 else "docs/_build/html")
    if not any(html_dir.rglob("*.html")):
        print(f"error: no HTML pages under {str(html_dir)!r}; build the docs first.")
        return 2
    if not (html_dir / "_static" / "mathjax" / "tex-chtml.js").is_file():
        print("error: _static/mathjax/tex-chtml.js is missing: the maths would not render.")
        return 1
    found = remote_loads(html_dir)
    for page, urls in found.items():
        print(f"{page}: loads {', '.join(urls)}")
    print(f"{len(found)} page(s) load remote resources" if found else "offline: OK")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
