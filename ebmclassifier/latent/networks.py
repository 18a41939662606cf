"""The network of a latent-structure classifier: encoder -> latent structure -> decoder.

:class:`LatentModel` puts an encoder ``x -> s`` and a decoder ``(x, z) -> logits`` together
around the polytope of its latent, whichever it is: its subclasses name the structure
(:class:`~ebmclassifier.latent.categorical.networks.CategoricalLatentModel` on the simplex,
:class:`~ebmclassifier.latent.trees.networks.TreeLatentModel` for dependency trees). Its
``forward`` is the prediction path (``x -> logits`` with the deterministic latent), which is all
the shared estimator base needs for ``predict_proba``, ``energy`` and ``score_ood``. Training
goes through :func:`~ebmclassifier.latent.methods.polytope_latent` on :attr:`LatentModel.polytope`
instead (see :class:`~ebmclassifier.latent.classifier.LatentStructureClassifier`). The default
encoders and decoders of each structure are in :mod:`ebmclassifier.latent.categorical.networks`
and :mod:`ebmclassifier.latent.trees.networks`.
"""

from __future__ import annotations

import torch
from torch import nn

from .._utils.precision import full_precision
from .methods import polytope_latent_eval
from .polytope import Polytope
from .score_function import RunningMeanBaseline

__all__ = ["LatentModel"]


