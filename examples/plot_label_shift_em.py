"""
Label shift: adapting a digits model to a deployment where two classes are rare
===============================================================================

A classifier trained where every digit is equally frequent is deployed where 3s and 8s are
rare (5% of their usual share). Its posteriors still carry the training priors, so it predicts
3 and 8 too often. :class:`~ebmclassifier.DistributionalConstraint` with ``priors="em"``
estimates the deployment priors from the *unlabelled* deployment samples (the EM of Saerens et
al., 2002, with one pseudo-sample of the training distribution so that no class present is
driven to a prior of 0) and tilts the posteriors to them: each class gets one energy term,
added to the trained model's energies, with no retraining.

Two nets are adapted: cross-entropy (``beta=0``) and NG-EBM (``beta=0.5``). The run is short
(few epochs, one seed) so it builds in seconds on a CPU; the
measured comparison with other models and BBSE is ``benchmarks/label_shift.py`` (see the
"Distributional constraints" page).
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import log_loss

from ebmclassifier import DistributionalConstraint, NGEBMClassifier
from ebmclassifier.datasets import load_digits_ood

data = load_digits_ood(random_state=0)

# the deployment set: every test image, except that 95% of the 3s and 8s are left out
rng = np.random.default_rng(0)
rare = np.isin(data.y_test, [3, 8])
keep = ~rare | (rng.random(len(data.y_test)) < 0.05)
X_deploy, y_deploy = data.X_test[keep], data.y_test[keep]
true_priors = np.bincount(y_deploy, minlength=10) / len(y_deploy)
print(f"deployment: {len(y_deploy)} images, {np.isin(y_deploy, [3, 8]).sum()} of them 3s and 8s")

estimated = {}
for name, beta in (("cross-entropy", 0.0), ("NG-EBM", 0.5)):
    clf = NGEBMClassifier(beta=beta, max_epochs=30, batch_size=256, lr=3e-3, random_state=0)
    clf.fit(data.X_train, data.y_train)
    # EM divides by the training priors, which the estimator recorded: clf.class_prior_
    adapted = DistributionalConstraint(clf, priors="em")
    adapted.fit(X_deploy)  # unlabelled: y_deploy is only used to score below
    estimated[name] = adapted.prior_
    for stage, model in (("before", clf), ("after EM", adapted)):
        proba = model.predict_proba(X_deploy)
        print(
            f"{name:13s} {stage:8s}  accuracy {np.mean(model.predict(X_deploy) == y_deploy):.3f}"
            f"  NLL {log_loss(y_deploy, proba, labels=clf.classes_):.3f}"
            f"  predicted 3s and 8s: {np.isin(model.predict(X_deploy), [3, 8]).sum():2d}"
        )
    print(
        f"{name:13s} |estimated - true priors|_1 = {np.abs(adapted.prior_ - true_priors).sum():.3f}"
    )

# %%
# The estimated deployment priors
# -------------------------------
# EM finds that 3s and 8s are rare from the unlabelled images alone, trusting the model's
# posteriors as they are: with the calibrated cross-entropy net of digits it lands close to
# the truth, and accuracy and NLL improve. The NG-EBM net with ``beta=0.5`` is
# *under*-confident on digits (see the reliability example); EM reads its spread-out
# posteriors as evidence that 3s and 8s are even rarer than they are and pushes their priors
# down, which costs accuracy. The pseudo-sample keeps those priors off 0, so that the 3s and 8s
# still present keep a probability and the NLL does not run away (the maximum-likelihood EM,
# ``em_pseudo_count=0``, raised it above the unadapted model's here). EM needs calibrated
# posteriors; the benchmark on the "Distributional constraints" page measures when a model
# gives them.
fig, ax = plt.subplots(figsize=(6.5, 3))
width = 0.2
bars = {"training": clf.class_prior_, "deployment (true)": true_priors}
bars.update({f"EM on {name}": priors for name, priors in estimated.items()})
for k, (label, priors) in enumerate(bars.items()):
    ax.bar(np.arange(10) + (k - 1.5) * width, priors, width, label=label)
ax.set_xticks(range(10))
ax.set_xlabel("digit")
ax.set_ylabel("class prior")
ax.legend(fontsize=7)
fig.tight_layout()
