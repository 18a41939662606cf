"""The values of a saved file's metadata: Python values as JSON, and back, from anyone.

JSON has no tuple, array, dict with non-string keys or class, so :func:`encode` tags them
(``{"__tuple__": [...]}``, ``{"__array__": [...], "dtype": "<f8"}``, ``{"__dict__": [[k, v],
...]}``, ``{"__class__": "module:name"}``) and :func:`decode` reads the tags back. A file may come
from anyone, so :func:`decode` takes only what :func:`encode` writes: a tag of the wrong form is a
``ValueError``, a class only where a parameter may name one and only through
:func:`~ebmclassifier.saving._allowed_classes.trusted_class`, and an array only of a plain dtype
(numbers, booleans, strings, objects) whose memory, its items times the item size its ``dtype``
declares (a string dtype without a length, ``"<U"``: the longest item's), is within
``FileLimits.array_bytes``, checked before numpy allocates it (``"<U500000000"`` asks 2 GB per
item, ``"<U"`` as much for each item as for the longest).

A ``DistributionalConstraint``'s ``distributional.json`` has values of its own, untagged: priors
as ``{"pairs": [[label, share], ...]}`` or ``{"array": [...]}``, fitted arrays as lists of
numbers, labels and fitted numbers as JSON scalars; :func:`decode_priors`,
:func:`decode_numbers` and :func:`closed` read them as strictly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._allowed_classes import check_attribute_kind, class_path, loadable, trusted_class
from ._archive import FileLimits, Refused

__all__ = [
    "LABEL",
    "NotSaved",
    "array_or_none",
    "closed",
    "decode",
    "decode_numbers",
    "decode_priors",
    "encode",
    "encode_priors",
    "fitted_value",
    "plain",
]

#: The dtype kinds an array of the metadata may have: what ``tolist`` turns into JSON.
ARRAY_KINDS = "biufUO"
_SCALARS = (type(None), bool, int, float, str)


class NotSaved(Exception):
    """A value that JSON and the trusted classes cannot express."""


def encode(value) -> Any:
    """A parameter or fitted attribute as JSON, tagging what JSON has no type for."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return {"__array__": [encode(v) for v in value.tolist()], "dtype": value.dtype.str}
    if isinstance(value, tuple | list):
        tag = "__tuple__" if isinstance(value, tuple) else "__list__"
        return {tag: [encode(v) for v in value]}
    if isinstance(value, dict):
        return {"__dict__": [[encode(k), encode(v)] for k, v in value.items()]}
    if isinstance(value, type) and loadable(value):  # what load() would refuse is not saved
        return {"__class__": class_path(value)}
    raise NotSaved(value)


def _malformed(value) -> Refused:
    shown = repr(value)
    return Refused(
        f"its metadata holds the malformed value {shown[:80]}{'...' * (len(shown) > 80)}"
    )


def decode(value, limits: FileLimits, classes: bool = True) -> Any:
    """The inverse of :func:`encode`; ``classes=False`` refuses a class (a fitted attribute)."""
    if isinstance(value, _SCALARS):
        return value
    if not isinstance(value, dict):
        raise _malformed(value)
    if set(value) == {"__array__", "dtype"}:
        return _array(value["__array__"], value["dtype"], limits)
    if len(value) != 1:
        raise _malformed(value)
    ((tag, content),) = value.items()
    if tag in ("__tuple__", "__list__", "__dict__") and not isinstance(content, list):
        raise _malformed(value)
    if tag == "__tuple__":
        return tuple(decode(v, limits, classes) for v in content)
    if tag == "__list__":
        return [decode(v, limits, classes) for v in content]
    if tag == "__dict__":
        return _dict(content, limits, classes)
    if tag == "__class__" and classes:
        try:
            return trusted_class(content)
        except ValueError as err:
            raise Refused(str(err)) from None
    if tag == "__class__":
        raise Refused(f"its metadata names the class {content!r} where a value is expected")
    raise Refused(f"its metadata holds the unknown tag {tag!r}")


def _dict(pairs: list, limits: FileLimits, classes: bool) -> dict:
    decoded = {}
    for pair in pairs:
        if not (isinstance(pair, list) and len(pair) == 2):
            raise _malformed(pair)
        key = decode(pair[0], limits, classes)
        try:
            decoded[key] = decode(pair[1], limits, classes)
        except TypeError:  # an unhashable key: a list
            raise _malformed(pair) from None
    return decoded


def _dtype(text) -> np.dtype:
    """The dtype ``text`` names, if it is one an array of the metadata may have."""
    try:
        dtype = np.dtype(text) if isinstance(text, str) and len(text) <= 16 else None
    except (TypeError, ValueError, SyntaxError):  # numpy reads a subarray's shape as Python
        dtype = None
    if dtype is None or dtype.kind not in ARRAY_KINDS or dtype.fields is not None:
        raise Refused(f"its metadata declares an array of dtype {str(text)[:40]!r}")
    return dtype


