"""Batch augmentations against hand computations: crops by numpy slicing, flips, noise, seeding."""

import copy
import pickle

import numpy as np
import pytest
import torch

from ebmclassifier.augment import (
    Compose,
    GaussianNoise,
    HorizontalFlip,
    RandomCrop,
    check_augmentation,
    paper_augmentation,
)

NUMPY_MODE = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _images(n=6, shape=(3, 7, 5), seed=0) -> torch.Tensor:
    return torch.randn(n, *shape, generator=_gen(seed))


def _numpy_crop(x: np.ndarray, offsets: np.ndarray, p: int, mode: str, fill: float) -> np.ndarray:
    """Pad each sample with numpy and slice the window at its offsets, one sample at a time."""
    sizes = x.shape[2:]
    out = np.empty_like(x)
    for i, sample in enumerate(x):
        widths = [(0, 0)] + [(p, p)] * len(sizes)
        kwargs = {"constant_values": fill} if mode == "constant" else {}
        padded = np.pad(sample, widths, mode=NUMPY_MODE[mode], **kwargs)
        window = tuple(slice(o, o + s) for o, s in zip(offsets[i], sizes, strict=True))
        out[i] = padded[(slice(None),) + window]
    return out


# ---------------------------------------------------------------------------- RandomCrop


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate"])
@pytest.mark.parametrize("shape", [(3, 7, 5), (2, 9)], ids=["image", "sequence"])
def test_random_crop_is_numpy_pad_and_slice_at_the_drawn_offsets(mode, shape):
    x = _images(shape=shape)
    p, fill = 3, 0.7
    out = RandomCrop(padding=p, padding_mode=mode, fill=fill)(x, generator=_gen(5))
    # The documented draw: one (top, left) -- or one shift for sequences -- per sample.
    offsets = torch.randint(0, 2 * p + 1, (len(x), len(shape) - 1), generator=_gen(5))
    expected = _numpy_crop(x.numpy(), offsets.numpy(), p, mode, fill)
    np.testing.assert_array_equal(out.numpy(), expected)


def test_random_crop_windows_found_by_search_without_replaying_the_draw():
    # Independent of the draw order: every output is exactly one window of its padded input.
    x = torch.rand(64, 1, 6, 6, generator=_gen(1)) + 1.0  # distinct values, none is the fill
    p = 2
    out = RandomCrop(padding=p)(x, generator=_gen(2)).numpy()
    found = []
    for i in range(len(x)):
        padded = np.pad(x[i].numpy(), [(0, 0), (p, p), (p, p)])
        hits = [
            (top, left)
            for top in range(2 * p + 1)
            for left in range(2 * p + 1)
            if np.array_equal(padded[:, top : top + 6, left : left + 6], out[i])
        ]
        assert len(hits) == 1
        found.append(hits[0])
    assert len(set(found)) > 10  # per-sample offsets, not one crop for the whole batch


def test_random_crop_zero_padding_returns_an_equal_new_tensor():
    x = _images()
    out = RandomCrop(padding=0)(x)
    assert torch.equal(out, x) and out.data_ptr() != x.data_ptr()


def test_random_crop_rejects_flat_input_and_too_large_reflect_padding():
    with pytest.raises(ValueError, match=r"got a batch of shape \(4, 10\).*GaussianNoise"):
        RandomCrop()(torch.zeros(4, 10))
    with pytest.raises(ValueError, match="needs padding smaller than the padded sides"):
        RandomCrop(padding=4, padding_mode="reflect")(torch.zeros(2, 1, 4, 8))


# ------------------------------------------------------------------------ HorizontalFlip


@pytest.mark.parametrize("shape", [(3, 4, 5), (2, 7)], ids=["image", "sequence"])
def test_flip_reverses_the_last_axis_of_exactly_the_drawn_samples(shape):
    x = _images(n=40, shape=shape)
    out = HorizontalFlip(p=0.5)(x, generator=_gen(3))
    flipped = (torch.rand(40, generator=_gen(3)) < 0.5).numpy()
    assert 0 < flipped.sum() < 40
    xn, on = x.numpy(), out.numpy()
    np.testing.assert_array_equal(on[flipped], xn[flipped][..., ::-1])
    np.testing.assert_array_equal(on[~flipped], xn[~flipped])


