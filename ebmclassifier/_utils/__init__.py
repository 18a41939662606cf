"""Leaf helpers that know nothing of the estimators' classes.

Parameter checking (``parameters.py``) and data validation (``validation.py``), batches of
tensors (``data.py``), devices (``device.py``), a fit's seed and generators (``generators.py``),
precision (``precision.py``),
compilation (``compile.py``), threads (``threads.py``), train/eval modes (``modes.py``), atomic
writes (``atomic.py``), column statistics (``statistics.py``), shared docstring text
(``docstrings.py``). Each imports only the standard library, numpy, torch, scikit-learn and
its siblings here.
"""
