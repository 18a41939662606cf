"""compare --protocol paper: the NG-EBM and JEM papers' CIFAR/SVHN recipe (issue #18)."""

import json

import numpy as np
import pytest

from ebmclassifier import cli
from ebmclassifier.experiments.compare import (
    CompareConfig,
    ModelSpec,
    default_models,
    run_comparison,
)


def _cifar10_files(folder, n=24):
    import pickle

    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        labels = [int(k) for k in rng.integers(0, 2, size=n)]  # two classes: a quick fit
        batch = {b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8), b"labels": labels}
        (folder / name).write_bytes(pickle.dumps(batch, protocol=2))


@pytest.mark.slow
def test_protocol_paper_runs_end_to_end_on_cifar_files_and_is_recorded(tmp_path, capsys):

    _cifar10_files(tmp_path / "cifar")
    out = tmp_path / "report"
    code = cli.main([
        "compare", "--data", "cifar10", "--data-dir", str(tmp_path / "cifar"),
        "--protocol", "paper", "--network", "wrn-10-1", "--epochs", "1", "--seeds", "1",
        "--models", "ce,ngebm", "--n-attack", "4", "--epsilons", "0,0.01", "--out", str(out),
        "--no-progress",
    ])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    protocol = results["protocol"]
    assert protocol["network"] == "wrn-28-10" and protocol["lr"] == 1e-4
    assert protocol["lr_milestones"] == [160, 180] and protocol["augmentation"]["padding"] == 4
    assert results["config"]["network"] == "wrn-10-1"  # the command line overrides the preset
    assert results["config"]["protocol"] == "paper" and results["lr"] == 1e-4
    assert (
        "Protocol `paper` (cifar10): network wrn-28-10, 150 epochs"
        in (out / "report.md").read_text()
    )


@pytest.mark.slow
def test_protocol_paper_builds_the_papers_estimators(tmp_path):
    from ebmclassifier.augment import Compose

    _cifar10_files(tmp_path / "cifar")
    built = {}

    def spy(name):
        def build(params):
            built[name] = params
            return default_models()[name].build(params)

        return ModelSpec(name, name, build=build)

    config = CompareConfig(
        data="cifar10", data_dir=str(tmp_path / "cifar"), models=("ngebm", "jem"), seeds=1,
        max_epochs=1, network="wrn-10-1", n_attack=4, epsilons=(0.0,), protocol="paper",
        progress=False, extra_params={"jem": {"buffer_size": 64, "sgld_steps": 2}},
    )  # fmt: skip
    run_comparison(config, registry={name: spy(name) for name in ("ngebm", "jem")})
    ngebm, jem = built["ngebm"], built["jem"]
    assert isinstance(ngebm["augmentation"], Compose) and ngebm["batch_size"] == 64
    assert ngebm["energy_var_weight"] == 0.5 and ngebm["lr"] == 1e-4
    assert [name for name, _ in ngebm["callbacks"]] == ["epoch_bar", "lr_warmup", "lr_decay"]
    assert jem["buffer_init"] == "uniform" and jem["sampler"] == "sgld"
    assert jem["buffer_size"] == 64  # explicit extra parameters win over the preset


class _Built(Exception):
    """Raised by a spy build: the parameters are known, nothing needs to train."""


@pytest.mark.parametrize("standardize, noise_std", [(True, 0.06), (False, 0.015)])
def test_protocol_paper_noise_is_in_the_units_the_models_train_in(tmp_path, standardize, noise_std):
    # The scripts add std 0.03 to images in [-1, 1]: about 0.06 on standardized inputs, 0.015
    # on [0, 1] pixels; --no-standardize used to double it as well (0.06, four times too much).
    from ebmclassifier.augment import GaussianNoise
    from ebmclassifier.experiments.report import _protocol_text
    from ebmclassifier.recipes import paper_protocol

    _cifar10_files(tmp_path / "cifar")
    built = {}

    def spy(params):
        built.update(params)
        raise _Built

    config = CompareConfig(
        data="cifar10", data_dir=str(tmp_path / "cifar"), models=("ngebm",), seeds=1,
        max_epochs=1, network="wrn-10-1", n_attack=4, epsilons=(0.0,), protocol="paper",
        progress=False, standardize=standardize,
    )  # fmt: skip
    with pytest.raises(_Built):
        run_comparison(config, registry={"ngebm": ModelSpec("ngebm", "spy", build=spy)})
    (noise,) = [t for t in built["augmentation"].transforms if isinstance(t, GaussianNoise)]
    assert noise.std == pytest.approx(noise_std)
    inputs = "standardized inputs" if standardize else "raw [0, 1] inputs"
    (text, _) = _protocol_text(paper_protocol("cifar10"), {"noise_std": noise.std}, standardize)
    assert (
        f"noise_std=0.03 (the scripts' noise, on images in [-1, 1]; applied as noise_std="
        f"{noise_std:g} on the {inputs})" in text
    )


def test_protocol_paper_is_refused_for_other_data_and_unknown_names(capsys):
    assert cli.main(["compare", "--protocol", "paper", "--no-progress"]) == 2
    assert "recipe for cifar10, cifar100, svhn; 'digits' is not one" in capsys.readouterr().err
    assert cli.main(["compare", "--protocol", "papers", "--no-progress"]) == 2
    assert "invalid choice: 'papers'" in capsys.readouterr().err