def test_flip_probability():
    # Each sample is (k, -k) with k > 0: a flipped one starts with a negative value.
    x = (torch.arange(1.0, 4001.0)[:, None] * torch.tensor([1.0, -1.0])).reshape(4000, 1, 1, 2)
    assert torch.equal(HorizontalFlip(p=0.0)(x), x)
    assert torch.equal(HorizontalFlip(p=1.0)(x), x.flip(-1))
    out = HorizontalFlip(p=0.3)(x, generator=_gen(0))
    fraction = (out[:, 0, 0, 0] < 0).double().mean().item()
    assert abs(fraction - 0.3) < 5 * (0.3 * 0.7 / 4000) ** 0.5


# ------------------------------------------------------------------------- GaussianNoise


def test_noise_is_std_times_standard_normal_draw():
    x = _images(n=4, shape=(2, 3))
    out = GaussianNoise(std=0.25)(x, generator=_gen(7))
    eps = torch.randn(x.shape, generator=_gen(7))
    torch.testing.assert_close(out, x + 0.25 * eps, rtol=0, atol=0)


def test_noise_statistics_on_flat_input():
    x = torch.full((500, 400), 3.0, dtype=torch.float64)
    out = GaussianNoise(std=0.03)(x, generator=_gen(0))
    assert out.dtype == torch.float64
    delta = (out - x).flatten()
    # 200,000 draws: the sample std is within 1 % of 0.03 and the mean within 5 standard errors.
    assert abs(delta.std().item() / 0.03 - 1) < 0.01
    assert abs(delta.mean().item()) < 5 * 0.03 / len(delta) ** 0.5


def test_noise_rejects_integer_batches():
    with pytest.raises(ValueError, match="floating-point batch; got torch.int64"):
        GaussianNoise()(torch.zeros(3, 4, dtype=torch.long))


# ------------------------------------------------------------------ seeding and composing


@pytest.mark.parametrize(
    "augment",
    [RandomCrop(2), HorizontalFlip(), GaussianNoise(0.1), paper_augmentation()],
    ids=repr,
)
def test_same_seed_same_output_other_seed_other_output(augment):
    x = _images(n=16, shape=(3, 8, 8))
    a = augment(x, generator=_gen(11))
    assert torch.equal(a, augment(x, generator=_gen(11)))
    assert not torch.equal(a, augment(x, generator=_gen(12)))
    assert a.shape == x.shape and a.dtype == x.dtype and a.device == x.device
    # Without a generator the draws come from torch's global generator, as seeded per epoch.
    with torch.random.fork_rng():
        torch.manual_seed(11)
        assert torch.equal(augment(x), a)


def test_compose_passes_one_generator_through_in_order():
    x = _images(n=16, shape=(3, 8, 8))
    steps = [RandomCrop(2, "reflect"), HorizontalFlip(0.5), GaussianNoise(0.1)]
    g = _gen(4)
    expected = steps[2](steps[1](steps[0](x, generator=g), generator=g), generator=g)
    assert torch.equal(Compose(steps)(x, generator=_gen(4)), expected)


def test_compose_takes_plain_callables_without_a_generator():
    assert torch.equal(
        Compose([lambda x: x * 2, torch.neg])(torch.ones(2, 3)), -2 * torch.ones(2, 3)
    )


def test_paper_augmentation_is_the_scripts_recipe():
    augment = paper_augmentation()
    crop, flip, noise = augment.transforms
    assert (crop.padding, crop.padding_mode) == (4, "reflect")
    assert flip.p == 0.5 and noise.std == 0.03
    svhn = paper_augmentation(flip=False, noise_std=0.0)
    assert [type(t) for t in svhn.transforms] == [RandomCrop]


def test_augmentations_pickle_and_copy():
    augment = paper_augmentation()
    x = _images(n=4, shape=(3, 8, 8))
    for twin in (pickle.loads(pickle.dumps(augment)), copy.deepcopy(augment)):
        assert repr(twin) == repr(augment)
        assert torch.equal(twin(x, generator=_gen(0)), augment(x, generator=_gen(0)))


