"""Class-incremental learning: the growing output layer, replay, and the estimators' face.

A wing, core and face side by side. The pieces that :class:`~ebmclassifier.NGEBMClassifier`
and :class:`~ebmclassifier.JEMClassifier` use with ``class_incremental=True``, as functions on
modules, optimizers and arrays:

- :func:`output_layer` finds the network's last linear layer (``module.last_layer``, as the
  networks of :mod:`ebmclassifier.nn` name it, or the last layer of an ``nn.Sequential``);
  :func:`grow_output_layer` gives it rows for new classes, leaving every old row and every
  other weight as it was, and carries the optimizer's state over (``output_layer.py``);
- :func:`reservoir_update` keeps a uniform sample of each class's stream of training samples
  (Vitter's reservoir sampling, "Algorithm R" [2]_), :func:`class_reservoirs` one per class,
  and :func:`replay_weights` weighs the replayed rows (``reservoir.py``);
- :func:`generate_class_samples` draws samples of old classes from the model itself by
  proximal SGLD on the class-conditional energy ``E(x, y) = -f(x)[y]`` of [3]_: the
  energy-based model's own rehearsal, which stores no training sample (deep generative
  replay, [4]_, with the classifier as its own generator; ``generated.py``).

``ClassIncrementalMixin`` (``_mixin.py``), the estimators' face over them, resolves ``"auto"``
(:data:`AUTO`: with ``class_incremental=True`` batch negatives, 20 stored and 100 generated
samples per class, the best of the methods measured in ``docs/continual.md``), grows the
classes, mixes replay into each fit's data and warns when an energy term meets restricted
negatives without replay.

The objective that leaves absent classes alone, Li et al.'s [1]_, is
:func:`ebmclassifier.losses.negatives_cross_entropy`: the estimators pass ``negatives`` to
their loss (:func:`~ebmclassifier.losses.ngebm_loss`, :func:`~ebmclassifier.losses.jem_loss`),
which restricts the classification term where it builds it.

References
----------
.. [1] Li, S., Du, Y., van de Ven, G. M. and Mordatch, I. "Energy-Based Models for Continual
   Learning". CoLLAs 2022 (arXiv:2011.12216, 2020).
.. [2] Vitter, J. S. "Random sampling with a reservoir". ACM Transactions on Mathematical
   Software 11(1), 1985.
.. [3] Grathwohl, W., et al. "Your Classifier is Secretly an Energy Based Model and You
   Should Treat it Like One". ICLR 2020.
.. [4] Shin, H., Lee, J. K., Kim, J. and Kim, J. "Continual Learning with Deep Generative
   Replay". NeurIPS 2017.
"""

from .generated import generate_class_samples
from .output_layer import grow_output_layer, output_layer
from .reservoir import class_reservoirs, replay_weights, reservoir_update

__all__ = [
    "class_reservoirs",
    "generate_class_samples",
    "grow_output_layer",
    "output_layer",
    "replay_weights",
    "reservoir_update",
]