class LatentModel(nn.Module):
    """Encoder ``x -> s`` and decoder ``(x, z) -> logits`` around the polytope of a latent.

    What every structure shares; a subclass gives its :attr:`polytope`, what a batch needs
    besides its scores (:meth:`sizes`) and how a latent is reported (``predict_latent``,
    ``latent_features``):
    :class:`~ebmclassifier.latent.categorical.networks.CategoricalLatentModel`,
    :class:`~ebmclassifier.latent.trees.networks.TreeLatentModel`.

    Parameters
    ----------
    encoder : nn.Module
        Maps a batch of inputs to the scores ``s`` (B, ...) of the parts of a structure.
    decoder : nn.Module
        Called as ``decoder(x, z)`` with ``z`` a point of the polytope (a structure, or a
        relaxed point); returns logits of shape (B, n_classes).
    gradient : str
        The training method; decides the deterministic latent of :meth:`forward` (see
        :func:`~ebmclassifier.latent.methods.polytope_latent_eval`).
    temperature : float
        ``tau`` of the Gumbel methods.

    Attributes
    ----------
    baseline : RunningMeanBaseline
        The score-function baseline; a buffer, so it moves and pickles with the model.
    polytope : Polytope
        The polytope of the latent.

    Examples
    --------
    >>> import torch
    >>> from ebmclassifier.latent.categorical.networks import (
    ...     BilinearDecoder, CategoricalLatentModel)
    >>> model = CategoricalLatentModel(torch.nn.Linear(4, 3), BilinearDecoder(3, 4, 2), "spigot")
    >>> isinstance(model, LatentModel), model(torch.randn(5, 4)).shape
    (True, torch.Size([5, 2]))
    """

    def __init__(
        self, encoder: nn.Module, decoder: nn.Module, gradient: str, temperature: float = 1.0
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.gradient = gradient
        self.temperature = temperature
        self.baseline = RunningMeanBaseline()

    @property
    def polytope(self) -> Polytope:
        raise NotImplementedError(f"{type(self).__name__} must name the polytope of its latent.")

    def sizes(self, x: torch.Tensor) -> torch.Tensor | None:
        """What the polytope needs of a batch besides the scores: None unless overridden.

        Parameters
        ----------
        x : Tensor of shape (n, ...)
            A batch of inputs.

        Returns
        -------
        None
            Subclasses may return a tensor (the sentence lengths of a batch of token ids).

        Examples
        --------
        >>> import torch
        >>> from ebmclassifier.latent.categorical.networks import (
        ...     BilinearDecoder, CategoricalLatentModel)
        >>> model = CategoricalLatentModel(torch.nn.Linear(4, 3), BilinearDecoder(3, 4, 2), "ste")
        >>> model.sizes(torch.randn(5, 4)) is None  # the simplex needs nothing more
        True
        """
        return None

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        """The encoder's scores ``s = f(x)``, in float32 also when the encoder ran in half
        precision (``precision="bfloat16"``): the polytope's MAP, projections and marginals
        work on them.

        Parameters
        ----------
        x : Tensor of shape (B, ...)

        Returns
        -------
        Tensor of shape (B, ...)
            The scores of the latent's parts (``(B, K)`` on the simplex).

        Examples
        --------
        >>> import torch
        >>> from ebmclassifier.latent.categorical.networks import (
        ...     BilinearDecoder, CategoricalLatentModel)
        >>> encoder, x = torch.nn.Linear(4, 3), torch.randn(5, 4)
        >>> model = CategoricalLatentModel(encoder, BilinearDecoder(3, 4, 2), "spigot")
        >>> with torch.autocast("cpu", dtype=torch.bfloat16):
        ...     model.scores(x).dtype
        torch.float32
        """
        return full_precision(self.encoder(x))

    def latent(self, x: torch.Tensor) -> torch.Tensor:
        """The deterministic latent (B, ...) fed to the decoder at prediction time.

        The MAP structure (a one-hot row on the simplex, a tree's arcs), or the relaxed point
        of a relaxation (see :func:`~ebmclassifier.latent.methods.polytope_latent_eval`).

        Parameters
        ----------
        x : Tensor of shape (B, ...)
            A batch of inputs, as the encoder takes them.

        Returns
        -------
        Tensor of shape (B, ...)
            A point of the polytope per sample: on the simplex, rows of shape (K,); for trees,
            ``z[b, h, m]`` (B, N + 1, N + 1), the weight of the arc from head ``h`` (0 = the
            root) to word ``m``.

        Examples
        --------
        >>> import torch
        >>> from ebmclassifier.latent.categorical.networks import (
        ...     BilinearDecoder, CategoricalLatentModel)
        >>> encoder, x = torch.nn.Linear(4, 3), torch.randn(5, 4)
        >>> z = CategoricalLatentModel(encoder, BilinearDecoder(3, 4, 2), "spigot").latent(x)
        >>> torch.equal(z, torch.eye(3)[encoder(x).argmax(dim=1)])  # the MAP one-hot
        True
        >>> relaxed = CategoricalLatentModel(encoder, BilinearDecoder(3, 4, 2), "softmax").latent(x)
        >>> torch.allclose(relaxed, torch.softmax(encoder(x), dim=1))  # the relaxed point
        True
        """
        sizes = self.sizes(x)  # before the encoder: a subclass may check x there
        return polytope_latent_eval(
            self.polytope, self.scores(x), sizes, self.gradient, self.temperature
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(x, self.latent(x))

    def marginals(self, x: torch.Tensor) -> torch.Tensor:
        """The mean of the encoder's distribution ``p(z) ∝ exp(<s, z>)``: the marginals.

        Parameters
        ----------
        x : Tensor of shape (B, ...)
            A batch of inputs.

        Returns
        -------
        Tensor of shape (B, ...)
            Without gradient: ``p(z = k | x)`` (``softmax(s)``) on the simplex; for trees, the
            probability ``[b, h, m]`` that word ``m`` has head ``h`` (0 = the root).

        Examples
        --------
        >>> import torch
        >>> from ebmclassifier.latent.categorical.networks import (
        ...     BilinearDecoder, CategoricalLatentModel)
        >>> encoder, x = torch.nn.Linear(4, 3), torch.randn(5, 4)
        >>> model = CategoricalLatentModel(encoder, BilinearDecoder(3, 4, 2), "spigot")
        >>> torch.allclose(model.marginals(x), torch.softmax(encoder(x), dim=1))
        True
        """
        sizes = self.sizes(x)
        with torch.no_grad():
            return self.polytope.marginals(self.scores(x), sizes)
