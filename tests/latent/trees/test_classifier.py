"""LatentStructureClassifier(structure="dependency_tree"): fit, latent trees, marginals, errors."""

import pickle
import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import NotFittedError
from skorch.dataset import ValidSplit

from ebmclassifier import DivergenceError
from ebmclassifier.datasets import make_latent_trees
from ebmclassifier.latent.classifier import LatentStructureClassifier
from ebmclassifier.latent.trees.latent import TREE_GRADIENTS
from ebmclassifier.latent.trees.networks import BiLSTMArcScorer

X, Y, HEADS = make_latent_trees(64, min_length=2, max_length=5, n_values=3, random_state=0)


def _estimator(**params):
    base = dict(structure="dependency_tree", max_epochs=1, batch_size=16, random_state=0)
    return LatentStructureClassifier(**{**base, **params})


def _fit(**params):
    return _estimator(**params).fit(X, Y)


@pytest.mark.parametrize("gradient, projective", [("spigot", True), ("softmax", False)])
def test_fit_predict_latent_and_transform(gradient, projective):
    clf = _fit(gradient=gradient, projective=projective)
    assert clf.predict(X).shape == (64,)
    heads = clf.predict_latent(X)
    assert heads.shape == X.shape and heads.dtype == np.int64
    np.testing.assert_array_equal(heads < 0, X == 0)
    assert np.all((heads == 0).sum(1) == 1)  # single root
    marginals = clf.transform(X).reshape(64, 5, 6)
    np.testing.assert_allclose(marginals.sum(2), (X > 0).astype(float), atol=1e-5)


def test_fitted_tree_classifier_pickles():
    clf = _fit(gradient="ste")
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.predict_latent(X), clf.predict_latent(X))
    np.testing.assert_allclose(again.predict_proba(X), clf.predict_proba(X))


def test_token_ids_are_validated():
    clf = LatentStructureClassifier(structure="dependency_tree", max_epochs=1)
    with pytest.raises(ValueError, match="padding id 0 only at the end"):
        clf.fit(np.array([[1, 0, 2], [1, 2, 3]] * 4), [0, 1] * 4)
    with pytest.raises(ValueError, match="non-negative integer token ids"):
        clf.fit(np.array([[1.5, 2, 0], [1, 2, 3]] * 4), [0, 1] * 4)
    with pytest.raises(ValueError, match="projective"):
        LatentStructureClassifier(structure="dependency_tree", projective="yes").fit(X, Y)


# ---------------------------------------------------------------- token ids (issue #14)

SMALL = dict(
    encoder__embedding_dim=4,
    encoder__hidden_size=4,
    encoder__arc_size=4,
    decoder__embedding_dim=4,
    decoder__hidden_size=4,
)


@pytest.fixture(scope="module")
def fitted_small():
    return _fit(gradient="spigot", **SMALL)


def test_ids_beyond_float32_stay_distinct():
    # 2**24 + 1 and 2**24 + 2 are one float32: the vocabulary must keep both apart
    big = 2**24
    X_big = np.where(X > 0, X + big, 0)
    clf = _estimator(gradient="ste", **SMALL).fit(X_big, Y)
    np.testing.assert_array_equal(clf.vocabulary_, np.unique(X[X > 0]) + big)
    assert clf.vocabulary_.dtype == np.int64
    assert clf.module_.encoder.embedding.num_embeddings == len(np.unique(X[X > 0])) + 2
    # the same ids shifted by 2**24 are the same tokens: the same model
    np.testing.assert_array_equal(
        clf.predict_proba(X_big), _fit(gradient="ste", **SMALL).predict_proba(X)
    )


def test_one_huge_id_does_not_size_the_embeddings():
    X_huge = X.copy()
    X_huge[0, 0] = 2**62
    clf = _estimator(gradient="ste", **SMALL).fit(X_huge, Y)
    assert clf.vocabulary_[-1] == 2**62
    rows = len(np.unique(X_huge[X_huge > 0])) + 2  # padding and out-of-vocabulary
    assert clf.module_.encoder.embedding.num_embeddings == rows
    assert clf.module_.decoder.embedding.num_embeddings == rows


