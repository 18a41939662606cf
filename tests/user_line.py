"""Where a warning points: the line of the user's call."""

from __future__ import annotations

import os


def assert_at_users_line(caught, filename: str) -> None:
    """Every warning of ``caught`` points at ``filename`` (the test's file: the user's call).

    Under mutmut (``MUTANT_UNDER_TEST`` in the environment, its clean run included) the nearest
    frame outside the package is mutmut's trampoline, so the frame is not checked there; the
    rest of the test (that the warning is raised, and what it says) is.
    """
    if "MUTANT_UNDER_TEST" in os.environ:
        return
    assert {w.filename for w in caught} == {filename}
