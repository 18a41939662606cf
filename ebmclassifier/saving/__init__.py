"""One file per fitted object, without pickle: :func:`save` (``ebmclassifier.save``; also
``estimator.save(path)``) and :func:`load` (``ebmclassifier.load``).

- An estimator of the library: a zip of ``metadata.json`` (its class, parameters, what ``fit``
  learned besides tensors, with ``training_state=True`` the history) and ``weights.pt``
  (``torch.save`` of tensors only: the modules' and the optimizer's state dicts, fitted tensors
  such as ``input_min_``, all on the CPU) (``_files.py``).
- A :class:`~ebmclassifier.DistributionalConstraint`: ``distributional.json`` and its base
  estimator's own file (``_files.py``).
- A scikit-learn object around the estimators (``Pipeline``, ``ColumnTransformer``,
  ``FeatureUnion``, ``CalibratedClassifierCV``, a search's ``best_estimator_``):
  ``composite.json``, skops's ``skeleton.skops`` with a stand-in per estimator, and each
  estimator's own file (``_composite.py``, ``_skeleton.py``).

Every writer replaces a path at once and only a regular file, keeping its owner and mode
(:mod:`ebmclassifier._utils.atomic`). A file may come from anyone, and ``load`` treats it so:

- **No code runs.** JSON, ``torch.load(weights_only=True)``, classes looked up statically in
  ``ebmclassifier``, ``torch`` and ``skorch`` only, of the kind their parameter takes
  (``_allowed_classes.py``); a pipeline's scikit-learn part built by skops from trusted types
  only (skops's defaults, ``_skeleton.TRUSTED``, the caller's ``trusted=[...]``), any other
  refused by name before anything is built.
- **A closed list of what it sets**: parameters checked by role, never ``torch_load_kwargs`` nor
  ``compile__options``; fitted attributes only those the estimator saves, each of its kind.
- **Nothing of how the process runs**: ``verbose``, ``compile`` and the data loaders' process
  settings are not taken from a file (``_allowed_classes.RUNTIME``); ``n_threads`` is bounded by
  the cores at every call, ``device`` resolved against the machine's.
- **Bounded sizes** (:class:`FileLimits`, which lists them), checked before anything is
  decompressed, parsed or allocated (``_archive.py``, ``_values.py``), UTF-8 JSON; the modules
  a file's parameters build are counted on the meta device against the bytes its weights hold
  before anything is built (``_budget.py``).

Each refusal is a ``ValueError`` naming the file and the rule or limit. What cannot be saved
(callbacks, ``train_split``, a network class of one's own) is passed to :func:`load`; what JSON
and skops cannot hold (a constraint's ``constraints``, torch objects outside the estimators) is
refused at save time. Pickle saves everything, but unpickling runs code from the file: only
unpickle files you trust (the user guide's "Saving and deploying").
"""

from ._archive import FileLimits
from ._dispatch import load, save

__all__ = ["FileLimits", "load", "save"]
