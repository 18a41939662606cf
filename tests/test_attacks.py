"""PGD: stays in the ball, eps=0 is the identity, one step equals FGSM, it hurts an
undefended model; and the estimator-level adversarial_accuracy on a fitted estimator."""

import copy

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from ebmclassifier import NGEBMClassifier
from ebmclassifier.attacks import pgd_attack, robust_accuracy
from ebmclassifier.metrics import adversarial_accuracy


@pytest.fixture(scope="module")
def digits_model():
    """An undefended MLP fitted on digits scaled to [0, 1]; (module, X, y) on the CPU."""
    X, y = load_digits(return_X_y=True)
    X = torch.tensor(X / 16.0, dtype=torch.float32)
    y = torch.tensor(y)
    gen = torch.Generator().manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(0.1 * torch.randn(p.shape, generator=gen))
    optimizer = torch.optim.Adam(module.parameters(), lr=0.01)
    for _ in range(150):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(module(X), y).backward()
        optimizer.step()
    module.zero_grad(set_to_none=True)
    return module, X[:400], y[:400]


def _accuracy(module, x, y):
    with torch.no_grad():
        return (module(x).argmax(1) == y).float().mean().item()


def test_pgd_lowers_accuracy_of_undefended_model(digits_model):
    module, x, y = digits_model
    clean = _accuracy(module, x, y)
    assert clean > 0.95
    for norm, eps in [("linf", 0.1), ("l2", 1.0)]:
        x_adv = pgd_attack(module, x, y, eps, norm=norm, generator=torch.Generator().manual_seed(0))
        assert _accuracy(module, x_adv, y) < clean - 0.3, norm


@pytest.mark.parametrize("norm", ["linf", "l2"])
def test_eps_zero_changes_nothing(digits_model, norm):
    module, x, y = digits_model
    x_adv = pgd_attack(module, x, y, 0.0, norm=norm, random_start=True)
    assert torch.equal(x_adv, x)


@pytest.mark.parametrize("norm", ["linf", "l2"])
@pytest.mark.parametrize("box", [False, True])
def test_perturbation_stays_in_ball_and_box(digits_model, norm, box):
    module, x, y = digits_model
    eps = 0.3 if norm == "linf" else 2.0
    limits = {"input_min": 0.0, "input_max": 1.0} if box else {}
    x_adv = pgd_attack(
        module, x, y, eps, norm=norm, steps=5, step_size=eps, **limits,
        generator=torch.Generator().manual_seed(1),
    )  # fmt: skip
    delta = (x_adv - x).flatten(1)
    size = delta.abs().max(1).values if norm == "linf" else delta.norm(dim=1)
    assert size.max() <= eps * (1 + 1e-5)
    if not box:
        # a step as long as the radius ends on the sphere; clipping to the box may pull it in
        assert (size > 0.99 * eps).all()
    else:
        assert x_adv.min() >= 0.0 and x_adv.max() <= 1.0


def test_box_is_widened_to_contain_the_clean_point(digits_model):
    # a clean point outside the stated range must not be dragged out of its own ball
    module, x, y = digits_model
    x_out = x + 0.5
    x_adv = pgd_attack(module, x_out, y, 0.05, input_min=0.0, input_max=1.0)
    assert (x_adv - x_out).abs().max() <= 0.05 + 1e-6


@pytest.mark.parametrize("norm", ["linf", "l2"])
def test_single_step_without_random_start_is_fgsm(digits_model, norm):
    module, x, y = digits_model
    x, y, eps = x[:8], y[:8], 0.05
    # independent per-sample gradient of the sample's own cross-entropy
    grads = []
    for i in range(len(x)):
        xi = x[i : i + 1].clone().requires_grad_(True)
        loss = torch.nn.functional.cross_entropy(module(xi), y[i : i + 1])
        grads.append(torch.autograd.grad(loss, xi)[0])
    grad = torch.cat(grads)
    if norm == "linf":
        expected = x + eps * grad.sign()
    else:
        expected = x + eps * grad / grad.norm(dim=1, keepdim=True)
    x_adv = pgd_attack(module, x, y, eps, norm=norm, steps=1, step_size=eps, random_start=False)
    torch.testing.assert_close(x_adv, expected, rtol=1e-5, atol=1e-6)


def test_attack_leaves_module_state_alone(digits_model):
    module, x, y = digits_model
    module.train()
    pgd_attack(module, x[:10], y[:10], 0.1)
    assert module.training
    assert all(p.grad is None for p in module.parameters())
    module.eval()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"eps": -0.1}, "'eps'"),
        ({"eps": 0.1, "norm": "l1"}, "'norm'"),
        ({"eps": 0.1, "steps": 0}, "'steps'"),
        ({"eps": 0.1, "step_size": 0.0}, "'step_size'"),
    ],
)
def test_pgd_input_errors(digits_model, kwargs, match):
    module, x, y = digits_model
    with pytest.raises(ValueError, match=match):
        pgd_attack(module, x[:2], y[:2], **kwargs)


