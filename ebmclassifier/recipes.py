"""The NG-EBM and JEM papers' CIFAR training recipe (``compare --protocol paper``) and schedule.

:func:`paper_protocol` returns the settings of the papers' runs as a plain, JSON-ready dict
(network, epochs, optimizer, learning-rate schedule, batch size, augmentation, loss weights),
with where each value comes from; :func:`paper_callbacks` builds the learning-rate schedule
from skorch's :class:`~skorch.callbacks.LRScheduler` and torch's own schedulers, for the
``callbacks`` parameter of any estimator.

**Where the values come from.** Both papers train with their authors' public scripts, and
the NG-EBM code is a fork of the JEM code with the same optimisation settings:
``train_wrn_ebm.py`` of github.com/wgrathwohl/JEM (commit 7f0779a) and
github.com/chrissweet/NG-EBM (commit 090391b), run with the command each README gives for
CIFAR-10 (``--lr .0001 --optimizer adam --sigma .03 --width 10 --depth 28 --warmup_iters
1000``). From the scripts: Adam with betas (0.9, 0.999) and no weight decay, learning rate
1e-4, a linear warm-up over the first 1000 iterations, decay by 0.3 at epochs 160 and 180,
batches of 64 (the last, incomplete batch dropped), 5,000 training images held out for
validation, WRN-28-10 without normalisation, images scaled to [-1, 1], training
augmentation: reflect-pad by 4 and random 32x32 crop, horizontal flip (not for SVHN), and
Gaussian noise of standard deviation 0.03. NG-EBM's README command weights cross-entropy,
the gradient norm and the energy variance 1 : 1 : 1; JEM's weights cross-entropy and the
generative term 1 : 1 and samples with 20 SGLD steps of step size 1 and noise 0.01 from a
10,000-sample buffer restarted from uniform noise with probability 0.05.

**The number of epochs.** The papers' text (as issue #18 quotes it) trains for 150 epochs,
while the scripts' default, which the README commands leave unchanged, is 200. The decay
epochs 160 and 180 lie beyond 150, so in a 150-epoch run the staircase never fires and the
schedule is the warm-up followed by a constant 1e-4. :func:`paper_protocol` records 150
epochs and the scripts' milestones, and says so in its ``notes``; pass ``max_epochs=200`` to
run the scripts' full schedule.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from skorch.callbacks import LRScheduler
from torch.optim.lr_scheduler import LinearLR, MultiStepLR

from ._utils.parameters import ParamChecker

__all__ = ["PAPER_DATASETS", "paper_protocol", "paper_callbacks"]

#: The data sets :func:`paper_protocol` knows (SVHN is trained without the flip).
PAPER_DATASETS = ("cifar10", "cifar100", "svhn")

_CODE = {
    "jem": "https://github.com/wgrathwohl/JEM/blob/7f0779a0541256a77c50c52971ecdb50a8ce2e66/"
    "train_wrn_ebm.py",
    "ngebm": "https://github.com/chrissweet/NG-EBM/blob/090391b3bdaeeffe6b14984c848c779adea5931e/"
    "train_wrn_ebm.py",
}

_PROTOCOL = {
    "network": "wrn-28-10",
    "max_epochs": 150,
    "batch_size": 64,
    "optimizer": "adam",
    "betas": [0.9, 0.999],
    "weight_decay": 0.0,
    "lr": 1e-4,
    "warmup_iters": 1000,
    "lr_milestones": [160, 180],
    "lr_decay": 0.3,
    "augmentation": {"padding": 4, "padding_mode": "reflect", "flip": True, "noise_std": 0.03},
    "input_scaling": "pixels in [0, 1] mapped to [-1, 1]: (x - 0.5) / 0.5 per channel",
    "n_valid": 5000,
    "drop_last": True,  # the scripts' training loader drops the last incomplete batch
    # The README's 1 : 1 : 1 of CE, gradient norm and energy variance, halved to the
    # library's beta + gamma = 1 (the same direction of descent; Adam ignores the scale).
    "ngebm": {"beta": 0.5, "gamma": 0.5, "energy_var_weight": 0.5},
    "jem": {
        "sgld_steps": 20,
        "sgld_step_size": 1.0,
        "sgld_noise": 0.01,
        "buffer_size": 10000,
        "reinit_freq": 0.05,
        "px_weight": 1.0,
        "sampler": "sgld",
        "buffer_init": "uniform",
    },
    "ngebm_seeds": [101, 202, 303, 404, 505],
    "sources": {
        "jem_code": _CODE["jem"],
        "ngebm_code": _CODE["ngebm"],
        "jem_paper": "Grathwohl et al., 'Your Classifier is Secretly an Energy Based Model "
        "and You Should Treat it Like One', ICLR 2020",
        "ngebm_paper": "Piland et al., 'Non-Generative Energy Based Models', 2023",
    },
    "notes": [
        "max_epochs 150 is the papers' text; the scripts default to 200 epochs, so their "
        "decay at epochs 160 and 180 never fires in a 150-epoch run.",
        "warm-up: step k (from 0) uses lr * (k + 1) / warmup_iters; the scripts use "
        "lr * k / warmup_iters, whose first step has learning rate 0.",
        "noise_std 0.03 is in the scripts' [-1, 1] units, about 0.06 on data standardized "
        "per channel.",
        "the scripts also add the noise at test time; the library never augments at predict time.",
    ],
}


def paper_protocol(dataset: str = "cifar10") -> dict:
    """The training settings of the NG-EBM and JEM papers' runs on ``dataset``.

    Parameters
    ----------
    dataset : {"cifar10", "cifar100", "svhn"}, default="cifar10"

    Returns
    -------
    dict
        A new, JSON-ready dict (lists, no tuples) on every call:

        - ``dataset``, ``n_classes``, ``network`` (``"wrn-28-10"``: a
          :class:`~ebmclassifier.nn.WideResNet` of depth 28 and widen factor 10, no
          batch-norm), ``max_epochs`` (150), ``batch_size`` (64), ``n_valid`` (5000 held
          out), ``drop_last`` (True: the last incomplete batch of an epoch is dropped, so
          an epoch of CIFAR-10's 45,000 training samples is 703 steps), ``input_scaling``;
        - ``optimizer`` (``"adam"``), ``betas``, ``weight_decay``, ``lr`` (1e-4);
        - ``warmup_iters`` (1000), ``lr_milestones`` ([160, 180]) and ``lr_decay`` (0.3), the
          arguments of :func:`paper_callbacks`;
        - ``augmentation``: the keyword arguments of
          :func:`~ebmclassifier.augment.paper_augmentation` (``flip`` is False for SVHN);
        - ``ngebm`` and ``jem``: constructor parameters of
          :class:`~ebmclassifier.NGEBMClassifier` and :class:`~ebmclassifier.JEMClassifier`;
        - ``ngebm_seeds`` (the NG-EBM README's five seeds), ``sources`` and ``notes`` (where
          the library departs from the scripts, and the 150 / 200 epochs question).

    References
    ----------
    .. [1] Grathwohl, W., et al. "Your Classifier is Secretly an Energy Based Model and You
       Should Treat it Like One". ICLR 2020.
    .. [2] Piland, J., et al. "Non-Generative Energy Based Models", 2023.

    Examples
    --------
    >>> from ebmclassifier.recipes import paper_protocol
    >>> protocol = paper_protocol("cifar100")
    >>> protocol["network"], protocol["max_epochs"], protocol["lr"], protocol["n_classes"]
    ('wrn-28-10', 150, 0.0001, 100)
    >>> protocol["warmup_iters"], protocol["lr_milestones"], protocol["lr_decay"]
    (1000, [160, 180], 0.3)
    >>> paper_protocol("svhn")["augmentation"]["flip"]
    False
    """
    if dataset not in PAPER_DATASETS:
        raise ValueError(
            f"Unknown dataset {dataset!r} for paper_protocol: use one of "
            + ", ".join(repr(d) for d in PAPER_DATASETS)
            + "."
        )
    protocol = {"dataset": dataset, "n_classes": 100 if dataset == "cifar100" else 10}
    protocol.update(copy.deepcopy(_PROTOCOL))
    # The scripts mirror CIFAR images but not SVHN digits.
    protocol["augmentation"]["flip"] = dataset != "svhn"
    return protocol


def paper_callbacks(
    warmup_iters: int = 1000,
    lr_milestones: Sequence[int] = (160, 180),
    lr_decay: float = 0.3,
) -> list[tuple[str, LRScheduler]]:
    """The papers' learning-rate schedule as skorch callbacks: linear warm-up, then a staircase.

    With ``lr`` the estimator's learning rate, training step ``k`` (counted from 0 over the
    whole fit) in epoch ``e`` (from 0) runs at

        lr * min(1, (k + 1) / warmup_iters) * lr_decay ** #{m in lr_milestones : m <= e}.

    Two skorch :class:`~skorch.callbacks.LRScheduler` callbacks over torch's schedulers, no
    scheduler of our own: ``"lr_warmup"``, a :class:`~torch.optim.lr_scheduler.LinearLR`
    from ``1 / warmup_iters`` to 1 over ``warmup_iters - 1`` steps, stepped after every
    training batch; and ``"lr_decay"``, a :class:`~torch.optim.lr_scheduler.MultiStepLR`
    stepped after every epoch. Both are chainable (each multiplies the learning rate in use),
    so they compose exactly even when a milestone falls inside the warm-up. The scripts
    start at ``lr * 0 / warmup_iters``; here the first step already moves (``lr /
    warmup_iters``), one step ahead of theirs.

    skorch's ``LRScheduler`` rebuilds its scheduler at the start of each fit call from the
    number of epochs, which is wrong for a scheduler stepped per batch, and a new
    ``MultiStepLR`` decays a second time when the fit starts exactly at a milestone; the
    estimators keep the schedulers' positions (their training state) and restore them when
    the next epoch begins, so that ``partial_fit`` after ``fit``, and a run resumed after a
    kill, follow the schedule of one uninterrupted ``fit`` (``tests/_estimator/test_resume.py``).

    Parameters
    ----------
    warmup_iters : int, default=1000
        Training steps of the linear warm-up; 0 or 1 means none.
    lr_milestones : sequence of int, default=(160, 180)
        Epochs (from 0) whose learning rate is the first to be multiplied by ``lr_decay``
        again; strictly increasing, ``>= 1``; empty for no decay.
    lr_decay : float, default=0.3
        Factor of each decay, in (0, 1].

    Returns
    -------
    list of (str, skorch.callbacks.LRScheduler)
        Named callbacks for the ``callbacks`` parameter of an estimator. They record nothing
        in ``history`` (with two schedulers chained, neither one's last value is the rate in
        use); read ``net.optimizer_.param_groups[0]["lr"]`` instead.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from ebmclassifier import NGEBMClassifier
    >>> from ebmclassifier.recipes import paper_callbacks
    >>> X, y = make_blobs(40, n_features=4, centers=3, random_state=0)
    >>> callbacks = paper_callbacks(warmup_iters=4, lr_milestones=[1], lr_decay=0.5)
    >>> [name for name, _ in callbacks]
    ['lr_warmup', 'lr_decay']
    >>> clf = NGEBMClassifier(lr=0.01, max_epochs=2, batch_size=20, callbacks=callbacks,
    ...                       module__hidden_sizes=(8,), random_state=0).fit(X, y)
    >>> round(clf.optimizer_.param_groups[0]["lr"], 6)  # 4 steps done: 0.01 * 1 * 0.5
    0.005
    """
    check = ParamChecker.of(
        {"warmup_iters": warmup_iters, "lr_milestones": lr_milestones, "lr_decay": lr_decay},
        owner="paper_callbacks",
    )
    check.integer("warmup_iters", 0)
    check.int_sequence("lr_milestones", 1, increasing=True)
    check.real("lr_decay", 0, 1, low_open=True)
    check.raise_if_any()
    lr_milestones = [int(m) for m in lr_milestones]  # plain ints, also from a numpy array
    callbacks = []
    if warmup_iters > 1:
        warmup = LRScheduler(
            policy=LinearLR,
            start_factor=1.0 / warmup_iters,
            end_factor=1.0,
            total_iters=warmup_iters - 1,
            step_every="batch",
            event_name=None,
        )
        callbacks.append(("lr_warmup", warmup))
    if len(lr_milestones) > 0:
        decay = LRScheduler(
            policy=MultiStepLR,
            milestones=lr_milestones,
            gamma=lr_decay,
            step_every="epoch",
            event_name=None,
        )
        callbacks.append(("lr_decay", decay))
    return callbacks
