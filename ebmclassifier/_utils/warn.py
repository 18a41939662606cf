"""Warnings that point at the user's line, wherever inside the library they are raised."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

__all__ = ["warn_user"]

#: The package's folder: frames of files under it are the library's, not the user's.
_PACKAGE = str(Path(__file__).resolve().parents[1])


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` attributed to the first caller outside the package.

    A warning raised deep inside ``fit`` (a hook of a hook) names the user's call, not a line
    of the library, without a hand-counted ``stacklevel`` that a new layer of calls would
    silently break.

    Parameters
    ----------
    message : str
    category : Warning subclass, default=UserWarning

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_user("careful")
    >>> caught[0].filename.endswith("warn.py")  # this doctest is not in the package's files
    False
    """
    level, frame = 2, sys._getframe(1)  # stacklevel 2: the frame that called warn_user
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        level, frame = level + 1, frame.f_back
    warnings.warn(message, category, stacklevel=level)
