"""One lock per estimator (ebmclassifier._utils.locks)."""

import gc
import threading

from ebmclassifier._utils import locks
from ebmclassifier._utils.locks import estimator_lock


class _Owner:
    pass


def test_a_call_may_take_its_own_lock_again_and_other_owners_do_not_wait():
    a, b = _Owner(), _Owner()
    taken = threading.Event()
    with estimator_lock(a), estimator_lock(a):  # re-entrant: predict inside fit's callback
        thread = threading.Thread(target=lambda: estimator_lock(b).acquire() and taken.set())
        thread.start()
        thread.join(timeout=60)
        assert taken.is_set()  # b's lock while a's is held elsewhere
        waited = threading.Event()

        def take_a():
            with estimator_lock(a):
                waited.set()

        other = threading.Thread(target=take_a)
        other.start()
        other.join(timeout=0.5)
        assert not waited.is_set()  # another thread waits for a
    other.join(timeout=60)
    assert waited.is_set()


def test_the_lock_goes_with_its_owner():
    owner = _Owner()
    estimator_lock(owner)
    key = id(owner)
    assert key in locks._LOCKS
    del owner
    gc.collect()
    assert key not in locks._LOCKS
