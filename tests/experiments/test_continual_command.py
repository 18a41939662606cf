"""The ``continual`` command (``ebmclassifier.experiments.continual``) and its methods
(``experiments/_continual_options.py``, ``_continual_methods.py``): the report, the methods'
names and descriptions, the LwF baseline's loss (issues #24, #32, #34)."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.datasets import make_blobs

from ebmclassifier import NGEBMClassifier
from ebmclassifier.cli import build_parser, main
from ebmclassifier.experiments._continual_methods import LwFClassifier, distillation_loss
from ebmclassifier.experiments._continual_options import METHODS
from ebmclassifier.experiments.continual import run_continual, summarize_runs

X, Y = make_blobs(300, n_features=4, centers=6, random_state=0)
X = X.astype(np.float32)


def _task(*labels):
    rows = np.isin(Y, labels)
    return X[rows], Y[rows]


# ---------------------------------------------------------------- the report


@pytest.mark.slow
def test_continual_command_writes_its_report(tmp_path, capsys):
    out = tmp_path / "run"
    status = main(
        [
            "continual",
            "--tasks",
            "0,1/2,3",
            "--methods",
            "ce,ce_batch_replay,joint",
            "--seeds",
            "1",
            "--epochs",
            "1",
            "--replay",
            "2",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert status == 0
    results = json.loads((out / "results.json").read_text())
    assert {r["method"] for r in results["runs"]} == {"ce", "ce_batch_replay", "joint"}
    assert len(results["runs"][0]["accuracy_matrix"]) == 2
    assert (out / "report.md").exists() and (out / "continual_digits_curves.png").exists()
    assert main(["continual", "--tasks", "0/1", "--out", str(out)]) == 2
    assert "first task must have at least 2 classes" in capsys.readouterr().err


def test_a_failed_stream_leaves_the_others_report_and_exits_1(tmp_path, capsys, monkeypatch):
    # a divergence in one method's stream once ended a 33-minute run with no results.json
    from ebmclassifier.exceptions import DivergenceError
    from ebmclassifier.experiments import continual

    real = continual._run_stream

    def diverging(method, data, seed, tasks, config):
        if method == "ce_batch":
            raise DivergenceError("JEMClassifier kept diverging")
        return real(method, data, seed, tasks, config)

    monkeypatch.setattr(continual, "_run_stream", diverging)
    out, common = tmp_path / "run", ["continual", "--tasks", "0,1/2,3", "--epochs", "1", "--quiet"]
    status = main([*common, "--methods", "ce,ce_batch", "--seeds", "2", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 1 and len(err) == 1
    assert "2 stream(s) failed" in err[0] and "'ce_batch' on digits at seed 1" in err[0]
    runs = json.loads((out / "results.json").read_text())["runs"]
    assert [(r["method"], r["seed"]) for r in runs] == [("ce", 0), ("ce", 1)]
    assert "| digits | ce |" in (out / "report.md").read_text()
    status = main([*common, "--methods", "ce_batch", "--seeds", "1", "--out", str(tmp_path / "x")])
    assert status == 1 and "every stream failed" in capsys.readouterr().err
    assert not (tmp_path / "x" / "results.json").exists()
    with pytest.raises(DivergenceError):  # the function without a failures list raises
        continual.run_continual(methods=["ce_batch"], tasks="0,1/2,3", epochs=1, progress=False)


def test_continual_command_layer_sizes_may_repeat():
    args = build_parser().parse_args(["continual", "--hidden", "256,256"])
    assert args.hidden == [256, 256]


# ---------------------------------------------------------------- LwF, the baseline


def test_distillation_loss_against_kl_div_and_a_hand_computation():
    generator = torch.Generator().manual_seed(0)
    s, t = torch.randn(5, 3, generator=generator), torch.randn(5, 3, generator=generator)
    w = torch.tensor([1.0, 0.0, 2.0, 1.0, 0.5])
    T = 2.0
    expected = F.kl_div(F.log_softmax(s / T, 1), F.log_softmax(t / T, 1), log_target=True,
                        reduction="none").sum(1)  # fmt: skip
    assert torch.isclose(distillation_loss(s, t, T), T**2 * expected.mean())
    assert torch.isclose(distillation_loss(s, t, T, w), T**2 * (w * expected).sum() / w.sum())
    p_t = np.exp(t.numpy() / T) / np.exp(t.numpy() / T).sum(1, keepdims=True)
    p_s = np.exp(s.numpy() / T) / np.exp(s.numpy() / T).sum(1, keepdims=True)
    by_hand = T**2 * np.mean((p_t * np.log(p_t / p_s)).sum(1))
    assert np.isclose(float(distillation_loss(s, t, T)), by_hand, rtol=1e-5)


def test_lwf_loss_adds_the_distillation_of_the_remembered_model():
    clf = LwFClassifier(beta=0.0, class_incremental=True, replay_per_class=0,
                        generated_per_class=0, max_epochs=2, random_state=0,
                        module__hidden_sizes=(8,), distill_weight=0.7, temperature=3.0)  # fmt: skip
    clf.partial_fit(*_task(2, 4))
    clf.remember_model()
    teacher = pickle.loads(pickle.dumps(clf.module_))
    clf.partial_fit(*_task(0, 3))
    xb, yb = _task(0, 3)
    xb, yb = torch.tensor(xb), torch.tensor(clf.label_encoder_.transform(yb))
    loss, logits = clf.compute_loss(xb, yb, training=True)
    base, _ = NGEBMClassifier.compute_loss(clf, xb, yb, training=True)
    with torch.no_grad():
        old = teacher(xb)
    term = distillation_loss(logits[:, [1, 3]], old, 3.0)  # classes 2, 4 sit at 1 and 3
    assert torch.isclose(loss, base + 0.7 * term)
    assert term > 0


# ---------------------------------------------------------------- the command's names


def test_every_method_is_explained_in_help_and_report(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["continual", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())  # unwrapped
    for name, method in METHODS.items():
        assert f"{name}: {method.description}" in help_text
    out = tmp_path / "run"
    args = ["continual", "--tasks", "0,1/2,3", "--methods", "ce,ce_batch,ce_k1", "--seeds",
            "1", "--epochs", "1", "--out", str(out), "--quiet"]  # fmt: skip
    assert main(args) == 0
    printed = capsys.readouterr().out
    report = (out / "report.md").read_text()
    for text in (printed, report):
        assert "| ce_batch = ce_k1 |" in text and "| ce |" in text
        assert f"- ce_k1: {METHODS['ce_k1'].description}" in text
        assert "ce_k1 gave the same accuracies as ce_batch on every seed" in text


def test_methods_that_differ_stay_apart():
    runs = run_continual(methods=["ce", "ce_batch"], tasks="0,1/2,3", epochs=1, progress=False)
    rows = summarize_runs(runs)
    assert [(r["method"], r["same_as"]) for r in rows] == [("ce", []), ("ce_batch", [])]


# ---------------------------------------------------------------- warnings


def _warned(run):
    """The "no replay" warnings ``run()`` gives, always recorded."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run()
    return [w for w in caught if "with its energy term and no replay" in str(w.message)]


