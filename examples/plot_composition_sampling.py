"""
Sampling a composition of two JEM experts
=========================================

Two :class:`~ebmclassifier.JEMClassifier` experts are trained separately on the 8x8 digits
0-7, one on the digit and one on the stroke ("thick" when an image holds more ink than the
median of its digit). A JEM expert is a generative model, ``p(x, y) ∝ exp(f(x)[y])``, so the
sum of their class-conditional energies, ``E_digit(x, d) + E_stroke(x, a)``, is the energy of
"digit d written with stroke a", and :meth:`~ebmclassifier.ConceptComposition.sample` draws
from it by Langevin dynamics (JEM's SGLD). Every row starts from the same points, drawn from
Gaussians fitted to all the training images, so the energies alone decide where the chains go:
the digit expert alone gets the digit right and the stroke by chance, the stroke expert alone
the reverse, the composition both. Independently trained cross-entropy nets judge the samples;
they are a little optimistic, since the gradient steps that move the chains also move them
(judges that gradients cannot fool, in ``benchmarks/composition.py``, give 0.89 for the
composition).
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from ebmclassifier import ConceptComposition, JEMClassifier, NGEBMClassifier

X, digit = load_digits(return_X_y=True)
X = X / 16
X_train, _, d_train, _ = train_test_split(X, digit, test_size=0.3, stratify=digit, random_state=0)
X_train, d_train = X_train[d_train < 8], d_train[d_train < 8]
medians = np.array([np.median(X_train[d_train == d].sum(1)) for d in range(8)])
stroke = np.where(X_train.sum(1) > medians[d_train], "thick", "thin")
scaler = StandardScaler().fit(X_train)
Z = scaler.transform(X_train)
Y = np.column_stack([d_train, stroke]).astype(object)
Y[:, 0] = d_train

jem = dict(max_epochs=10, buffer_size=2000)
model = ConceptComposition(
    [
        ("digit", JEMClassifier(random_state=0, **jem)),
        ("stroke", JEMClassifier(random_state=1, **jem)),
    ]
).fit(Z, Y)
judge_digit = NGEBMClassifier(beta=0.0, max_epochs=20, random_state=2).fit(Z, d_train)
judge_stroke = NGEBMClassifier(beta=0.0, max_epochs=20, random_state=3).fit(Z, stroke)

queries = [(d, a) for d in (0, 2, 3, 4) for a in ("thin", "thick")]
conditions = {
    "digit expert": lambda d, a: {"digit": d},
    "stroke expert": lambda d, a: {"stroke": a},
    "both": lambda d, a: {"digit": d, "stroke": a},
}
fig, axes = plt.subplots(len(queries), 3 * len(conditions), figsize=(9, 1.05 * len(queries) + 0.5))
hits = {name: [] for name in conditions}
for row, (d, a) in enumerate(queries):
    x0 = model.sample(24, start="marginal", n_steps=0, random_state=row)
    for c, (name, query) in enumerate(conditions.items()):
        x = model.sample(24, query(d, a), n_steps=100, start=x0, random_state=row)
        hits[name].append(np.mean((judge_digit.predict(x) == d) & (judge_stroke.predict(x) == a)))
        for i in range(3):
            ax = axes[row, 3 * c + i]
            image = np.clip(scaler.inverse_transform(x[i : i + 1]), 0, 1).reshape(8, 8)
            ax.imshow(image, cmap="gray_r", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            if row == 0 and i == 1:
                ax.set_title(name, fontsize=9)
    axes[row, 0].set_ylabel(f"{d}, {a}", fontsize=8)
for name, rate in hits.items():
    print(f"{name:14s} samples judged to be 'digit d and stroke a': {np.mean(rate):.2f}")
fig.suptitle("Samples of 'digit d and stroke a', from the same starts")
fig.tight_layout()
plt.show()
