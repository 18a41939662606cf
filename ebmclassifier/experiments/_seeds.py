"""Which seed a figure stands for, and which seeds are far from the others.

A median over seeds is robust to one bad seed, and so it hides it: a fit that failed, or an
OOD score that came out inverted at one seed, leaves the median where the good seeds put it.
:func:`far_seeds` finds such a seed in a summary over seeds (``per_seed``, written by
:func:`~._tables.summarise`), so that the verdicts name it with its value, and
:func:`median_seed` names the seed whose figure a histogram or a reliability diagram shows.
"""

from __future__ import annotations

import numpy as np

#: A seed is far from the others when its value lies farther than this from the median of
#: the other seeds (a quarter of the [0, 1] range of accuracy, ECE or AUROC) ...
FAR_FROM_OTHERS = 0.25
#: ... and farther than this many times the range the other seeds span, so that a spread that
#: every seed shares is not mistaken for one seed's failure.
FAR_SPREAD_RATIO = 3.0


def far_seeds(stat: dict | None) -> dict[int, float]:
    """The seeds whose value is far from every other seed's, ``{seed: value}``.

    A seed is far when its value lies more than :data:`FAR_FROM_OTHERS` from the median of the
    other seeds' values *and* more than :data:`FAR_SPREAD_RATIO` times the range those span.
    With fewer than three seeds nothing is far: two values cannot say which one is off.

    Parameters
    ----------
    stat : dict or None
        A summary over seeds with ``per_seed`` (``{seed: value}``); without it, nothing is far.

    Returns
    -------
    dict of int to float
        In the order of the seeds.

    Examples
    --------
    >>> far_seeds({"per_seed": {0: 1.0, 1: 0.002, 2: 0.999}})  # an inverted score at seed 1
    {1: 0.002}
    >>> far_seeds({"per_seed": {0: 0.95, 1: 0.60, 2: 0.80}})  # a wide spread, no outlier
    {}
    """
    per_seed = (stat or {}).get("per_seed") or {}
    if len(per_seed) < 3:
        return {}
    far = {}
    for seed, value in per_seed.items():
        others = [v for s, v in per_seed.items() if s != seed]
        distance = abs(value - float(np.median(others)))
        spread = max(others) - min(others)
        if distance > FAR_FROM_OTHERS and distance > FAR_SPREAD_RATIO * spread:
            far[seed] = value
    return far


def median_seed(stat: dict | None) -> int | None:
    """The seed whose value is the median over seeds, or None without ``per_seed``.

    For an even count the median is the mean of the two middle values, and the seed is the
    lower one's; seeds of equal values are taken in their order.

    Parameters
    ----------
    stat : dict or None
        A summary over seeds with ``per_seed``.

    Returns
    -------
    int or None

    Examples
    --------
    >>> median_seed({"per_seed": {0: 0.900, 1: 0.641, 2: 0.605}})
    1
    """
    per_seed = (stat or {}).get("per_seed")
    if not per_seed:
        return None
    ranked = sorted(per_seed, key=lambda seed: (per_seed[seed], seed))
    return ranked[(len(ranked) - 1) // 2]


def seed_values(stat: dict, digits: int = 3) -> str:
    """``"seeds 0, 1, 2: 0.900, 0.641, 0.605"``: every seed's value, in the order of the seeds."""
    per_seed = stat.get("per_seed") or {}
    seeds = sorted(per_seed)
    values = ", ".join(f"{per_seed[s]:.{digits}f}" for s in seeds)
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}: {values}"


def far_text(label: str, stat: dict | None, auroc: bool = False) -> str | None:
    """``label``'s far seeds in words, with their values and the other seeds', or None.

    Parameters
    ----------
    label : str
        What the figure is: ``"jem / energy's AUROC on inverted"``.
    stat : dict or None
        Its summary over seeds (:func:`far_seeds`).
    auroc : bool, default=False
        The figure is an OOD AUROC: a far value below 0.5 is said to be an inverted score.

    Returns
    -------
    str or None

    Examples
    --------
    >>> stat = {"per_seed": {0: 1.0, 1: 0.002, 2: 1.0}}
    >>> print(far_text("jem / energy's AUROC on inverted", stat, auroc=True))
    ... # doctest: +NORMALIZE_WHITESPACE
    jem / energy's AUROC on inverted: seed 1 at 0.002 against 1.000, 1.000 at the other seeds
    (below 0.5: that seed's score ranks the set as more in-distribution than the test data)
    """
    far = far_seeds(stat)
    if not far:
        return None
    others = [v for s, v in sorted(stat["per_seed"].items()) if s not in far]
    seeds = " and ".join(f"seed {s} at {v:.3f}" for s, v in far.items())
    text = f"{label}: {seeds} against {', '.join(f'{v:.3f}' for v in others)} at the other seeds"
    if auroc and any(v < 0.5 for v in far.values()):
        text += (
            " (below 0.5: that seed's score ranks the set as more in-distribution than the test "
            "data)"
        )
    return text
