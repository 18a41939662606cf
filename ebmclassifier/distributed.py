"""Data-parallel training of one estimator over several processes, with torch.distributed.

The engine is PyTorch's own: processes started by ``torchrun`` (or any launcher that sets up a
``torch.distributed`` process group), and :class:`torch.nn.parallel.DistributedDataParallel`
(DDP) [1]_ averaging the parameter gradients. Mix :class:`DataParallelMixin` in front of an
estimator class (:class:`DataParallelNGEBMClassifier` is the one for NG-EBM) and run the same
script on every process::

    # train.py, run with: torchrun --nproc_per_node=2 train.py
    import torch.distributed as dist
    from ebmclassifier.distributed import DataParallelNGEBMClassifier

    dist.init_process_group("gloo")  # "nccl" on GPUs
    clf = DataParallelNGEBMClassifier(beta=0.5, batch_size=256, random_state=0).fit(X, y)
    dist.destroy_process_group()

Every process passes the same ``(X, y)``. Each global batch of ``batch_size`` samples (the same
batches a single process would draw, because every process seeds its shuffling with the same
``random_state``) is split into one contiguous shard per process; each process computes the loss
of its shard, and the gradients are averaged so that the step is the one a single process would
take on the whole batch. The fitted estimator is therefore the single-process one up to
floating-point summation order, whatever the number of processes, as long as the loss is a mean
of per-sample terms (see :meth:`DataParallelMixin._data_parallel_problems`).

References
----------
.. [1] Li, S., et al. "PyTorch Distributed: Experiences on Accelerating Data Parallel Training".
   VLDB 2020.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import nullcontext

import numpy as np
import torch
from skorch.callbacks import Callback
from torch import distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ._utils.validation import check_sample_weight
from .ngebm import NGEBMClassifier

__all__ = ["DataParallelMixin", "DataParallelNGEBMClassifier", "ShardedBatches"]


class ShardedBatches:
    """This process's shard of each batch of a training iterator.

    Parameters
    ----------
    iterator : iterable of (X, y) tensor batches
        The global batches, identical on every process.
    rank, world_size : int
        This process's index and the number of processes.

    Notes
    -----
    A global batch of ``m`` samples is cut into ``world_size`` contiguous shards of
    ``ceil(m / world_size)`` or ``floor(m / world_size)`` samples. A trailing batch with fewer
    samples than processes is dropped, so that no process works on an empty shard (DDP needs a
    backward pass on every process at every step).

    Examples
    --------
    A batch of five samples and a trailing batch of one, cut for two processes:

    >>> import torch
    >>> batches = [(torch.arange(5), torch.arange(5) % 2), (torch.arange(1), torch.zeros(1))]
    >>> for rank in range(2):
    ...     print([Xb.tolist() for Xb, _ in ShardedBatches(batches, rank, world_size=2)])
    [[0, 1, 2]]
    [[3, 4]]
    """

    def __init__(self, iterator, rank: int, world_size: int) -> None:
        self.iterator = iterator
        self.rank = rank
        self.world_size = world_size

    def __len__(self) -> int:
        n = len(self.iterator)
        dataset = getattr(self.iterator, "dataset", None)
        size = getattr(self.iterator, "batch_size", None)
        if n and dataset is not None and size:
            last = len(dataset) - (n - 1) * size
            n -= 0 < last < self.world_size
        return n

    def __iter__(self) -> Iterator:
        for Xb, yb in self.iterator:
            if len(Xb) < self.world_size:
                continue
            shard = slice(*_shard_bounds(len(Xb), self.rank, self.world_size))
            yield Xb[shard], (yb[shard] if yb is not None else None)


def _shard_bounds(n: int, rank: int, world_size: int) -> tuple[int, int]:
    """``[start, stop)`` of shard ``rank`` when ``n`` items are cut into ``world_size`` shards."""
    base, extra = divmod(n, world_size)
    start = rank * base + min(rank, extra)
    return start, start + base + (rank < extra)


class DataParallelMixin:
    """Train the estimator it is mixed into with DistributedDataParallel over a process group.

    Put it first among the bases, in an importable module (so that fitted estimators unpickle),
    as :class:`DataParallelNGEBMClassifier` does. The estimator must declare itself ready in
    ``_data_parallel_problems``. It needs an initialized default process group
    (``torch.distributed.init_process_group``), the same ``(X, y)`` on every process and an
    int ``random_state`` (so that every process draws the same batches). Everything else is the
    estimator's own behaviour: ``batch_size`` is the global batch, shared by the processes; the
    fitted estimator holds a plain (unwrapped) network, pickles as usual, and predicts locally.

    With ``device="auto"`` and CUDA present, process ``LOCAL_RANK`` (set by ``torchrun``) uses
    GPU ``LOCAL_RANK``; use ``"nccl"`` as the backend then.

    Notes
    -----
    The NG-EBM gradient-norm term differentiates ``dE/dx`` with respect to the parameters
    (double backward). Under DDP this is exact: the input gradient is taken with
    ``torch.autograd.grad(..., inputs=x)``, which fills no parameter gradient and so triggers
    none of DDP's all-reduce hooks; the one ``loss.backward()`` of the step then reaches every
    parameter once, through both the first- and second-order paths, and DDP averages the sum.
    Validation runs under ``no_sync`` on the full validation set on every process.

    Examples
    --------
    An estimator whose loss is not a mean of per-sample terms is refused (JEM samples from a
    replay buffer shared by the whole batch):

    >>> from sklearn.datasets import make_blobs
    >>> from ebmclassifier import JEMClassifier
    >>> class DataParallelJEMClassifier(DataParallelMixin, JEMClassifier):
    ...     pass
    >>> X, y = make_blobs(60, n_features=4, centers=3, random_state=0)
    >>> try:
    ...     DataParallelJEMClassifier(random_state=0).fit(X, y)
    ... except ValueError as err:
    ...     print(err)
    DataParallelJEMClassifier has not been made ready for data-parallel training (its loss may
    not be a mean of per-sample terms).
    """

    def _data_parallel_problems(self) -> list[str]:
        """Why this estimator, as configured, cannot be trained data-parallel (empty: it can).

        A data-parallel estimator class opts in by overriding this (as
        :class:`DataParallelNGEBMClassifier` does); the default refuses, so that an estimator
        whose loss couples the samples of a batch (or samples from a shared buffer, as JEM
        does) is never silently trained with a different objective.
        """
        return [
            f"{type(self).__name__} has not been made ready for data-parallel training "
            "(its loss may not be a mean of per-sample terms)."
        ]

    def _capabilities(self) -> list:
        """The estimator's capabilities, and the record of the global batch's size."""
        return [*super()._capabilities(), ("global_batch_size", _GlobalBatchSize())]

    def _prepare_fit(self, X: np.ndarray) -> None:
        problems = self._data_parallel_problems()
        if not isinstance(X, np.ndarray):
            problems.append(
                "Data-parallel training takes the data as an array (every process checks that "
                "it holds the same one); input read in chunks (a Dataset, a memmap, uint8 "
                "images) is not supported yet."
            )
        if self.random_state is None or isinstance(self.random_state, np.random.RandomState):
            problems.append(
                f"Data-parallel training needs an int random_state, so that every process draws "
                f"the same batches; got random_state={self.random_state!r}. Pass e.g. "
                "random_state=0."
            )
        if problems:
            raise ValueError(" ".join(problems))
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError(
                f"{type(self).__name__} trains data-parallel and needs a torch.distributed "
                "process group: start the script with torchrun and call "
                "torch.distributed.init_process_group('gloo' or 'nccl') before fit."
            )
        world_size = dist.get_world_size()
        if self.batch_size != -1 and self.batch_size < world_size:
            raise ValueError(
                f"batch_size={self.batch_size!r} is the global batch, shared by "
                f"{world_size} processes; it must be at least the number of processes."
            )
        super()._prepare_fit(X)
        self._check_same_data(X)

    def _check_sample_weight(self, sample_weight, y, **kwargs) -> np.ndarray | None:
        if check_sample_weight(self, sample_weight, y, **kwargs) is not None:
            # Each shard would normalise by its own weight sum, and a shard without weight
            # would skip its backward pass, which DDP waits for on every process.
            raise ValueError(
                f"{type(self).__name__} does not train with sample weights yet: sample_weight "
                "and class_weight must be None (or give every sample the same weight)."
            )
        return None

    def _check_same_data(self, X: np.ndarray) -> None:
        """Fail on every process, not hang, when the processes were given different data."""
        X64 = X.astype(np.float64, copy=False)
        summary = torch.tensor(
            [len(X), X64.sum(), (X64 * X64).sum()], dtype=torch.float64, device=self.device_
        )
        gathered = [torch.empty_like(summary) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered, summary)
        if not all(torch.equal(g, gathered[0]) for g in gathered):
            rows = [g.tolist() for g in gathered]
            raise ValueError(
                "Data-parallel training needs the same X on every process; the processes got "
                f"different data (n_samples, sum, sum of squares per process: {rows!r})."
            )

    def _train(self, X: torch.Tensor, y: torch.Tensor, sample_weight=None) -> None:
        device_ids = [self.device_.index or 0] if self.device_.type == "cuda" else None
        # DDP broadcasts rank 0's parameters, so all processes start from the same weights.
        wrapped = DistributedDataParallel(self.module_, device_ids=device_ids)
        self.module_ = wrapped
        try:
            super()._train(X, y, sample_weight)  # None: _check_sample_weight refused others
        finally:
            # The fitted estimator holds the plain network: it pickles and predicts alone.
            self.module_ = wrapped.module

    def _data_parallel(self) -> bool:
        return isinstance(getattr(self, "module_", None), DistributedDataParallel)

    def get_iterator(self, dataset, training: bool = False):
        """The estimator's batches; in data-parallel training, this process's shard of each.

        The validation and inference iterators are never sharded: every process evaluates
        the whole validation set.
        """
        iterator = super().get_iterator(dataset, training=training)
        if training and self._data_parallel():
            return ShardedBatches(iterator, dist.get_rank(), dist.get_world_size())
        return iterator

    def compute_loss(self, X, y, training):
        """The estimator's loss of this process's shard, weighted for the global batch.

        DDP averages the gradients of the processes. Each shard's mean loss is weighted by
        ``n_local * world_size / n_global``, so that this average is the gradient of the mean
        over the global batch, also when the shards differ in size. The value returned is
        the global batch's loss, the same on every process.

        Parameters
        ----------
        X : Tensor of shape ``(n_local, *input_shape)``
            This process's shard of the batch.
        y : Tensor of shape (n_local,)
            Its encoded labels.
        training : bool
            ``False`` in validation, which every process runs on the whole validation set:
            the estimator's loss then, unweighted.

        Returns
        -------
        loss : scalar Tensor
            The loss of the global batch, carrying the gradient of the weighted shard loss.
        logits : Tensor of shape (n_local, n_classes)

        Examples
        --------
        With one process, the shard is the whole batch: the loss is the estimator's own.

        >>> import tempfile
        >>> from pathlib import Path
        >>> import torch.distributed as dist
        >>> from torch.nn.parallel import DistributedDataParallel
        >>> Xt, yt = torch.tensor(X[:8], dtype=torch.float32), torch.tensor(y[:8])
        >>> clf = DataParallelNGEBMClassifier(max_epochs=1, device="cpu", random_state=0)
        >>> with tempfile.TemporaryDirectory() as folder:  # a process group of one
        ...     dist.init_process_group("gloo", init_method=Path(folder, "store").as_uri(),
        ...                             rank=0, world_size=1)
        ...     try:
        ...         clf = clf.fit(X, y)
        ...         plain, _ = clf.compute_loss(Xt, yt, training=True)  # NG-EBM's loss
        ...         clf.module_ = DistributedDataParallel(clf.module_)  # as during fit
        ...         sharded, logits = clf.compute_loss(Xt, yt, training=True)
        ...     finally:
        ...         dist.destroy_process_group()
        >>> bool(torch.isclose(sharded, plain)), tuple(logits.shape)
        (True, (8, 3))
        """
        loss, logits = super().compute_loss(X, y, training)
        if not (training and self._data_parallel()):
            return loss, logits
        # DDP averages gradients over the processes. Weighting each shard's mean loss by
        # n_local * world_size / n_global makes that average the gradient of the mean over
        # the global batch, also when the shards differ in size.
        n_local = float(len(X))
        stats = torch.stack([loss.detach() * n_local, loss.new_tensor(n_local)])
        dist.all_reduce(stats)
        global_loss = stats[0] / stats[1]
        self._global_batch_size = int(stats[1].item())
        weighted = loss * (n_local * dist.get_world_size() / stats[1])
        # The value is the global loss, identical on every process (so a divergence is seen
        # everywhere at once and the history is the single-process one); the gradient is
        # the weighted local one.
        return weighted + (global_loss - weighted).detach(), logits

    def validation_step(self, batch, **fit_params):
        """The estimator's validation step, without DDP's gradient synchronisation.

        Every process evaluates the whole validation set, so the validation losses agree
        without communication; ``no_sync`` keeps DDP from expecting a backward pass.
        """
        sync = self.module_.no_sync() if self._data_parallel() else nullcontext()
        with sync:
            return super().validation_step(batch, **fit_params)


class _GlobalBatchSize(Callback):
    """Records the global batch's size, not the shard's, in data-parallel training.

    skorch weighs the batch losses by the batch sizes when it averages them over an epoch;
    with the shard sizes, the processes would disagree on the epoch's loss (and callbacks such
    as EarlyStopping on when to stop).
    """

    def on_batch_end(self, net, batch=None, training=None, **kwargs) -> None:
        if training and net._data_parallel():
            net.history.record_batch("train_batch_size", net._global_batch_size)


class DataParallelNGEBMClassifier(DataParallelMixin, NGEBMClassifier):
    """:class:`~ebmclassifier.NGEBMClassifier` trained data-parallel over a process group.

    The parameters are those of :class:`~ebmclassifier.NGEBMClassifier`; ``batch_size`` is the
    global batch, shared by the processes. Defined here, not in the user's script, so that a
    fitted estimator unpickles wherever ebmclassifier is installed; outside a process group it
    predicts and scores as a plain NG-EBM (``fit`` needs the group).

    Parameters
    ----------
    module, beta, gamma, energy_var_weight, grad_norm, fd_step, penalty_every, \
