"""One lock per estimator, so that the calls that use or change its network do not interleave.

scikit-learn documents its estimators as unsafe to fit and predict from several threads at
once. Here ``fit``, ``partial_fit`` and every inference call of an estimator hold its lock, a
re-entrant one (a call may make another on its own thread: a scoring callback's ``predict``
inside ``fit``): ``predict_proba`` from other threads while ``partial_fit`` runs waits for it,
so every call sees the weights before another or after it, and the training and evaluation
modes that the call itself set. Calls on different estimators do not wait for each other.

The locks live in a table beside the estimators, not in them, so that an estimator still
pickles, deep-copies and clones; an entry goes with its estimator.
"""

from __future__ import annotations

import threading
import weakref

__all__ = ["estimator_lock"]

_LOCKS: dict[int, threading.RLock] = {}
_GUARD = threading.Lock()


def estimator_lock(obj) -> threading.RLock:
    """The re-entrant lock of ``obj`` (created at its first use, dropped with ``obj``).

    Parameters
    ----------
    obj : object
        An estimator (any object that accepts a weak reference).

    Returns
    -------
    threading.RLock

    Examples
    --------
    >>> from ebmclassifier import NGEBMClassifier
    >>> clf, other = NGEBMClassifier(), NGEBMClassifier()
    >>> estimator_lock(clf) is estimator_lock(clf), estimator_lock(clf) is estimator_lock(other)
    (True, False)
    """
    with _GUARD:
        lock = _LOCKS.get(id(obj))
        if lock is None:
            lock = _LOCKS[id(obj)] = threading.RLock()
            weakref.finalize(obj, _LOCKS.pop, id(obj), None)
        return lock
