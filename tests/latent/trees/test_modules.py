"""Default latent-tree networks: padding invariance, a real graph convolution, gradient flow."""

import pytest
import torch

from ebmclassifier.latent.score_function import RunningMeanBaseline
from ebmclassifier.latent.trees import arc_mask, heads_to_arcs
from ebmclassifier.latent.trees.latent import TREE_GRADIENTS, tree_latent
from ebmclassifier.latent.trees.networks import (
    BiLSTMArcScorer,
    TreeGCNDecoder,
    TreeLatentModel,
    sequence_lengths,
)

X = torch.tensor([[3, 7, 2, 9], [4, 1, 0, 0], [5, 0, 0, 0]])


@pytest.mark.parametrize("scorer", ["biaffine", "mlp"])
def test_arc_scorer_ignores_padding(scorer):
    torch.manual_seed(0)
    model = BiLSTMArcScorer(10, 6, 5, 4, scorer=scorer)
    with torch.no_grad():
        batched = model(X)
        for b, n in enumerate(sequence_lengths(X).tolist()):
            single = model(X[b : b + 1, :n])[0]
            torch.testing.assert_close(batched[b, : n + 1, : n + 1], single)


def test_gcn_layer_matches_its_formula():
    torch.manual_seed(1)
    decoder = TreeGCNDecoder(10, 3, embedding_dim=4, hidden_size=4, n_layers=1)
    x = X[:1]
    z = heads_to_arcs(torch.tensor([[2, 0, 2, 3]]))  # 2 <- root, 1 <- 2, 3 <- 2, 4 <- 3
    e = torch.cat([decoder.root[None], decoder.embedding(x[0])])
    heads = [None, 2, 0, 2, 3]
    children = {0: [2], 1: [], 2: [1, 3], 3: [4], 4: []}
    states = []
    for m in range(5):
        pre = decoder.self_loops[0](e[m]) + decoder.from_mods[0](
            sum((e[c] for c in children[m]), torch.zeros(4))
        )
        if heads[m] is not None:
            pre = pre + decoder.from_head[0](e[heads[m]])
        states.append(torch.relu(pre))
    words = torch.stack(states[1:])
    expected = decoder.classifier(torch.cat([words.mean(0), words.max(0).values]))
    torch.testing.assert_close(decoder(x, z)[0], expected)


def test_decoder_depends_on_the_tree_and_ignores_padding():
    torch.manual_seed(2)
    decoder = TreeGCNDecoder(10, 2, 8, 8)
    a = heads_to_arcs(torch.tensor([[2, 0, 2, 3]]))
    b = heads_to_arcs(torch.tensor([[0, 1, 2, 3]]))
    assert not torch.allclose(decoder(X[:1], a), decoder(X[:1], b))
    z = heads_to_arcs(torch.tensor([[0, 1]]))
    z_padded = torch.zeros(1, 5, 5)
    z_padded[:, :3, :3] = z
    torch.testing.assert_close(decoder(X[1:2], z_padded), decoder(X[1:2, :2], z))


@pytest.mark.parametrize("gradient", TREE_GRADIENTS)
def test_every_method_reaches_the_encoder(gradient):
    # SPIGOT's gradient vanishes when the decoder already prefers the MAP tree (the step
    # lies in the normal cone), so use a batch large enough for that not to hold everywhere
    torch.manual_seed(3)
    lengths = torch.tensor([6, 5, 4, 6, 3, 6, 2, 5])
    x = torch.randint(1, 10, (8, 6)) * (torch.arange(6) < lengths[:, None])
    y = torch.randint(0, 2, (8,))
    model = TreeLatentModel(BiLSTMArcScorer(10, 6, 6, 6), TreeGCNDecoder(10, 2, 6, 6), gradient)

    def per_sample_loss(z):
        return torch.nn.functional.cross_entropy(model.decoder(x, z), y, reduction="none")

    scores = model.encoder(x)
    z = tree_latent(scores, lengths, gradient, per_sample_loss, generator=torch.Generator())
    per_sample_loss(z).sum().backward()
    grads = [p.grad for p in model.encoder.parameters() if p.grad is not None]
    assert grads and sum(float(g.abs().sum()) for g in grads) > 0
    assert model(x).shape == (8, 2)
    latent = model.latent(x)
    assert torch.all(latent[~arc_mask(lengths, 6)] == 0)


def test_sequence_lengths_rejects_holes_and_empty_rows():
    with pytest.raises(ValueError, match="row 0"):
        sequence_lengths(torch.tensor([[1, 0, 2]]))
    with pytest.raises(ValueError, match="row 1"):
        sequence_lengths(torch.tensor([[1, 2], [0, 0]]))
    with pytest.raises(ValueError, match="scorer"):
        BiLSTMArcScorer(5, scorer="bilinear")


@pytest.mark.parametrize(
    "method",
    ["forward", "latent", "predict_heads", "marginals", "predict_latent", "latent_features"],
)
@pytest.mark.parametrize(
    "x, match",
    [
        ([[0, 0, 0]], "row 0 is \\[0, 0, 0\\]"),  # gave nan logits
        ([[3, 0, 4]], "row 0 is \\[3, 0, 4\\]"),  # gave a 2-word tree
        ([[3, -1, 0]], "non-negative"),  # gave torch's IndexError
    ],
)
def test_tree_latent_model_checks_its_token_ids(method, x, match):
    # regression: release 0.1 raised ValueError here; the model then stopped checking
    model = TreeLatentModel(BiLSTMArcScorer(10, 6, 6, 6), TreeGCNDecoder(10, 2, 6, 6))
    with pytest.raises(ValueError, match=match):
        getattr(model, method)(torch.tensor(x))


def test_tree_latent_model_checks_once_per_call_and_not_without_validate_args(monkeypatch):
    from ebmclassifier.latent.trees import networks

    calls = []
    monkeypatch.setattr(networks, "sequence_lengths", lambda x: calls.append(x) or (x > 0).sum(1))
    encoder, decoder = BiLSTMArcScorer(10, 6, 6, 6), TreeGCNDecoder(10, 2, 6, 6)
    checked = TreeLatentModel(encoder, decoder)
    unchecked = TreeLatentModel(encoder, decoder, validate_args=False)
    for method in ("forward", "latent", "predict_heads", "marginals", "latent_features"):
        calls.clear()
        torch.testing.assert_close(
            getattr(checked, method)(X), getattr(unchecked, method)(X), rtol=0, atol=0
        )
        assert len(calls) == 1, method


def test_tree_latent_model_has_the_score_function_baseline_unless_given_one():
    # regression: baseline=None overwrote the RunningMeanBaseline that LatentModel creates
    encoder, decoder = BiLSTMArcScorer(10, 6, 6, 6), TreeGCNDecoder(10, 2, 6, 6)
    model = TreeLatentModel(encoder, decoder, gradient="sfe")
    assert isinstance(model.baseline, RunningMeanBaseline)
    assert "baseline.value" in model.state_dict()
    lengths = sequence_lengths(X)
    z = tree_latent(
        model.encoder(X), lengths, "sfe", lambda z: z.sum((1, 2)), baseline=model.baseline
    )
    z.sum().backward()
    # the first update sets b to the batch mean of the losses, here of the sentence lengths
    assert int(model.baseline.n_updates) == 1
    assert float(model.baseline.value) == pytest.approx(7 / 3)
    own = RunningMeanBaseline(momentum=0.5)
    assert TreeLatentModel(encoder, decoder, "sfe", baseline=own).baseline is own
