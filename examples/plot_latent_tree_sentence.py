"""
A latent dependency tree, drawn for one sentence
================================================

A :class:`~ebmclassifier.LatentStructureClassifier` with ``structure="dependency_tree"`` reads
a sentence of token ids, scores every possible arc head -> modifier with a BiLSTM, builds a
dependency tree from those scores, and predicts the label from the sentence and the tree with a
graph convolution over it. It is trained on the label only: no tree is ever shown to it.

The data come from :func:`~ebmclassifier.datasets.make_latent_trees`: each sentence is drawn
with a random projective tree, every word has a *value* (A to D here) and a *cue*, the signed
offset to its head (0 for the word attached to the root), and the token id encodes both, so the
tree can be read off the tokens by a model that learns what the ids mean. The label is 1 iff
some arc of the hidden tree joins two words of the same value. The generator returns the gold
trees, so we can compare the model's tree with them: the unlabeled attachment score (UAS) is
the fraction of words whose predicted head is the gold one.

The model uses the arc-marginals relaxation (``gradient="softmax"``, the tree counterpart of
the softmax): the decoder sees the marginal probability of every arc, and the MAP tree is the
single most likely tree. It is the fastest method to train and the most accurate in
:doc:`/latent_trees`, whose table compares all methods (SPIGOT and its variants included) with
more seeds. One short run here (1,000 sentences of 4 to 6 words, 10 epochs), so read the
numbers as this run's only.
"""

import time

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Arc, Rectangle

from ebmclassifier import LatentStructureClassifier
from ebmclassifier.datasets import make_latent_trees
from ebmclassifier.datasets.latent_trees import random_projective_heads

MAX_LENGTH, N_VALUES = 6, 4
X, y, heads = make_latent_trees(1500, max_length=MAX_LENGTH, n_values=N_VALUES, random_state=0)
X_train, y_train, X_test, y_test, heads_test = X[:1000], y[:1000], X[1000:], y[1000:], heads[1000:]

started = time.perf_counter()
clf = LatentStructureClassifier(
    structure="dependency_tree",
    gradient="softmax",
    max_epochs=10,
    lr=5e-3,
    batch_size=32,
    random_state=0,
).fit(X_train, y_train)
print(f"trained in {time.perf_counter() - started:.0f} s")

words = heads_test >= 0
map_heads = clf.predict_latent(X_test)  # (n, MAX_LENGTH): head of each word, 0 = root
rng = np.random.RandomState(0)
random_heads = np.full_like(heads_test, -1)
for i, length in enumerate(words.sum(axis=1)):
    random_heads[i, :length] = random_projective_heads(length, rng)
print(f"test accuracy           {clf.score(X_test, y_test):.3f}  (classes balanced: 0.5)")
print(f"UAS of the MAP tree     {(map_heads[words] == heads_test[words]).mean():.3f}")
print(f"UAS of a random tree    {(random_heads[words] == heads_test[words]).mean():.3f}")

# %%
# One sentence
# ------------
# The first test sentence of full length whose label is 1 (it has an agreeing arc). Each word
# is shown with its value and its cue; the model only sees the token id. ``transform`` gives,
# for each word, the marginal probability of each head (the root first).
i = int(np.flatnonzero((words.sum(axis=1) == MAX_LENGTH) & (y_test == 1))[0])
n_offsets = 2 * MAX_LENGTH - 1
values = (X_test[i] - 1) // n_offsets
cues = (X_test[i] - 1) % n_offsets - (MAX_LENGTH - 1)
labels = ["root"] + [f"{'ABCD'[v]}\n{c:+d}" for v, c in zip(values, cues, strict=True)]
marginals = clf.transform(X_test[i : i + 1]).reshape(MAX_LENGTH, MAX_LENGTH + 1)
gold, predicted = heads_test[i], map_heads[i]
print(f"sentence {i}: values {''.join('ABCD'[v] for v in values)}, label {y_test[i]}")
print(f"gold heads {gold.tolist()}, MAP heads {predicted.tolist()}")
print(f"predicted P(label = 1) = {clf.predict_proba(X_test[i : i + 1])[0, 1]:.2f}")


def draw_arcs(ax, heads, side, color_of):
    """Arcs head -> modifier between the words, above (side=1) or below (side=-1) them."""
    for modifier, head in enumerate(heads, start=1):
        width = abs(head - modifier)
        color = color_of(modifier, head)
        ax.add_patch(Arc(((head + modifier) / 2, 0.25 * side), width, 0.6 * width,
                         theta1=0 if side > 0 else 180, theta2=180 if side > 0 else 360,
                         color=color, linewidth=2))  # fmt: skip
        ax.plot(modifier, 0.3 * side, "v" if side > 0 else "^", color=color)  # the arrowhead


fig, (ax_tree, ax_marg) = plt.subplots(
    2, 1, figsize=(8, 8.5), height_ratios=(1, 1.1), layout="constrained"
)
draw_arcs(ax_tree, gold, 1, lambda m, h: "black")
draw_arcs(ax_tree, predicted, -1, lambda m, h: "tab:green" if gold[m - 1] == h else "tab:red")
for modifier, head in enumerate(predicted, start=1):
    bottom = -0.25 - 0.3 * abs(head - modifier)
    ax_tree.text((head + modifier) / 2, bottom - 0.05, f"{marginals[modifier - 1, head]:.2f}",
                 ha="center", va="top", fontsize=8)  # fmt: skip
for position, label in enumerate(labels):
    ax_tree.text(position, 0, label, ha="center", va="center", fontsize=10,
                 bbox={"boxstyle": "round", "facecolor": "white"})  # fmt: skip
ax_tree.set_xlim(-0.6, MAX_LENGTH + 0.6)
ax_tree.set_ylim(-0.3 * MAX_LENGTH - 0.6, 0.3 * MAX_LENGTH + 0.4)
ax_tree.axis("off")
ax_tree.set_title(
    "Gold tree (above) and the model's MAP tree (below: green = gold arc, red = not);\n"
    "arrows point at the modifier, numbers are the MAP arcs' marginal probabilities",
    fontsize=10,
)

image = ax_marg.imshow(marginals, cmap="Blues", vmin=0, vmax=1)
for modifier, head in enumerate(gold, start=1):
    ax_marg.add_patch(Rectangle((head - 0.5, modifier - 1.5), 1, 1, fill=False, linewidth=2))
ax_marg.plot(predicted, np.arange(MAX_LENGTH), "x", color="tab:orange", markersize=10)
ax_marg.set_xticks(range(MAX_LENGTH + 1), [label.replace("\n", " ") for label in labels])
ax_marg.set_yticks(range(MAX_LENGTH), [label.replace("\n", " ") for label in labels[1:]])
ax_marg.set_xlabel("head")
ax_marg.set_ylabel("modifier")
ax_marg.set_title("Arc marginals P(head -> modifier): box = gold head, x = MAP head", fontsize=10)
fig.colorbar(image, ax=ax_marg, shrink=0.8)
plt.show()

# %%
# Reading the tree
# ----------------
# The label is predicted well above chance, but the tree that serves the decoder is mostly not
# the gold one: the MAP tree's UAS is above that of a random projective tree and far from 1.
# The decoder finds its own use for trees, which :doc:`/latent_trees` reports for every
# gradient method on this task. One reason: the label asks whether two *linked* words share a
# value, which does not depend on the direction of the link, so nothing in the training signal
# tells a gold arc from the same arc reversed, and a reversed arc counts as wrong in the UAS.
# The marginals show how unsure the encoder is: most words spread the probability of their
# head over several candidates, and the relaxed decoder is trained on exactly these soft arcs.
