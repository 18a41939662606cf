"""The estimators' machinery: the one family every estimator of the library is built from.

``base.py`` holds :class:`EBMClassifierBase`, the scikit-learn face (parameters, validation,
``fit`` / ``partial_fit``); ``engine.py`` the training engine, the only module that touches skorch
internals, which holds the training capabilities as skorch callbacks: ``resume.py`` (the
training state of a resumable fit), ``checkpoint.py`` (checkpoint files that cannot mix) and
``early_stopping.py`` (scikit-learn's spelling); ``inference.py`` prediction, energies and OOD
scores in batches; ``repr.py`` the short repr; ``progress.py`` the progress bar and the epoch
table; ``parameter_docs.py`` the shared parameter text of the docstrings.
"""
