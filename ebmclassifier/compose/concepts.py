"""ConceptComposition: one classifier per concept, composed into energies and sampled.

A thin face over :mod:`ebmclassifier.compose.energies` (class-conditional energies, conjunction,
disjunction, :class:`~ebmclassifier.compose.Not`) and :mod:`ebmclassifier.sampling`; the
experts are held as in ``_experts.py``.
"""

from __future__ import annotations

import copy
import math
import warnings
from numbers import Real

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted

from .._utils.parameters import ParamChecker
from ..sampling import GaussianStart, informative_start, uniform_start
from ..sampling.langevin import SAMPLERS, run_sampler
from ._experts import ExpertsBase
from .energies import class_energy, compile_query, conjunction, disjunction, satisfying_rows

__all__ = ["ConceptComposition"]


class ConceptComposition(ExpertsBase):
    """One classifier per concept, composed into energies of concept values, and sampled.

    Expert ``k`` classifies concept ``k`` (a digit, an attribute, ...) with its own labels and
    logits ``f_k(x)``; its class-conditional energy ``E_k(x, y) = -f_k(x)[y]`` is the energy of
    the joint ``p_k(x, y)`` (Grathwohl et al., 2020). ``fit(X, Y)`` fits expert ``k`` on column
    ``k`` of ``Y``, as :class:`~sklearn.multioutput.MultiOutputClassifier` does.
    :meth:`energy` scores, and :meth:`sample` draws from ``exp(-E)`` of, a query written in
    this grammar (Du, Li & Mordatch, 2020):

    - ``concepts`` is a dict ``{concept name: value}``, the conjunction of its entries:
      ``E(x) = sum_k w_k E_k(x, value_k)`` over the named concepts (an unnamed concept adds
      nothing); or a list of such dicts, their disjunction ``-logsumexp_j(-E_j(x))``; or
      ``None``, every concept with every label (``sum_k w_k E_k(x)``).
    - a value is a label of that concept's expert (``E_k(x, y) = -f_k(x)[y]``); a list (or
      tuple, set, array) of values, any of them (``-logsumexp_{y in S} f_k(x)[y]``); or
      :class:`~ebmclassifier.compose.Not` ``(value)``, every label except those of ``value``
      (the complement within the expert's labels). Values nest: ``Not([3, 5])``,
      ``[Not(1), 2]``.
    - each constraint ``(name, energy_fn, weight)`` adds ``weight * energy_fn(x)`` to every
      query, outside the disjunction: prior knowledge written as an energy.

    Du et al.'s negation, ``E_1 - a E_2``, is a negative weight of an expert; it is unbounded
    below away from the data, so sampling it runs away unless a constraint or the other
    terms hold the chains.

    Parameters
    ----------
    estimators : list of (str, estimator) pairs
        One expert per concept; the name is the concept's name in queries. The library's
        estimators (anything whose fitted ``module_`` maps a batch to logits), all on the same
        input, which each must take as float32 samples as they are (``NGEBMClassifier``,
        ``JEMClassifier``, ``LatentStructureClassifier(structure="categorical")``; token ids
        are refused at ``fit``); a fitted one may be passed as
        :class:`sklearn.frozen.FrozenEstimator`.
    weights : array-like of shape (n_concepts,) or None, default=None
        ``w_k``, any finite numbers; ``None`` weighs every concept 1.
    constraints : list of (str, callable, float) or None, default=None
        Extra energy terms: ``energy_fn(x: Tensor of shape (n, *input_shape)) -> Tensor (n,)``,
        called on batches on the first expert's device, differentiable for sampling. Use
        module-level functions if the composition is to be pickled.
    batch_size : int, default=256
        Rows per batch when scoring.

    Attributes
    ----------
    estimators_ : list of estimators
    named_estimators_ : sklearn.utils.Bunch
    classes_ : list of ndarray
        The labels of each concept.
    class_count_, class_prior_ : list of ndarray
        Per concept, in the order of its ``classes_``: the samples of each label in ``Y``, each
        counted with its ``sample_weight``, and their shares.
    weights_ : ndarray of shape (n_concepts,)
    combinations_ : ndarray of shape (n_combinations, n_concepts)
        The encoded concept combinations seen in ``Y``, the classes of ``start_``.
    start_ : ebmclassifier.sampling.GaussianStart
        One Gaussian per combination, fitted to its training samples (JEM++'s informative
        start over the combinations): where :meth:`sample` starts its chains.
    n_features_in_ : int
    input_shape_ : tuple of int

    References
    ----------
    .. [1] Du, Y., Li, S. and Mordatch, I. "Compositional Visual Generation with Energy Based
       Models". NeurIPS 2020.
    .. [2] Grathwohl, W., et al. "Your Classifier is Secretly an Energy Based Model and You
       Should Treat it Like One". ICLR 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import make_blobs
    >>> from ebmclassifier import ConceptComposition, NGEBMClassifier
    >>> from ebmclassifier.compose import Not
    >>> X, y = make_blobs(90, n_features=4, centers=3, random_state=0)
    >>> Y = np.column_stack([y, np.where(X[:, 0] > 0, "right", "left")])
    >>> net = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
    >>> concepts = ConceptComposition([("blob", net), ("side", net)]).fit(X, Y)
    >>> concepts.classes_[1]
    array(['left', 'right'], dtype='<U5')
    >>> concepts.energy(X[:2], {"blob": ["1", "2"], "side": Not("left")}).shape
    (2,)
    """

    def __init__(self, estimators, weights=None, constraints=None, batch_size: int = 256) -> None:
        self.estimators = estimators
        self.weights = weights
        self.constraints = constraints
        self.batch_size = batch_size

    def _check_params(self) -> None:
        check = ParamChecker(self)
        self._check_common_params(check)
        constraints = [] if self.constraints is None else self.constraints
        try:
            triples = [(name, fn, weight) for name, fn, weight in constraints]
        except (TypeError, ValueError):
            triples = None
        names = [t[0] for t in triples or []]
        if triples is None or not all(
            isinstance(name, str)
            and names.count(name) == 1
            and callable(fn)
            and isinstance(weight, Real)
            and not isinstance(weight, bool)
            and math.isfinite(weight)
            for name, fn, weight in triples
        ):
            check.add(
                "The 'constraints' parameter of ConceptComposition must be None or a list of "
                "(name, energy_fn, weight) with unique str names, callable energy_fn(x) -> "
                f"Tensor of shape (n,) and finite float weights. Got {self.constraints!r}."
            )
        check.raise_if_any()

    def fit(self, X, Y, sample_weight=None):
        """Fit a clone of expert ``k`` on ``(X, Y[:, k])``, and the chains' start.

        Parameters
        ----------
        X : array-like of shape ``(n_samples, n_features)`` or ``(n_samples, *input_shape)``
        Y : array-like of shape (n_samples, n_concepts)
            One column per expert, in the order of ``estimators``; columns keep their own
            types (a list of rows or a DataFrame may mix ints and strings).
        sample_weight : array-like of shape (n_samples,), number or None, default=None
            Passed to every expert's ``fit`` (a ``FrozenEstimator`` is not refit); checked
            here (all-zero weights are refused). The combinations seen and the chains' start
            are those of the samples of positive weight. With metadata routing enabled,
            ``set_fit_request(sample_weight=True)`` routes it here.

        Returns
        -------
        self

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import ConceptComposition, NGEBMClassifier
        >>> X, y = make_blobs(90, n_features=4, centers=3, random_state=0)
        >>> Y = [[int(label), "big" if x[1] > 2 else "small"] for label, x in zip(y, X)]
        >>> net = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
        >>> concepts = ConceptComposition([("blob", net), ("size", net)]).fit(X, Y)
        >>> [c.tolist() for c in concepts.classes_], concepts.combinations_.shape[1]
        ([[0, 1, 2], ['big', 'small']], 2)
        """
        self._check_params()
        X = self._validate_X(X, reset=True)
        columns = self._columns(Y, len(X))
        weights = self._check_sample_weight(sample_weight, len(X))
        self._fit_experts(X, columns, sample_weight)
        self.classes_ = [expert.classes_ for expert in self.estimators_]
        if weights is not None:  # what fit learns of the data: the samples that count
            X, columns = X[weights > 0], [column[weights > 0] for column in columns]
            weights = weights[weights > 0]
        names = [name for name, _ in self.estimators]
        counted = [
            self._count_classes(column, classes, weights, f"Column {k} of Y", f"the expert {n!r}")
            for k, (column, classes, n) in enumerate(
                zip(columns, self.classes_, names, strict=True)
            )
        ]
        self.class_count_, self.class_prior_ = (list(parts) for parts in zip(*counted, strict=True))
        codes = np.column_stack(
            [np.searchsorted(classes, c) for c, classes in zip(columns, self.classes_, strict=True)]
        )  # (n, n_concepts)
        self.combinations_, combination = np.unique(codes, axis=0, return_inverse=True)
        self.start_ = informative_start(
            torch.from_numpy(X), torch.from_numpy(combination.ravel()), len(self.combinations_)
        )
        return self

    def _columns(self, Y, n_samples: int) -> list:
        """The columns of ``Y``, each with its own dtype; ValueError on a bad shape."""
        if Y is None:
            raise ValueError("ConceptComposition requires Y to be passed, but Y is None.")
        if hasattr(Y, "iloc"):  # a DataFrame: its columns keep their dtypes
            shape, columns = Y.shape, [Y.iloc[:, k].to_numpy() for k in range(Y.shape[1])]
        else:
            Y = np.asarray(Y, dtype=object)
            shape = Y.shape
            columns = (
                [np.asarray(Y[:, k].tolist()) for k in range(Y.shape[1])] if Y.ndim == 2 else []
            )
        n_concepts = len(self.estimators)
        if len(shape) != 2 or shape[1] != n_concepts or shape[0] != n_samples:
            raise ValueError(
                f"Y must have shape (n_samples, n_concepts) = ({n_samples}, {n_concepts}), one "
                f"column per expert. Got shape {shape!r}"
                + ("; reshape a single column with Y.reshape(-1, 1)." if len(shape) == 1 else ".")
            )
        return columns

    # ------------------------------------------------------------------ queries

    def _clauses(self, concepts) -> list:
        """Compile a query (:func:`~ebmclassifier.compose.compile_query`); ValueError if bad."""
        return compile_query(concepts, [name for name, _ in self.estimators], self.classes_)

    def _energy_fn(self, clauses: list):
        """The composed energy of a compiled query, a function of a batch ``x``; the masks and
        weights go to the device here, once per public call, not at every batch or step."""
        device, dtype = self._device(), torch.float32  # that of the validated input
        clauses = [
            (
                [(k, torch.as_tensor(allowed, device=device)) for k, allowed in clause],
                torch.tensor([self.weights_[k] for k, _ in clause], dtype=dtype, device=device),
            )
            for clause in clauses
        ]
        needed = sorted({k for clause, _ in clauses for k, _ in clause})
        constraints = [] if self.constraints is None else list(self.constraints)
        constraint_weights = torch.tensor(
            [w for _, _, w in constraints], dtype=dtype, device=device
        )

        def composed_energy(x: torch.Tensor) -> torch.Tensor:
            logits = {k: self._expert_logits(k, x) for k in needed}
            per_clause = []
            for clause, weights in clauses:
                terms = [class_energy(logits[k], allowed) for k, allowed in clause]
                per_clause.append(self._sum(terms, weights, x))
            total = per_clause[0] if len(per_clause) == 1 else disjunction(torch.stack(per_clause))
            terms = [self._constraint(name, fn, x) for name, fn, _ in constraints]
            return total + self._sum(terms, constraint_weights, x)

        return composed_energy

    @staticmethod
    def _sum(terms: list, weights: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        if not terms:
            return x.new_zeros(len(x))
        return conjunction(torch.stack(terms), weights)

    @staticmethod
    def _constraint(name: str, fn, x: torch.Tensor) -> torch.Tensor:
        value = fn(x)
        if not isinstance(value, torch.Tensor) or value.shape != (len(x),):
            shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise ValueError(
                f"The constraint {name!r} must return a Tensor of shape ({len(x)},), one "
                f"energy per sample. Got {shape!r}."
            )
        return value.to(x)

    # ------------------------------------------------------------------ scoring

    def energy(self, X, concepts=None) -> np.ndarray:
        """Energy of each sample under a query of concept values (see the class docstring).

        Parameters
        ----------
        X : array-like of the training input's sample shape
        concepts : dict, list of dict, or None, default=None
            ``{"digit": 3, "stroke": "thick"}`` is ``w_1 E_1(x, 3) + w_2 E_2(x, "thick")``; a
            list of dicts is their disjunction; ``None`` is every concept with any label.
            The constraints are added to every query.

        Returns
        -------
        ndarray of shape (n_samples,)
            The lower, the better ``x`` fits the query.

        Raises
        ------
        ValueError
            On an unknown concept or value, or a value that allows no label.

        Examples
        --------
        Conjunctions add; a disjunction is below each of its terms:

        >>> import numpy as np
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import ConceptComposition, NGEBMClassifier
        >>> X, y = make_blobs(90, n_features=4, centers=3, random_state=0)
        >>> Y = np.column_stack([y, X[:, 0] > 0])
        >>> net = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
        >>> model = ConceptComposition([("blob", net), ("right", net)]).fit(X, Y)
        >>> both = model.energy(X, {"blob": 1, "right": 0})
        >>> np.allclose(both, model.energy(X, {"blob": 1}) + model.energy(X, {"right": 0}))
        True
        >>> either = model.energy(X, [{"blob": 1}, {"right": 0}])
        >>> bool((either <= np.minimum(model.energy(X, {"blob": 1}),
        ...                            model.energy(X, {"right": 0})) + 1e-6).all())
        True
        """
        check_is_fitted(self)
        fn = self._energy_fn(self._clauses(concepts))
        return self._map(X, fn)

    def predict_proba(self, X) -> list:
        """Each concept's class probabilities, ``softmax(f_k(x))``.

        Parameters
        ----------
        X : array-like

        Returns
        -------
        list of ndarray of shape (n_samples, n_classes_k)
            One per concept, columns in the order of ``classes_[k]``.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import ConceptComposition, NGEBMClassifier
        >>> X, y = make_blobs(90, n_features=4, centers=3, random_state=0)
        >>> net = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
        >>> model = ConceptComposition([("blob", net), ("right", net)])
        >>> proba = model.fit(X, np.column_stack([y, X[:, 0] > 0])).predict_proba(X)
        >>> [p.shape for p in proba]
        [(90, 3), (90, 2)]
        """
        check_is_fitted(self)
        n = len(self.estimators_)
        stacked = self._map(
            X,
            lambda x: torch.cat([torch.softmax(self._expert_logits(k, x), 1) for k in range(n)], 1),
        )
        return np.split(stacked, np.cumsum([len(c) for c in self.classes_])[:-1], axis=1)

    def predict(self, X) -> np.ndarray:
        """The most probable label of each concept.

        Parameters
        ----------
        X : array-like

        Returns
        -------
        ndarray of shape (n_samples, n_concepts)
            Column ``k`` holds labels of ``classes_[k]`` (an object array if the concepts'
            label types differ).

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import ConceptComposition, NGEBMClassifier
        >>> X, y = make_blobs(90, n_features=4, centers=3, random_state=0)
        >>> net = NGEBMClassifier(max_epochs=2, module__hidden_sizes=(8,), random_state=0)
        >>> Y = [[int(label), "right" if x[0] > 0 else "left"] for label, x in zip(y, X)]
        >>> predicted = ConceptComposition([("blob", net), ("side", net)]).fit(X, Y).predict(X)
        >>> predicted.shape, predicted.dtype, predicted[0, 1] in ("left", "right")
        ((90, 2), dtype('O'), True)
        """
        columns = [
            c[p.argmax(axis=1)] for c, p in zip(self.classes_, self.predict_proba(X), strict=True)
        ]
        if len({column.dtype for column in columns}) == 1:
            return np.column_stack(columns)
        return np.column_stack([column.astype(object) for column in columns])

    def score(self, X, Y) -> float:
        """Subset accuracy: the fraction of samples with every concept right.

        Parameters
        ----------
        X : array-like
        Y : array-like of shape (n_samples, n_concepts)

        Returns
        -------
        float

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import ConceptComposition, NGEBMClassifier
        >>> X, y = make_blobs(90, n_features=4, centers=3, random_state=0)
        >>> Y = np.column_stack([y, X[:, 0] > 0])
        >>> net = NGEBMClassifier(max_epochs=20, module__hidden_sizes=(8,), random_state=0)
        >>> model = ConceptComposition([("blob", net), ("right", net)]).fit(X, Y)
        >>> model.score(X, Y) > 0.5
        True
        """
        predicted = self.predict(X)
        columns = self._columns(Y, len(predicted))
        return float(np.mean(np.all([predicted[:, k] == c for k, c in enumerate(columns)], 0)))

    # ------------------------------------------------------------------ sampling

    def sample(
        self,
        n: int,
        concepts=None,
        *,
        n_steps: int = 100,
        sampler: str = "sgld",
        step_size: float = 1.0,
        noise: float = 0.01,
        grad_clip: float = 0.01,
        start="conditional",
        random_state: int | None = None,
    ) -> np.ndarray:
        """Draw inputs from ``exp(-E(x))`` of a query by Langevin dynamics.

        The chains start as :class:`~ebmclassifier.JEMClassifier` starts them (JEM++'s
        informative start, [1]_), from Gaussians fitted to the training samples, here one per
        combination of concept values seen in ``fit`` (``start_``), and run ``n_steps`` steps
        of :func:`~ebmclassifier.sampling.sgld` or
        :func:`~ebmclassifier.sampling.proximal_sgld` on the composed energy, constraints
        included. Meaningful for experts trained as generative models (JEM); any expert works.

        Parameters
        ----------
        n : int
            Number of samples.
        concepts : dict, list of dict, or None, default=None
            The query, as in :meth:`energy`.
        n_steps : int, default=100
        sampler : {"sgld", "proximal"}, default="sgld"
            ``"proximal"`` clips each gradient coordinate to ``grad_clip`` times the feature's
            training range and clamps the samples to that range (JEM++).
        step_size : float, default=1.0
        noise : float, default=0.01
            Standard deviation of the noise of each step.
        grad_clip : float, default=0.01
            For ``sampler="proximal"``, a fraction of each feature's range.
        start : {"conditional", "marginal", "uniform"} or array-like, default="conditional"
            ``"conditional"``: the Gaussians of the seen combinations that satisfy the query,
            by their frequency (all of them, with a warning, if none does: a combination never
            seen in training); ``"marginal"``: all combinations by frequency, so the energy
            alone makes the samples fit the query; ``"uniform"``: uniform noise over the
            training range (JEM); or the starting points, shaped ``(n, *input_shape)``.
        random_state : int or None, default=None
            Seeds the start and the noise.

        Returns
        -------
        ndarray of shape ``(n, *input_shape)``
            float32.

        References
        ----------
        .. [1] Yang, X. and Ji, S. "JEM++: Improved Techniques for Training JEM". ICCV 2021.

        Examples
        --------
        Sampling lowers the composed energy from where the chains start:

        >>> import numpy as np
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import ConceptComposition, JEMClassifier
        >>> X, y = make_blobs(90, n_features=4, centers=3, random_state=0)
        >>> jem = JEMClassifier(max_epochs=2, sgld_steps=5, buffer_size=50,
        ...                     module__hidden_sizes=(8,), random_state=0)
        >>> model = ConceptComposition([("blob", jem), ("right", jem)])
        >>> model = model.fit(X, np.column_stack([y, X[:, 0] > 0]))
        >>> query = {"blob": 2, "right": 1}
        >>> x0 = model.sample(20, query, n_steps=0, start="marginal", random_state=0)
        >>> x = model.sample(20, query, n_steps=50, step_size=0.1, start=x0, random_state=0)
        >>> x.shape, bool(model.energy(x, query).mean() < model.energy(x0, query).mean())
        ((20, 4), True)
        """
        check_is_fitted(self)
        check = ParamChecker.of(
            {
                "n": n,
                "n_steps": n_steps,
                "sampler": sampler,
                "step_size": step_size,
                "noise": noise,
                "grad_clip": grad_clip,
                "random_state": random_state,
            }
        )
        check.integer("n", 1)
        check.integer("n_steps", 0)
        check.satisfies("sampler", sampler in SAMPLERS, "'sgld' or 'proximal'")
        check.real("step_size", 0.0)
        check.real("noise", 0.0)
        check.real("grad_clip", 0.0)
        check.integer("random_state", allow_none=True)
        check.raise_if_any()
        clauses = self._clauses(concepts)
        self._eval()
        device = self._device()
        generator = torch.Generator(device=device)
        if random_state is None:
            generator.seed()  # a fresh, non-deterministic seed
        else:
            generator.manual_seed(int(random_state))
        gaussians = self._start_on(device)
        x0 = self._start(int(n), clauses, start, gaussians, generator)
        x = run_sampler(
            sampler,
            self._energy_fn(clauses),
            x0,
            n_steps=n_steps,
            step_size=step_size,
            noise=noise,
            low=gaussians.low,
            high=gaussians.high,
            clip_fraction=grad_clip,
            generator=generator,
        )
        return x.cpu().numpy()

    def _start_on(self, device: torch.device) -> GaussianStart:
        """``start_`` on ``device``: itself, or a copy there (``Module.to`` moves in place, and
        the fitted start stays where ``fit`` put it)."""
        if self.start_.means.device == device:
            return self.start_
        return copy.deepcopy(self.start_).to(device)

    def _start(self, n: int, clauses: list, start, gaussians, generator) -> torch.Tensor:
        """The chains' starting points, shaped ``(n, *input_shape)`` on the device of
        ``gaussians`` (``start_`` there)."""
        device = gaussians.means.device
        if isinstance(start, str) and start == "uniform":
            return uniform_start(gaussians.low, gaussians.high).sample(n, generator=generator)
        if isinstance(start, str) and start in ("conditional", "marginal"):
            match = np.ones(len(self.combinations_), dtype=bool)
            if start == "conditional":
                match = satisfying_rows(self.combinations_, clauses)
                if not match.any():
                    warnings.warn(
                        "No training sample has a combination of concept values that fits the "
                        "query; the chains start from every combination (start='marginal').",
                        UserWarning,
                        stacklevel=3,
                    )
                    match[:] = True
            weights = gaussians.log_priors.exp() * torch.as_tensor(match, device=device)
            which = torch.multinomial(weights, n, replacement=True, generator=generator)
            return gaussians.sample(n, y=which, generator=generator)
        if isinstance(start, str):
            raise ValueError(
                "start must be 'conditional', 'marginal', 'uniform' or an array of starting "
                f"points. Got {start!r} instead."
            )
        x0 = self._validate_X(start, reset=False)
        if len(x0) != n:
            raise ValueError(f"start must hold n={n} starting points. Got {len(x0)}.")
        return torch.tensor(x0, device=device)
