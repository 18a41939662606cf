"""The network of a latent-structure classifier: encoder -> latent structure -> decoder.

:class:`LatentModel` puts an encoder ``x -> s`` and a decoder ``(x, z) -> logits`` together
around the polytope of its latent (the simplex here;
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

from .categorical.networks import BilinearDecoder
from .categorical.simplex import Simplex
from .methods import polytope_latent_eval
from .polytope import Polytope
from .score_function import RunningMeanBaseline

# BilinearDecoder is re-exported: models pickled by release 0.1 find it here.
__all__ = ["BilinearDecoder", "LatentModel"]


class LatentModel(nn.Module):
    """Encoder ``x -> s`` (K scores) and decoder ``(x, z) -> logits`` with a categorical latent.

    Parameters
    ----------
    encoder : nn.Module
        Maps a batch of inputs to scores of shape (n, K).
    decoder : nn.Module
        Called as ``decoder(x, z)`` with ``z`` of shape (n, K) on the simplex (one-hot or
        relaxed); returns logits of shape (n, n_classes).
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
        The polytope of the latent: the simplex.

    Examples
    --------
    >>> import torch
    >>> model = LatentModel(torch.nn.Linear(4, 3), BilinearDecoder(3, 4, 2), gradient="spigot")
    >>> x = torch.randn(5, 4)
    >>> model.latent(x).sum(dim=1)  # one-hot rows: the MAP latent
    tensor([1., 1., 1., 1., 1.])
    >>> model(x).shape
    torch.Size([5, 2])
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
        return Simplex()

    def sizes(self, x: torch.Tensor) -> torch.Tensor | None:
        """What the polytope needs of a batch besides the scores: None for the simplex.

        Parameters
        ----------
        x : Tensor of shape (n, ...)
            A batch of inputs.

        Returns
        -------
        None
            Subclasses return a tensor (the sentence lengths of a batch of token ids).

        Examples
        --------
        >>> import torch
        >>> model = LatentModel(torch.nn.Linear(4, 3), BilinearDecoder(3, 4, 2), "spigot")
        >>> model.sizes(torch.randn(5, 4)) is None
        True
        """
        return None

    def latent(self, x: torch.Tensor) -> torch.Tensor:
        """The deterministic latent (n, K) fed to the decoder at prediction time.

        The MAP one-hot ``onehot(argmax(s))``, or the relaxed point of a relaxation (see
        :func:`~ebmclassifier.latent.methods.polytope_latent_eval`).

        Parameters
        ----------
        x : Tensor of shape (n, ...)
            A batch of inputs, as the encoder takes them.

        Returns
        -------
        Tensor of shape (n, K)
            Rows on the probability simplex.

        Examples
        --------
        >>> import torch
        >>> encoder, x = torch.nn.Linear(4, 3), torch.randn(5, 4)
        >>> z = LatentModel(encoder, BilinearDecoder(3, 4, 2), gradient="spigot").latent(x)
        >>> torch.equal(z, torch.eye(3)[encoder(x).argmax(dim=1)])  # the MAP one-hot
        True
        >>> relaxed = LatentModel(encoder, BilinearDecoder(3, 4, 2), gradient="softmax").latent(x)
        >>> torch.allclose(relaxed, torch.softmax(encoder(x), dim=1))
        True
        """
        sizes = self.sizes(x)  # before the encoder: a subclass may check x there
        return polytope_latent_eval(
            self.polytope, self.encoder(x), sizes, self.gradient, self.temperature
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(x, self.latent(x))

    def marginals(self, x: torch.Tensor) -> torch.Tensor:
        """The mean of the encoder's distribution ``p(z) ∝ exp(<s, z>)``: ``softmax(s)``.

        Parameters
        ----------
        x : Tensor of shape (n, ...)
            A batch of inputs.

        Returns
        -------
        Tensor of shape (n, K)
            ``p(z = k | x)``, without gradient.

        Examples
        --------
        >>> import torch
        >>> encoder, x = torch.nn.Linear(4, 3), torch.randn(5, 4)
        >>> model = LatentModel(encoder, BilinearDecoder(3, 4, 2), gradient="spigot")
        >>> torch.allclose(model.marginals(x), torch.softmax(encoder(x), dim=1))
        True
        """
        sizes = self.sizes(x)
        with torch.no_grad():
            return self.polytope.marginals(self.encoder(x), sizes)

    def predict_latent(self, x: torch.Tensor) -> torch.Tensor:
        """The MAP latent of each sample, as an index: ``argmax_k s_k(x)``.

        Parameters
        ----------
        x : Tensor of shape (n, ...)
            A batch of inputs.

        Returns
        -------
        Tensor of shape (n,), int64

        Examples
        --------
        >>> import torch
        >>> encoder, x = torch.nn.Linear(4, 3), torch.randn(5, 4)
        >>> model = LatentModel(encoder, BilinearDecoder(3, 4, 2), gradient="spigot")
        >>> torch.equal(model.predict_latent(x), encoder(x).argmax(dim=1))
        True
        """
        with torch.no_grad():
            return self.encoder(x).argmax(dim=-1)

    def latent_features(self, x: torch.Tensor) -> torch.Tensor:
        """The marginals as one row of features per sample (the estimator's ``transform``).

        Parameters
        ----------
        x : Tensor of shape (n, ...)
            A batch of inputs.

        Returns
        -------
        Tensor of shape (n, K)
            :meth:`marginals`.

        Examples
        --------
        >>> import torch
        >>> model = LatentModel(torch.nn.Linear(4, 3), BilinearDecoder(3, 4, 2), "spigot")
        >>> model.latent_features(torch.randn(5, 4)).shape
        torch.Size([5, 3])
        """
        return self.marginals(x)
