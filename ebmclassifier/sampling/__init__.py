"""Samplers for energy-based models: SGLD, proximal SGLD, a replay buffer and its starts.

Functional core on tensors. Nothing here knows about scikit-learn: an energy is any callable
``energy_fn(x) -> (n,)`` mapping a batch to one energy per sample, lower meaning more likely
under p(x) ~ exp(-E(x)). SGLD and the replay buffer are JEM's [1]_; proximal SGLD and the
informative start are JEM++'s [2]_.

References
----------
.. [1] Grathwohl, W., Wang, K.-C., Jacobsen, J.-H., Duvenaud, D., Norouzi, M. and Swersky, K.
   "Your Classifier is Secretly an Energy Based Model and You Should Treat it Like One", ICLR 2020
   (SGLD, eq. 11; persistent contrastive divergence with a replay buffer, Algorithm 1).
.. [2] Yang, X. and Ji, S. "JEM++: Improved Techniques for Training JEM", ICCV 2021 (proximal SGLD,
   section 3.1; informative initialisation, section 3.3).
"""

from .buffer import ReplayBuffer
from .langevin import proximal_sgld, sgld
from .starts import (
    GaussianStart,
    UniformStart,
    informative_start,
    informative_start_in_chunks,
    uniform_start,
)

__all__ = [
    "sgld",
    "proximal_sgld",
    "UniformStart",
    "GaussianStart",
    "uniform_start",
    "informative_start",
    "informative_start_in_chunks",
    "ReplayBuffer",
]