def test_an_id_of_a_billion_gives_one_embedding_row_not_a_billion():
    # issue #26: a token id of 10**9 must not size an embedding of 10**9 rows
    X_big = X.copy()
    X_big[0, 0] = 10**9
    clf = _estimator(gradient="ste", **SMALL).fit(X_big, Y)
    rows = len(np.unique(X[X > 0])) + 3  # the ids of X, 10**9, padding, out-of-vocabulary
    assert clf.module_.encoder.embedding.num_embeddings == rows
    assert clf.module_.decoder.embedding.num_embeddings == rows


def test_partial_fit_with_unseen_ids_warns_naming_them(fitted_small):
    # issue #26: they were mapped to the out-of-vocabulary id without a word
    clf = pickle.loads(pickle.dumps(fitted_small))
    X_new = X.copy()
    X_new[:, 0] = 1000 + np.arange(len(X)) % 7  # 7 unseen ids, one per sentence
    with pytest.warns(
        UserWarning, match=r"7 token id\(s\).*\(1000, 1001, 1002, 1003, 1004, \.\.\.; 64"
    ):
        clf.partial_fit(X_new, Y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf.partial_fit(X, Y)  # every id seen: no warning
        clf.predict(X_new)  # unseen ids at predict time are expected: no warning
    # the vocabulary stays that of the fit which built the network
    np.testing.assert_array_equal(clf.vocabulary_, fitted_small.vocabulary_)


def test_unseen_ids_are_read_as_the_out_of_vocabulary_id(fitted_small):
    unseen = X.copy()
    unseen[:, 0] = 10**15  # never seen in fit, and far beyond the vocabulary
    other = X.copy()
    other[:, 0] = 999
    proba = fitted_small.predict_proba(unseen)
    assert np.isfinite(proba).all()
    # every unseen id is the same token: the reserved index len(vocabulary_) + 1
    np.testing.assert_array_equal(proba, fitted_small.predict_proba(other))
    assert fitted_small.predict_latent(unseen).shape == X.shape


def test_cross_validation_scores_unseen_ids():
    from sklearn.model_selection import cross_val_score

    clf = _estimator(batch_size=32, **SMALL)
    X_rare = X.copy()
    X_rare[np.arange(len(X)), 0] = 1000 + np.arange(len(X))  # each id in one sentence only
    scores = cross_val_score(clf, X_rare, Y, cv=2, error_score="raise")
    assert np.isfinite(scores).all()


def test_approx_mass_is_refused_for_token_ids(fitted_small):
    with pytest.raises(ValueError, match="approx_mass.*no gradient"):
        fitted_small.score_ood(X, method="approx_mass")
    np.testing.assert_allclose(fitted_small.score_ood(X), fitted_small.energy(X))
    with pytest.raises(ValueError, match="'ood_method'.*approx_mass"):
        _fit(ood_method="approx_mass", **SMALL)


@pytest.mark.parametrize("method", ["predict_latent", "transform", "predict", "score_ood"])
def test_latent_outputs_before_fit_are_not_fitted_errors(method):
    clf = LatentStructureClassifier(structure="dependency_tree")
    with pytest.raises(NotFittedError):
        getattr(clf, method)(X)


def test_tensor_and_float_token_ids_are_read_exactly(fitted_small):
    expected = fitted_small.predict_proba(X)
    np.testing.assert_array_equal(fitted_small.predict_proba(torch.as_tensor(X)), expected)
    np.testing.assert_array_equal(fitted_small.predict_proba(X.astype(np.float64)), expected)


# ---------------------------------------------------------- the SPIGOT paper's names (#15)


@pytest.mark.parametrize("alias, name", [("marginals", "softmax"), ("sparsemap", "sparsemax")])
def test_paper_names_give_identical_results(alias, name):
    a, b = _fit(gradient=alias, **SMALL), _fit(gradient=name, **SMALL)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    np.testing.assert_array_equal(a.transform(X), b.transform(X))


def test_transform_column_names():
    clf = _fit(gradient="ste", **SMALL)
    names = clf.get_feature_names_out()
    assert len(names) == clf.transform(X[:2]).shape[1] == 5 * 6
    assert names[0] == "latentstructureclassifier_token1_head0"
    assert names[7] == "latentstructureclassifier_token2_head1"


def test_a_warm_started_refit_keeps_the_vocabulary_of_its_embeddings():
    clf = _estimator(gradient="ste", warm_start=True, **SMALL).fit(X, Y)
    vocabulary = clf.vocabulary_.copy()
    X_new = np.where(X > 0, X + 1000, 0)  # ids the network has no rows for
    with pytest.warns(UserWarning, match="did not see"):
        clf.fit(np.concatenate([X, X_new]), np.concatenate([Y, Y]))
    np.testing.assert_array_equal(clf.vocabulary_, vocabulary)
    assert np.isfinite(clf.predict_proba(X_new)).all()
    assert not np.array_equal(
        _estimator(gradient="ste", **SMALL).fit(X_new, Y).vocabulary_, vocabulary
    )


class _NaNArcScorer(BiLSTMArcScorer):
    """Arc scores of nan, as from an encoder whose weights diverged."""

    def forward(self, x):
        return super().forward(x) * torch.nan


@pytest.mark.parametrize("projective", [True, False])
@pytest.mark.parametrize("gradient", TREE_GRADIENTS)
def test_a_nan_encoder_stops_the_fit_with_a_divergence_error(gradient, projective):
    # regression: the tree oracles raised torch's multinomial error (sfe), numpy's zero-size
    # array error (spigot_ce, sparsemap) instead of the estimator's DivergenceError
    clf = _estimator(gradient=gradient, projective=projective, encoder=_NaNArcScorer, **SMALL)
    with pytest.raises(DivergenceError, match="diverged in epoch 1"):
        clf.fit(X, Y)


def test_the_estimator_checks_token_ids_once_not_per_batch(monkeypatch):
    # its model is built with validate_args=False: no second check, no host sync per batch
    from ebmclassifier.latent.trees import networks

    def refuse(x):
        raise AssertionError("the estimator's model checked its token ids again")

    monkeypatch.setattr(networks, "sequence_lengths", refuse)
    clf = _fit(gradient="sfe", train_split=ValidSplit(4), **SMALL)
    assert clf.module_.validate_args is False
    for method in ("predict_proba", "predict_latent", "transform", "score_ood"):
        assert np.isfinite(getattr(clf, method)(X)).all()


def test_the_vocabulary_is_relearnt_exactly_when_the_network_is_rebuilt():
    X_new = np.where(X > 0, X + 1000, 0)
    clf = _estimator(gradient="ste", **SMALL).fit(X, Y)
    first = clf.vocabulary_.copy()
    with pytest.warns(UserWarning, match="did not see"):
        clf.partial_fit(X_new, Y)  # continues the network: keeps its vocabulary
    np.testing.assert_array_equal(clf.vocabulary_, first)
    clf.fit(X_new, Y)  # no warm start: a new network, a new vocabulary
    np.testing.assert_array_equal(clf.vocabulary_, np.unique(X_new[X_new > 0]))
    with pytest.warns(UserWarning, match="did not see"):
        clf.set_params(warm_start=True).fit(X, Y)  # a warm start continues it
    np.testing.assert_array_equal(clf.vocabulary_, np.unique(X_new[X_new > 0]))
    assert clf.module_.encoder.embedding.num_embeddings == len(clf.vocabulary_) + 2