def _items(items, limits: FileLimits) -> tuple[list, int, int]:
    """``(items decoded, number of scalars, longest scalar as text)``: an array's items,
    scalars or lists of them."""
    if not isinstance(items, list):
        raise _malformed(items)
    decoded, count, longest = [], 0, 0
    for item in items:
        if isinstance(item, _SCALARS):
            decoded.append(item)
            count += 1
            longest = max(longest, len(str(item)))
            continue
        if not (isinstance(item, dict) and set(item) == {"__list__"}):
            raise _malformed(item)
        inner, inner_count, inner_longest = _items(item["__list__"], limits)
        decoded.append(inner)
        count += max(inner_count, 1)
        longest = max(longest, inner_longest)
    return decoded, count, longest


def _item_size(dtype: np.dtype, longest: int) -> int:
    """The bytes numpy gives an item of ``dtype`` for items of which the longest, as text, has
    ``longest`` characters: a string dtype without a length (``"<U"``, item size 0) takes the
    longest item's, 4 bytes a character."""
    if dtype.kind == "U" and dtype.itemsize == 0:
        return 4 * longest
    return dtype.itemsize


def _array(items, text, limits: FileLimits) -> np.ndarray:
    """The array of ``items`` (scalars or nested ``__list__``) of the dtype ``text``, its memory
    checked against ``limits.array_bytes`` before numpy allocates it."""
    dtype = _dtype(text)
    items, count, longest = _items(items, limits)
    size = count * _item_size(dtype, longest)
    if size > limits.array_bytes:
        raise Refused(
            f"its metadata declares an array of {count} items of dtype {dtype.str!r}, "
            f"{size} bytes, more than the {limits.array_bytes} that load allocates for one "
            "(FileLimits.array_bytes)"
        )
    try:
        return np.asarray(items, dtype=dtype)
    except (ValueError, TypeError, OverflowError) as err:
        raise Refused(f"its metadata holds an array numpy cannot build ({err})") from None


# ---------------------------------------------------------------- DistributionalConstraint's

#: What a label or a plain fitted value of a ``distributional.json`` may be.
LABEL = (bool, int, float, str)


def plain(value):
    """A label, share or count as a JSON value."""
    return value.item() if isinstance(value, np.generic) else value


def encode_priors(value):
    """``priors`` / ``train_priors`` as JSON: a dict becomes a list of [label, share] pairs."""
    if isinstance(value, dict):
        return {"pairs": [[plain(k), float(v)] for k, v in value.items()]}
    if value is None or isinstance(value, str):
        return value
    return {"array": np.asarray(value, dtype=float).tolist()}


def decode_priors(value):
    """The inverse of :func:`encode_priors`, for ``priors`` / ``train_priors`` from a file."""
    if value is None or isinstance(value, str):
        return value
    if set(value) == {"pairs"} and isinstance(value["pairs"], list):
        pairs = value["pairs"]
        if all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], LABEL) for p in pairs):
            return {label: _share(share) for label, share in pairs}
    if set(value) == {"array"}:
        return decode_numbers(value["array"], "priors")
    raise Refused(f"its priors {str(value)[:80]!r} are neither pairs nor an array")


def _share(value) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise Refused(f"its priors give a share of {str(value)[:40]!r}, not a number")
    return value


def decode_numbers(value, name: str) -> np.ndarray:
    """A saved array of floats (nested lists of numbers) as numpy's; its size is the JSON's."""
    try:
        array = np.asarray(value, dtype=float)
    except (ValueError, TypeError) as err:
        raise Refused(f"its {name} is not an array of numbers ({err})") from None
    if array.dtype != float:
        raise Refused(f"its {name} is not an array of numbers")
    return array


def fitted_value(name: str, value, arrays: tuple[str, ...]):
    """A fitted value of a ``distributional.json``: an array of ``arrays`` decoded, then
    checked of the attribute's kind (:data:`~._allowed_classes.ATTRIBUTE_KINDS`)."""
    if name in arrays and value is not None:
        value = decode_numbers(value, name)
    try:
        check_attribute_kind(name, value)
    except ValueError as err:
        raise Refused(str(err)) from None
    return value


def array_or_none(value):
    """A fitted array as a JSON list; ``None`` (an unused attribute) as it is."""
    return None if value is None else np.asarray(value).tolist()


def closed(values: dict, names: tuple[str, ...], what: str) -> dict:
    """``values``, each a name of ``names`` (what ``DistributionalConstraint`` saves) and a
    JSON scalar or a list (an array)."""
    for name, value in values.items():
        if name not in names:
            raise Refused(
                f"it sets the {what} {name!r}, which DistributionalConstraint does not save "
                f"(it saves {', '.join(names)})"
            )
        if not isinstance(value, (*LABEL, list, type(None))):
            raise Refused(f"it gives the {what} {name!r} a JSON {type(value).__name__}")
    return values
