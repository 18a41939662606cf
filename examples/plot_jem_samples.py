"""
JEM is a classifier and a generative model
==========================================

A :class:`~ebmclassifier.JEMClassifier` trained on the 8x8 digits classifies them, and the
same network, read as an energy-based model ``p(x|y) ∝ exp(f(x)[y])``, generates digits:
:meth:`~ebmclassifier.JEMClassifier.sample` runs Langevin dynamics from the replay buffer.
The chains start from JEM++'s informative start (a Gaussian per class fitted to the data), so
a short training already gives recognisable samples.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from ebmclassifier import JEMClassifier

X, y = load_digits(return_X_y=True)
X = (X / 8 - 1).astype(np.float32)  # pixels in [-1, 1], as in the JEM paper
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)

clf = JEMClassifier(max_epochs=5, buffer_size=1000, sgld_steps=10, random_state=0)
clf.fit(X_train, y_train)
print(f"test accuracy: {clf.score(X_test, y_test):.3f}")

# Four samples of each class, drawn from p(x|y) with 100 Langevin steps.
wanted = np.repeat(np.arange(10), 4)
samples = clf.sample(len(wanted), y=wanted, n_steps=100)
print(f"samples classified as asked: {(clf.predict(samples) == wanted).mean():.2f}")

fig, axes = plt.subplots(4, 10, figsize=(10, 4.4))
for i, ax in enumerate(axes.T.ravel()):
    ax.imshow(samples[i].reshape(8, 8), cmap="gray_r", vmin=-1, vmax=1)
    ax.set_xticks([])
    ax.set_yticks([])
for digit, ax in enumerate(axes[0]):
    ax.set_title(str(digit))
fig.suptitle("Samples of p(x|y) from a JEMClassifier trained for 5 epochs")
plt.show()
