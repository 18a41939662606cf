"""
Ranking by a composed energy: "a 3 written with a thick stroke"
===============================================================

Two experts are trained separately on the 8x8 digits 0-7: one on the digit, one on a visual
attribute, the *stroke*, "thick" when an image holds more ink (the sum of its pixels) than the
median of its digit, else "thin". A :class:`~ebmclassifier.ConceptComposition` adds their
class-conditional energies, ``E(x) = E_digit(x, 3) + E_stroke(x, "thick")`` with
``E_k(x, y) = -f_k(x)[y]``, and ranks a pool of test images mixed with junk (the digits 8 and
9 that neither expert has seen, uniform noise, pixel-permuted digits).

The usual alternative multiplies the two classifiers' probabilities,
``p(3|x) p(thick|x)``. Probabilities are normalised per input, so a confident answer on junk
counts as much as one on a real digit; the energy also scores how typical ``x`` is. That helps
only when the experts' energies are trained to be low on the data and high elsewhere
(NG-EBM here): the energy of plain cross-entropy nets is lowest on the far-away junk of
standardized inputs, and composing those energies ranks junk first.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from ebmclassifier import ConceptComposition, NGEBMClassifier

X, digit = load_digits(return_X_y=True)
X = X / 16
X_train, X_test, d_train, d_test = train_test_split(
    X, digit, test_size=0.3, stratify=digit, random_state=0
)
known = d_train < 8  # the experts see digits 0-7 only
medians = {d: np.median(X_train[d_train == d].sum(1)) for d in range(8)}


def stroke(images, digits):
    return np.where(images.sum(1) > np.array([medians[d] for d in digits]), "thick", "thin")


scaler = StandardScaler().fit(X_train)
Y = np.column_stack([d_train[known], stroke(X_train[known], d_train[known])]).astype(object)
Y[:, 0] = d_train[known]

# The pool: test digits 0-7, and junk.
rng = np.random.default_rng(0)
test_known = d_test < 8
junk = [
    X_test[~test_known],  # digits 8 and 9
    rng.uniform(0, 1, (100, 64)),  # noise
    np.stack([row[rng.permutation(64)] for row in X_test[:100]]),  # permuted pixels
]
pool = np.concatenate([X_test[test_known], *junk])
n_real, n_unseen = int(test_known.sum()), int((~test_known).sum())
pool_digit = np.concatenate([d_test[test_known], np.full(len(pool) - n_real, -1)])
pool_stroke = np.concatenate(
    [stroke(X_test[test_known], d_test[test_known]), np.full(len(pool) - n_real, "junk")]
)
Z = scaler.transform(pool)


def rankings(model, d, a):
    """The pool ranked for 'digit d and stroke a', by probabilities and by energy."""
    p_digit, p_stroke = model.predict_proba(Z)
    product = p_digit[:, d] * p_stroke[:, list(model.classes_[1]).index(a)]
    energy = model.energy(Z, {"digit": d, "stroke": a})
    return {"p(d|x) p(a|x)": np.argsort(-product), "E(x, d) + E(x, a)": np.argsort(energy)}


queries = [(d, a) for d in range(8) for a in ("thin", "thick")]
shown, results = {}, {}
for family, beta in (("CE", 0.0), ("NG-EBM", 0.5)):
    experts = [
        ("digit", NGEBMClassifier(beta=beta, max_epochs=30, random_state=0)),
        ("stroke", NGEBMClassifier(beta=beta, max_epochs=30, random_state=1)),
    ]
    model = ConceptComposition(experts).fit(scaler.transform(X_train[known]), Y)
    for d, a in queries:
        relevant = (pool_digit == d) & (pool_stroke == a)
        r = int(relevant.sum())
        for ranker, order in rankings(model, d, a).items():
            top = order[:r]
            unseen = ((top >= n_real) & (top < n_real + n_unseen)).mean()
            noise = (top >= n_real + n_unseen).mean()
            results.setdefault(f"{family}: {ranker}", []).append(
                [relevant[top].mean(), unseen, noise]
            )
            if (d, a) == (3, "thick"):
                shown[f"{family}: {ranker}"] = (order, relevant)

print(f"pool: {n_real} test digits 0-7, {n_unseen} digits 8-9, 200 noise images; 16 queries")
print("mean over the queries of: precision@R, and the share of the top R that is")
print(f"{'':26s} precision@R  digits 8-9  noise")
for name, rows in results.items():
    precision, unseen, noise = np.mean(rows, axis=0)
    print(f"{name:26s} {precision:11.2f} {unseen:11.2f} {noise:6.2f}")

fig, axes = plt.subplots(len(shown), 10, figsize=(10, 1.25 * len(shown) + 0.4))
for row, (name, (order, relevant)) in enumerate(shown.items()):
    for col, i in enumerate(order[:10]):
        ax = axes[row, col]
        ax.imshow(pool[i].reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
        ax.set_xticks([])
        ax.set_yticks([])
        color = "green" if relevant[i] else ("red" if i >= n_real + n_unseen else "orange")
        for spine in ax.spines.values():
            spine.set_color(color)
            spine.set_linewidth(2)
    axes[row, 0].set_ylabel(name.replace(": ", ":\n"), fontsize=7, rotation=0, ha="right")
fig.suptitle("Top 10 for 'a thick 3' (green: right, orange: another digit, red: noise)")
fig.tight_layout()
plt.show()