# ------------------------------------------------------------------ parameter validation


def test_bad_parameters_are_named_together():
    with pytest.raises(ValueError) as info:
        RandomCrop(padding=-1, padding_mode="wrap")
    message = str(info.value)
    assert "The 'padding' parameter of RandomCrop must be an int >= 0. Got -1 instead." in message
    assert "'padding_mode' parameter of RandomCrop must be one of 'constant'" in message
    with pytest.raises(ValueError, match=r"'padding' parameter of RandomCrop .* Got 2.5"):
        RandomCrop(padding=2.5)
    with pytest.raises(ValueError, match=r"'p' parameter of HorizontalFlip .*\[0.0, 1.0\]"):
        HorizontalFlip(p=1.5)
    with pytest.raises(ValueError, match=r"'std' parameter of GaussianNoise .* Got -0.1"):
        GaussianNoise(std=-0.1)
    with pytest.raises(TypeError, match="'transforms' parameter of Compose .* Got 3"):
        Compose([RandomCrop(), 3])
    with pytest.raises(TypeError, match="'transforms' parameter of Compose"):
        Compose(RandomCrop())


# ---------------------------------------------------------------------- check_augmentation


def test_check_augmentation_accepts_the_library_augmentations():
    x = _images(n=8, shape=(3, 8, 8))
    for augment in (paper_augmentation(), Compose([]), GaussianNoise(0.1)):
        check_augmentation(augment, x)


@pytest.mark.parametrize(
    ("augment", "message"),
    [
        (lambda x: x[:, :, 1:, 1:], r"returned shape \(8, 3, 7, 7\) instead of \(8, 3, 8, 8\)"),
        (lambda x: x.double(), "returned dtype torch.float64 instead of torch.float32"),
        (lambda x: x.add_(1.0), "modified its input in place"),
        (lambda x: x / 0.0, "returned NaN or infinite values"),
        (RandomCrop(padding=9, padding_mode="reflect"), "failed on a training batch of shape"),
    ],
    ids=["shape", "dtype", "in-place", "non-finite", "raises"],
)
def test_check_augmentation_errors(augment, message):
    with pytest.raises(ValueError, match=message):
        check_augmentation(augment, _images(n=8, shape=(3, 8, 8)))


def test_check_augmentation_type_errors():
    x = _images(n=2, shape=(3, 4, 4))
    with pytest.raises(TypeError, match="'augmentation' parameter must be None or a callable"):
        check_augmentation("flip", x)
    with pytest.raises(TypeError, match="must return a torch.Tensor; it returned ndarray"):
        check_augmentation(lambda b: b.numpy(), x)


def test_check_augmentation_leaves_the_global_random_state_alone():
    x = _images(n=8, shape=(3, 8, 8))
    with torch.random.fork_rng():
        torch.manual_seed(0)
        check_augmentation(paper_augmentation(), x)
        after_check = torch.rand(3)
        torch.manual_seed(0)
        assert torch.equal(torch.rand(3), after_check)


# ------------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
def test_augmentations_on_cuda_batches():
    x = _images(n=16, shape=(3, 8, 8))
    xc = x.to("cuda")
    augment = paper_augmentation()
    # A CPU generator draws on the CPU: the same augmentation on any device.
    torch.testing.assert_close(augment(xc, generator=_gen(1)).cpu(), augment(x, generator=_gen(1)))
    # Without a generator the CUDA default generator is used, which torch.manual_seed seeds.
    with torch.random.fork_rng(devices=[0]):
        torch.manual_seed(5)
        first = augment(xc)
        torch.manual_seed(5)
        assert torch.equal(first, augment(xc)) and first.is_cuda
    cuda_gen = torch.Generator(device="cuda").manual_seed(2)
    assert augment(xc, generator=cuda_gen).is_cuda
    check_augmentation(augment, xc)
    with pytest.raises(ValueError, match="returned device cpu instead of cuda"):
        check_augmentation(lambda b: b.cpu(), xc)
