"""The methods of ``python -m ebmclassifier continual``: what each name builds.

Each method of :data:`~ebmclassifier.experiments._continual_options.METHODS` names an
estimator class with its parameters and a one-line description, which the command's
``--help``, its printed legend and ``report.md`` show. Every method is class-incremental;
those that are not named for a kind of replay have none
(``replay_per_class=0, generated_per_class=0``), so that a row means what its name says;
``ngebm`` and ``jem`` are the estimators with every other parameter at its default.

The regulariser baseline of the continual-learning literature, LwF's distillation (Li &
Hoiem 2016), is :class:`LwFClassifier`: a subclass through the documented ``compute_loss``
hook that adds :func:`distillation_loss` of the previous task's model on the new data. Both
stay private to the command rather than join the continual wing: LwF is the baseline the
library's methods are measured against (and it forgets: docs/continual.md), its task
boundaries are the command's (``remember_model`` before each task), and ``save`` writes no
frozen teacher.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch
import torch.nn.functional as F

from ..jem import JEMClassifier
from ..losses import weighted_mean
from ..ngebm import NGEBMClassifier
from ..nn import LabelConditionedMLP
from ._command import QUIET_FIT
from ._continual_options import METHODS, legend

__all__ = [
    "LwFClassifier",
    "bytes_stored",
    "distillation_loss",
    "make_estimator",
    "merge_coinciding",
    "method_notes",
]


def distillation_loss(
    logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    temperature: float = 2.0,
    sample_weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """LwF's distillation term: ``T^2 KL(softmax(t / T) || softmax(s / T))``, batch mean.

    ``s`` are the student's logits of the old classes and ``t`` the previous model's
    (Li & Hoiem 2016, eq. 2, the cross-entropy of the recorded responses; the KL divergence
    differs from it by the teacher's entropy, a constant, so the gradients are the same).
    The factor ``T^2`` keeps the gradients' scale independent of ``T`` (Hinton et al. 2015).

    Parameters
    ----------
    logits : Tensor of shape (n, k)
        The student's logits of the ``k`` old classes.
    teacher_logits : Tensor of shape (n, k)
        The previous model's logits of the same classes (no gradient is taken through them).
    temperature : float, default=2.0
    sample_weight : Tensor of shape (n,) or None, default=None
        A weighted mean over the samples when given.

    Returns
    -------
    scalar Tensor

    Examples
    --------
    >>> import torch
    >>> s = torch.tensor([[1.0, 0.0]])
    >>> float(distillation_loss(s, s.clone()))  # the same responses: nothing to distil
    0.0
    >>> float(distillation_loss(s, torch.tensor([[0.0, 1.0]]))) > 0
    True
    """
    log_student = F.log_softmax(logits / temperature, dim=1)
    log_teacher = F.log_softmax(teacher_logits.detach() / temperature, dim=1)
    kl = (log_teacher.exp() * (log_teacher - log_student)).sum(dim=1)
    return temperature**2 * weighted_mean(kl, sample_weight)


class LwFClassifier(NGEBMClassifier):
    """NG-EBM plus LwF's distillation of the previous task's model (the regulariser baseline).

    :meth:`remember_model`, called before each new task, freezes a copy of the network and
    its classes; :meth:`compute_loss` then adds ``distill_weight *``
    :func:`distillation_loss` of that copy's logits of its classes on every training batch.

    Parameters
    ----------
    module : torch.nn.Module class or instance, or None, default=None
    distill_weight : float, default=1.0
        LwF's ``lambda_o``.
    temperature : float, default=2.0
        LwF's ``T``.
    **kwargs
        Those of :class:`~ebmclassifier.NGEBMClassifier`.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import make_blobs
    >>> X, y = make_blobs(60, n_features=4, centers=4, random_state=0)
    >>> clf = LwFClassifier(beta=0.0, class_incremental=True, replay_per_class=0,
    ...                     generated_per_class=0, max_epochs=2, random_state=0)
    >>> clf = clf.partial_fit(X[y < 2], y[y < 2])
    >>> clf.remember_model()
    >>> clf.partial_fit(X[y >= 2], y[y >= 2]).classes_.tolist()
    [0, 1, 2, 3]
    """

    def __init__(
        self, module=None, *, distill_weight: float = 1.0, temperature: float = 2.0, **kwargs
    ) -> None:
        super().__init__(module, **kwargs)
        self.distill_weight = distill_weight
        self.temperature = temperature

    def remember_model(self) -> None:
        """Freeze a copy of the network and of ``classes_``: the next task's teacher.

        Returns
        -------
        None
        """
        teacher = copy.deepcopy(self.module_).eval().requires_grad_(False)
        # in a tuple: skorch refuses a module attribute set outside initialize
        self.teacher_ = (teacher, self.classes_.copy())

    def compute_loss(self, X, y, training, sample_weight=None):
        """NG-EBM's loss plus ``distill_weight`` times the distillation term.

        Parameters
        ----------
        X, y, training, sample_weight
            As :meth:`NGEBMClassifier.compute_loss <ebmclassifier.NGEBMClassifier.compute_loss>`.

        Returns
        -------
        loss : scalar Tensor
        logits : Tensor of shape (n, n_classes)
        """
        loss, logits = super().compute_loss(X, y, training, sample_weight)
        if getattr(self, "teacher_", None) is None or not self.distill_weight:
            return loss, logits
        teacher, classes = self.teacher_
        with torch.no_grad():
            old = teacher(X)
        columns = torch.as_tensor(np.searchsorted(self.classes_, classes), device=logits.device)
        term = distillation_loss(logits[:, columns], old, self.temperature, sample_weight)
        return loss + self.distill_weight * term, logits


#: The start of the warning (``ClassIncrementalMixin``) an energy term without replay gives a
#: user's own fit, which the no-replay baselines trigger knowingly.
NO_REPLAY_WARNING = (
    r"\w+\(class_incremental=True, negatives=.*\) with its energy term and no replay"
)


@contextmanager
def expected_quiet(method: str) -> Iterator[None]:
    """Silence, for a no-replay baseline only, the one warning it triggers on purpose.

    Every other warning, and that one for every other method (``--generated 0`` on
    ``ngebm_generated`` is a user's choice, and warns), is shown.
    """
    with warnings.catch_warnings():
        if METHODS[method].no_replay_baseline:
            warnings.filterwarnings("ignore", message=NO_REPLAY_WARNING, category=UserWarning)
        yield


#: The estimator classes the methods name.
_ESTIMATORS = {cls.__name__: cls for cls in (NGEBMClassifier, JEMClassifier, LwFClassifier)}


def make_estimator(method: str, seed: int, config: dict):
    """The estimator of ``method`` for one stream: class-incremental, seeded.

    ``config`` holds ``epochs``, ``lr``, ``device``, ``replay`` and ``generated`` (the sizes
    of the methods whose parameter is ``None`` in :data:`METHODS`), ``generated_steps``,
    ``network`` (``"mlp"`` or ``"conv"``: the data's shape chooses the estimators' default
    network, an MLP for flat features, the ConvNet for signals and images) and ``hidden``
    (the MLP's sizes, or None for the estimator's default).
    """
    spec = METHODS[method]
    sizes = {"replay_per_class": config["replay"], "generated_per_class": config["generated"]}
    params = {k: sizes[k] if v is None else v for k, v in spec.params.items()}
    if spec.label_conditioned:
        params["module"] = LabelConditionedMLP
    if config["network"] == "mlp" and config["hidden"] is not None:
        params["module__hidden_sizes"] = tuple(config["hidden"])
    estimator = _ESTIMATORS[spec.estimator]
    if issubclass(estimator, (NGEBMClassifier, JEMClassifier)):
        params.setdefault("generated_steps", config["generated_steps"])
    return estimator(
        class_incremental=True,
        max_epochs=config["epochs"],
        lr=config["lr"],
        random_state=seed,
        device=config["device"],
        **QUIET_FIT,
        **params,
    )


def bytes_stored(clf, joint_rows: np.ndarray | None = None) -> int:
    """What a method keeps besides its network between tasks, in bytes.

    The reservoir and the generated samples; LwF's frozen copy of the network; for the joint
    upper bound, the training data itself (``joint_rows``, the rows it refits on).
    """
    if joint_rows is not None:
        return int(joint_rows.nbytes)
    total = 0
    for name in ("reservoir_X_", "generated_X_"):
        value = getattr(clf, name, None)
        if value is not None:
            total += value.numel() * value.element_size()
    teacher = getattr(clf, "teacher_", None)
    if teacher is not None:
        total += sum(p.numel() * p.element_size() for p in teacher[0].parameters())
    return int(total)


def merge_coinciding(rows: list[dict], runs: list[dict]) -> list[dict]:
    """Fold each summary row whose runs equal an earlier row's on every seed into that row
    (its ``same_as``): ``ce_batch`` and ``ce_k1`` on two-class tasks, where a batch offers
    one negative, which ``k=1`` draws.

    Parameters
    ----------
    rows : list of dict
        Summary rows with ``data``, ``method``, ``seeds`` and an empty ``same_as``.
    runs : list of dict
        The runs they summarise, with ``accuracy_matrix``.

    Returns
    -------
    list of dict
        The rows kept, in order.
    """
    matrices = {(r["data"], r["method"], r["seed"]): r["accuracy_matrix"] for r in runs}
    kept = []
    for row in rows:
        for earlier in kept:
            same = earlier["data"] == row["data"] and earlier["seeds"] == row["seeds"]
            same = same and all(
                matrices[(row["data"], row["method"], s)]
                == matrices[(row["data"], earlier["method"], s)]
                for s in row["seeds"]
            )
            if same:
                earlier["same_as"].append(row["method"])
                break
        else:
            kept.append(row)
    return kept


def method_notes(summary: list[dict]) -> list[str]:
    """The legend of the methods in ``summary`` and a note per row standing for several.

    Parameters
    ----------
    summary : list of dict
        Rows of ``summarize_runs``.

    Returns
    -------
    list of str
        Markdown lines.
    """
    names = [name for row in summary for name in (row["method"], *row["same_as"])]
    lines = ["Methods:", "", *(f"- {line}" for line in legend(dict.fromkeys(names)).splitlines())]
    lines.append("")
    baselines = [name for name in dict.fromkeys(names) if METHODS[name].no_replay_baseline]
    if baselines:
        lines += [
            f"{' and '.join(baselines)} "
            + ("are the no-replay baselines" if len(baselines) > 1 else "is a no-replay baseline")
            + ": an energy term without replay, run on purpose to show what replay adds, so "
            "the command silences the "
            "warning that combination gives a user's own fit (\"... with its energy term and "
            'no replay learns new classes poorly"); every other warning is shown.',
            "",
        ]
    for row in summary:
        if row["same_as"]:
            why = _WHY_SAME.get((row["method"], *row["same_as"]), "")
            lines.append(
                f"{row['data']}: {' and '.join(row['same_as'])} gave the same accuracies as "
                f"{row['method']} on every seed, so the row and the figures show them once"
                f"{why}."
            )
    return lines


#: Why two methods coincide, where it is known.
_WHY_SAME = {
    ("ce_batch", "ce_k1"): " (a batch of a two-class task offers one negative, which k=1 draws)"
}