# ----------------------------------------------------------------------------- estimator level


@pytest.fixture(scope="module")
def stand_in(digits_model):
    """NGEBMClassifier around the trained MLP (fitted for no epoch, so its weights stay),
    labels as strings; its input range is the digits' [0, 1]."""
    module, x, y = digits_model
    classes = np.array([f"digit{k}" for k in range(10)])
    labels = classes[y.numpy()]
    est = NGEBMClassifier(copy.deepcopy(module), max_epochs=0, device="cpu")
    est.fit(x.numpy(), labels)
    assert est.input_range() == (0.0, 1.0)
    return est, x.numpy(), labels


def test_adversarial_accuracy_curve(stand_in, digits_model):
    est, X, labels = stand_in
    module, x, y = digits_model
    eps = [0.0, 0.05, 0.2]
    acc = adversarial_accuracy(est, X, labels, eps, steps=5, random_state=0, batch_size=150)
    assert acc.shape == (3,)
    assert acc[0] == pytest.approx(_accuracy(module, x, y))
    assert acc[2] < acc[1] < acc[0]
    again = adversarial_accuracy(est, X, labels, eps, steps=5, random_state=0, batch_size=150)
    np.testing.assert_array_equal(acc, again)


def test_adversarial_accuracy_l2(stand_in):
    est, X, labels = stand_in
    acc = adversarial_accuracy(est, X[:100], labels[:100], [0.0, 1.5], norm="l2", steps=5)
    assert acc[1] < acc[0]


def test_adversarial_accuracy_input_errors(stand_in):
    est, X, labels = stand_in
    with pytest.raises(TypeError, match="module_"):
        adversarial_accuracy(object(), X, labels, [0.1])
    with pytest.raises(ValueError, match="not in classes"):
        adversarial_accuracy(est, X[:2], ["digit1", "seven"], [0.1])
    with pytest.raises(ValueError, match="epsilons"):
        adversarial_accuracy(est, X[:2], labels[:2], [-0.1])
    with pytest.raises(ValueError, match="norm"):
        adversarial_accuracy(est, X[:2], labels[:2], [0.1], norm="l1")
    with pytest.raises(ValueError, match="samples"):
        adversarial_accuracy(est, X[:3], labels[:2], [0.1])
    with pytest.raises(ValueError, match=r"shape \(1, 8, 8\)"):
        adversarial_accuracy(est, X[:2].reshape(2, 1, 8, 8), labels[:2], [0.1])


def test_robust_accuracy_is_the_accuracy_of_each_attacked_batch(digits_model):
    # against a loop of pgd_attack, one generator per radius seeded alike, batch by batch
    module, x, y = digits_model
    eps, seed, batch = [0.0, 0.1], 7, 150
    acc = robust_accuracy(module, x.numpy(), y.numpy(), eps, seed=seed, batch_size=batch,
                          steps=3, input_min=0.0, input_max=1.0)  # fmt: skip
    for j, e in enumerate(eps):
        generator = torch.Generator().manual_seed(seed)
        correct = 0
        for start in range(0, len(x), batch):
            xb, yb = x[start : start + batch], y[start : start + batch]
            x_adv = pgd_attack(module, xb, yb, e, steps=3, input_min=0.0, input_max=1.0,
                               generator=generator)  # fmt: skip
            correct += int((module(x_adv).argmax(1) == yb).sum())
        assert acc[j] == correct / len(x)


def test_adversarial_accuracy_attacks_through_preprocess_in_the_units_of_x(stand_in):
    # an estimator trained on x / 2 attacked on x: the network is preprocess -> module_
    est, X, labels = stand_in
    half = torch.nn.Linear(64, 64, bias=False)
    with torch.no_grad():
        half.weight.copy_(0.5 * torch.eye(64))
    X2 = 2 * X[:200]
    acc = adversarial_accuracy(est, X2, labels[:200], [0.0, 0.1], steps=3, random_state=0,
                               preprocess=half, input_range=(0.0, 2.0))  # fmt: skip
    # the same attack on x / 2 with the radius and the box halved
    same = adversarial_accuracy(est, X[:200], labels[:200], [0.0, 0.05], steps=3,
                                random_state=0, input_range=(0.0, 1.0))  # fmt: skip
    np.testing.assert_allclose(acc, same, atol=1 / 200)
    assert acc[0] == pytest.approx(np.mean(est.predict(X[:200]) == labels[:200]))
