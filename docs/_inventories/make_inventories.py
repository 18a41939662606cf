"""Write the small intersphinx inventories the docs link scikit-learn, skorch, PyTorch and
numpy with.

The build must not need the internet, and intersphinx reads each project's ``objects.inv``
from its site by default. These files list only the targets the docs reference, with the
addresses those projects' documentation gives them, so the links lead to the real pages while
the build stays offline (``docs/conf.py`` names them in ``intersphinx_mapping``;
``tests/test_docs_offline.py`` checks that every reference into these projects is here).

Regenerate after adding a target (``pip install sphobjinv``)::

    python docs/_inventories/make_inventories.py
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent

_SK = "modules/generated/{0}.html#{0}"  # scikit-learn's page of a public name
_TORCH = "generated/{0}.html#{0}"  # PyTorch's page of a public name

#: project -> (base URL of its docs, the version named, [(name, domain:role, uri, shown)]).
#: A uri ending in "$" is the name's own anchor (Sphinx's shorthand); "-" as shown: the name.
INVENTORIES = {
    "sklearn": (
        "https://scikit-learn.org/stable/",
        "stable",
        [
            *[
                (name, role, _SK.format(name), "-")
                for name, role in (
                    ("sklearn.pipeline.Pipeline", "py:class"),
                    ("sklearn.pipeline.make_pipeline", "py:function"),
                    ("sklearn.model_selection.GridSearchCV", "py:class"),
                    ("sklearn.model_selection.cross_val_score", "py:function"),
                    ("sklearn.calibration.CalibratedClassifierCV", "py:class"),
                    ("sklearn.frozen.FrozenEstimator", "py:class"),
                    ("sklearn.base.clone", "py:function"),
                    ("sklearn.base.ClassifierMixin", "py:class"),
                    ("sklearn.neural_network.MLPClassifier", "py:class"),
                    ("sklearn.metrics.accuracy_score", "py:function"),
                    ("sklearn.ensemble.VotingClassifier", "py:class"),
                    ("sklearn.multioutput.MultiOutputClassifier", "py:class"),
                    ("sklearn.preprocessing.StandardScaler", "py:class"),
                    ("sklearn.utils.Bunch", "py:class"),
                    ("sklearn.utils.validation.validate_data", "py:function"),
                )
            ],
            (
                "sklearn.base.ClassifierMixin.score",
                "py:method",
                "modules/generated/sklearn.base.ClassifierMixin.html"
                "#sklearn.base.ClassifierMixin.score",
                "-",
            ),
            # set_output's docstring (the latent classifier's set_output) links these two
            (
                "df_output_transform",
                "std:label",
                "modules/df_output_transform.html#df-output-transform",
                "Pandas/Polars Output for Transformers with set_output API",
            ),
            (
                "sphx_glr_auto_examples_miscellaneous_plot_set_output.py",
                "std:label",
                "auto_examples/miscellaneous/plot_set_output.html"
                "#sphx-glr-auto-examples-miscellaneous-plot-set-output-py",
                "Introducing the set_output API",
            ),
            # ClassifierMixin.score's docstring (the estimators' score) links here
            (
                "accuracy_score",
                "std:label",
                "modules/model_evaluation.html#accuracy-score",
                "Accuracy score",
            ),
        ],
    ),
    "numpy": (
        "https://numpy.org/doc/stable/",
        "stable",
        [
            ("numpy.memmap", "py:class", "reference/generated/numpy.memmap.html#$", "-"),
            ("numpy.load", "py:function", "reference/generated/numpy.load.html#$", "-"),
        ],
    ),
    "skorch": (
        "https://skorch.readthedocs.io/en/stable/",
        "stable",
        [
            ("skorch.net.NeuralNet", "py:class", "net.html#$", "-"),
            ("skorch.net.NeuralNet.initialize", "py:method", "net.html#$", "-"),
            ("skorch.net.NeuralNet.save_params", "py:method", "net.html#$", "-"),
            ("skorch.net.NeuralNet.load_params", "py:method", "net.html#$", "-"),
            ("skorch.classifier.NeuralNetClassifier", "py:class", "classifier.html#$", "-"),
            ("skorch.dataset.Dataset", "py:class", "dataset.html#$", "-"),
            ("skorch.dataset.ValidSplit", "py:class", "dataset.html#$", "-"),
            ("skorch.callbacks.EarlyStopping", "py:class", "callbacks.html#$", "-"),
            ("skorch.callbacks.Checkpoint", "py:class", "callbacks.html#$", "-"),
            ("skorch.callbacks.LoadInitState", "py:class", "callbacks.html#$", "-"),
            ("skorch.callbacks.LRScheduler", "py:class", "callbacks.html#$", "-"),
        ],
    ),
    "torch": (
        "https://docs.pytorch.org/docs/stable/",
        "stable",
        [
            *[
                (name, role, _TORCH.format(name), "-")
                for name, role in (
                    ("torch.nn.Module", "py:class"),
                    ("torch.nn.CrossEntropyLoss", "py:class"),
                    ("torch.nn.BatchNorm1d", "py:class"),
                    ("torch.nn.BatchNorm2d", "py:class"),
                    ("torch.nn.SyncBatchNorm", "py:class"),
                    ("torch.optim.Adam", "py:class"),
                    ("torch.compile", "py:function"),
                    ("torch.Generator", "py:class"),
                    ("torch.nn.functional.pad", "py:function"),
                    ("torch.nn.parallel.DistributedDataParallel", "py:class"),
                    ("torch.optim.lr_scheduler.LinearLR", "py:class"),
                    ("torch.optim.lr_scheduler.MultiStepLR", "py:class"),
                )
            ],
            ("torch.utils.data.DataLoader", "py:class", "data.html#$", "-"),
            ("torch.utils.data.Dataset", "py:class", "data.html#$", "-"),
            ("torch.utils.data.TensorDataset", "py:class", "data.html#$", "-"),
            ("torch.utils.data.IterableDataset", "py:class", "data.html#$", "-"),
            ("torch.autocast", "py:class", "amp.html#$", "-"),
            ("torch.amp.GradScaler", "py:class", "amp.html#$", "-"),
            ("torch.autograd.Function", "py:class", "autograd.html#$", "-"),
        ],
    ),
}


def write(project: str) -> Path:
    """Write ``<project>.inv`` (zlib-compressed, Sphinx's inventory format version 2)."""
    import sphobjinv as soi

    _, version, targets = INVENTORIES[project]
    inventory = soi.Inventory()
    inventory.project, inventory.version = project, version
    for name, role, uri, shown in targets:
        domain, role = role.split(":")
        inventory.objects.append(
            soi.DataObjStr(
                name=name, domain=domain, role=role, priority="1", uri=uri, dispname=shown
            )
        )
    path = HERE / f"{project}.inv"
    soi.writebytes(path, soi.compress(inventory.data_file(contract=True)))
    return path


if __name__ == "__main__":
    for name in INVENTORIES:
        print(write(name))