def test_the_no_replay_baselines_run_quiet_and_a_users_own_fit_still_warns():
    # the issue: the default run printed 8 long UserWarnings from ngebm_batch and jem_batch,
    # which run that combination on purpose (4 streams each with 5 tasks; here 2 tasks)
    baselines = [name for name, method in METHODS.items() if method.no_replay_baseline]
    assert baselines == ["ngebm_batch", "jem_batch"]
    common = {"tasks": "0,1/2,3", "epochs": 1, "progress": False, "hidden": (16,)}
    assert _warned(lambda: run_continual(methods=baselines, **common)) == []
    # the same combination asked of another method by the options still warns
    warned = _warned(lambda: run_continual(methods=["ngebm_generated"], generated=0, **common))
    assert len(warned) == 1
    # and so does a user's own fit of that combination, once per call that adds classes
    clf = NGEBMClassifier(class_incremental=True, negatives="batch", replay_per_class=0,
                          generated_per_class=0, max_epochs=1, random_state=0)  # fmt: skip
    assert _warned(lambda: clf.partial_fit(*_task(0, 1))) == []  # the first task: no old class
    assert len(_warned(lambda: clf.partial_fit(*_task(2, 3)))) == 1


def test_the_report_says_which_methods_are_the_no_replay_baselines():
    from ebmclassifier.experiments._continual_methods import method_notes

    rows = [{"data": "digits", "method": m, "same_as": []} for m in ("ce", "ngebm_batch")]
    notes = method_notes(rows)
    assert any(line.startswith("ngebm_batch is a no-replay baseline: ") for line in notes)
    both = method_notes([*rows, {"data": "digits", "method": "jem_batch", "same_as": []}])
    assert any(line.startswith("ngebm_batch and jem_batch are the no-replay baselines: ")
               for line in both)  # fmt: skip
    assert "no-replay baseline" not in " ".join(method_notes(rows[:1]))