penalty_fraction, class_incremental, negatives, replay_per_class, generated_per_class, \
generated_steps, ood_method, criterion, optimizer, lr, max_epochs, batch_size, train_split, \
early_stopping, validation_fraction, n_iter_no_change, tol, callbacks, warm_start, \
class_weight, device, random_state, augmentation, n_threads, precision, verbose, \
iterator_train, iterator_valid, compile, dataset, predict_nonlinearity, use_caching, \
torch_load_kwargs, **kwargs
        As for :class:`~ebmclassifier.NGEBMClassifier`, with three constraints:
        ``random_state`` must be an int (every process draws the same batches),
        ``energy_var_weight`` must be 0 (a batch variance is not a mean of per-sample terms)
        and ``penalty_fraction`` must be 1 (each shard's first rows are not the batch's).

    Examples
    --------
    One process is enough to try it: the fit is the single-process one.

    >>> import tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> import torch.distributed as dist
    >>> from sklearn.datasets import make_blobs
    >>> from ebmclassifier import NGEBMClassifier
    >>> X, y = make_blobs(60, n_features=4, centers=3, random_state=0)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     store = Path(folder, "store").as_uri()
    ...     dist.init_process_group("gloo", init_method=store, rank=0, world_size=1)
    ...     try:
    ...         clf = DataParallelNGEBMClassifier(max_epochs=2, random_state=0).fit(X, y)
    ...     finally:
    ...         dist.destroy_process_group()
    >>> single = NGEBMClassifier(max_epochs=2, random_state=0).fit(X, y)
    >>> np.allclose(clf.predict_proba(X), single.predict_proba(X), atol=1e-6)
    True
    """

    def _data_parallel_problems(self) -> list[str]:
        # Cross-entropy and the gradient norms are means of per-sample terms, which the
        # shards of a batch reproduce exactly; the batch variance of the energy is not.
        problems = []
        if self.energy_var_weight:
            problems.append(
                f"energy_var_weight={self.energy_var_weight!r} penalises the variance of the "
                "energy over a batch, which data-parallel training would compute per shard; "
                "use energy_var_weight=0 for data-parallel training."
            )
        if self.penalty_fraction != 1:
            problems.append(
                f"penalty_fraction={self.penalty_fraction!r} takes the penalty from the first "
                "rows of each shard, not of the batch; use penalty_fraction=1 (penalty_every "
                "works) for data-parallel training."
            )
        if self.negatives_ != "all":  # the classes present in a batch are not per-sample
            problems.append(
                f"negatives={self.negatives_!r} draws the negatives from the batch's classes, "
                "which data-parallel training would see per shard; use negatives='all'."
            )
        return problems
