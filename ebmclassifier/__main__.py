"""``python -m ebmclassifier``: see :mod:`ebmclassifier.cli`."""

from .cli import main

raise SystemExit(main())
