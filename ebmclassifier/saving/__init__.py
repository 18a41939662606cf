"""Saving a fitted estimator, constraint or pipeline to one file, and loading it without the
training data, never with pickle.

:func:`save` (``ebmclassifier.save``; also ``estimator.save(path)``) writes an estimator of the
library as a zip archive of two members:

- ``metadata.json``: the estimator's class, its constructor parameters, what ``fit`` learned
  besides tensors (``classes_``, ``input_shape_``, ``n_features_in_``, the OOD threshold, ...)
  and, with ``training_state=True``, the training history;
- ``weights.pt``: ``torch.save`` of a dict of tensors only: the state dicts of the fitted
  modules (``module_``, JEM's ``replay_buffer_``), of the optimizer (with
  ``training_state=True``), and fitted tensors such as ``input_min_``. Every tensor is saved on
  the CPU.

A fitted :class:`~ebmclassifier.DistributionalConstraint` is a zip of ``distributional.json``
(its parameters and what ``fit`` learned) and ``estimator.ebm``, its base estimator's own file
as above. A scikit-learn object around the estimators (a ``Pipeline``, ``ColumnTransformer``,
``FeatureUnion``, ``CalibratedClassifierCV``, a search's ``best_estimator_``) is a zip of
``composite.json``, ``skeleton.skops`` (skops's file of the object, each estimator of the
library replaced by a stand-in) and each estimator's own file (``_composite.py``). Every writer
replaces a path at once (a temporary file beside it, synced, then renamed over it), so that the
target is always the old file or the new one, never a torn one; it writes only over a regular
file, keeping its owner and mode (:mod:`ebmclassifier._utils.atomic`).

:func:`load` rebuilds the object from these alone: no ``fit``, no data. A file may come from
anyone, and ``load`` treats it so:

- **No code runs.** The metadata is JSON, the weights are read with
  ``torch.load(weights_only=True)``; a class named in the metadata is looked up only in
  ``ebmclassifier``, ``torch`` or ``skorch`` (the package's whole name), only in a module already
  imported (nothing is imported because a file names it, but this library's own modules), only
  if it is an estimator of this library, a torch module, an optimizer or a data set / loader
  class, and of the kind its parameter takes (a loss for ``criterion``, an optimizer for
  ``optimizer``, a batch iterator for ``iterator_*``, a data set for ``dataset``, a network or
  layer for any other; never a datapipe that opens files). A pipeline's scikit-learn part is
  built by skops from trusted types only (skops's defaults, ``_skeleton.TRUSTED`` and the
  caller's ``trusted=[...]``); any other is refused by name before anything is built.
- **A closed list of what it sets.** Constructor parameters, each checked by role as above, but
  never ``torch_load_kwargs`` (how a later ``load_params`` reads files: ``{"weights_only":
  False}`` there would unpickle code) nor ``compile__options`` (compilers and folders of
  ``torch.compile``), which ``save`` never writes; fitted attributes only those the estimator
  saves (its ``_saved_attributes``), each of its kind (:data:`ATTRIBUTE_KINDS
  <ebmclassifier.saving._allowed_classes.ATTRIBUTE_KINDS>`: a tuple of positive ints for
  ``input_shape_``, a tensor from ``weights.pt`` for ``input_min_``, ...); the states of the
  modules the parameters build, which must fit them.
- **Nothing of how the process runs.** ``verbose``, ``compile`` and the data loaders' process
  settings (``num_workers``, ...) are not taken from a file (:data:`RUNTIME
  <ebmclassifier.saving._allowed_classes.RUNTIME>`); ``n_threads`` is bounded by the cores at
  every call, ``device`` resolved against the machine's.
- **Bounded sizes** (:class:`FileLimits`), checked before anything is decompressed, parsed or
  allocated: the archive's members (exactly those of its format, at most 64 MiB of JSON and
  2 GiB of the others, declared and read, at most 100 times their compressed size), the JSON
  (UTF-8, nested at most 32 deep; a pipeline's skops schema 200), an array of the metadata
  (64 MiB by the dtype it declares, a string dtype without a length by its longest item),
  ``weights.pt`` laid out as ``torch.save`` writes it (stored records, no byte between them),
  its structure (1 million values, counted as a tree) and its tensors (dense, 2 GiB declared);
  the modules the file's parameters build, counted on the meta device against the bytes its
  weights hold for them before anything is built (``_budget.py``).

Each refusal is a ``ValueError`` that names the file and the rule or limit. Parameters that are
neither plain values nor such classes (callbacks, ``train_split``, an ``augmentation``, a
network class of one's own) are not saved; pass them to :func:`load`. A file from anyone is
therefore safe to *load*; what it computes is still the network of whoever trained it, and
the parameters it sets (``max_epochs``, ``batch_size``, ...) are the cost of a later ``fit``.
What JSON and skops cannot hold is refused at save time: a constraint's ``constraints`` (user
callables), torch objects outside the library's estimators.

Pickle (and joblib) save everything, including such parameters, but unpickling runs code from
the file: only unpickle files you trust. See the user guide's "Saving and deploying".
"""

from ._archive import FileLimits
from ._dispatch import load, save

__all__ = ["FileLimits", "load", "save"]
