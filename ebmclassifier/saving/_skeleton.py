"""The scikit-learn part of a composite file: skops's file, read as hostile input.

skops (``skops.io``) refuses every type that is not trusted before it builds anything, but it
reads its own archive as it comes: each member whole, ``schema.json`` and the JSON values in it
with Python's parser, each array with ``np.load``, which allocates the shape its header
declares. So before skops sees the bytes, :func:`load_skeleton` checks what it would read:

- its table of contents within 1 MiB, its members unencrypted, stored or deflated, each within
  ``compression_ratio`` of its compressed size and all of them within ``weights_bytes``;
- ``schema.json`` within ``json_bytes``, UTF-8 and nested at most ``skops_depth`` deep, and
  every JSON text inside it (skops keeps numbers and strings as JSON it parses later) too;
- every ``.npy`` member (an array) holds exactly the bytes its header declares, of a dtype
  without objects; every ``.npz`` member (a scipy sparse matrix) is an archive of such arrays.

Then skops lists the types the file names that are not trusted (skops's defaults, the types
:data:`TRUSTED` adds, and what the caller trusts); any is refused by name, with the way to trust
it, before skops builds the object.
"""

from __future__ import annotations

import io
import json
import math
import re
import struct
import tokenize
import zipfile

import numpy as np
import skops.io

from ._archive import (
    NOT_AN_ARCHIVE,
    FileLimits,
    Refused,
    check_sizes,
    checked_json,
    json_depth,
    zip_infos,
)

__all__ = ["TRUSTED", "load_skeleton", "type_names"]

#: The types that ``load`` trusts besides skops's defaults, each built by skops without running
#: its ``__init__``: plain holders of fitted values that ``CalibratedClassifierCV`` keeps (one per
#: fold) and scikit-learn's ``Bunch`` (a dict whose keys read as attributes, a
#: ``ProductOfExperts``'s ``named_estimators_``), which skops does not list because they are
#: private; and the library's ``ProductOfExperts``, whose experts are the library's estimators,
#: each read from its own file. (``ConceptComposition`` holds a torch chain start: ``save``
#: refuses it.)
TRUSTED = (
    "sklearn.calibration._CalibratedClassifier",
    "sklearn.calibration._SigmoidCalibration",
    "sklearn.utils._bunch.Bunch",
    "ebmclassifier.compose.product.ProductOfExperts",
)
#: Raised by skops (or zipfile, numpy) on a skeleton its checks let through but skops cannot
#: read: a node without its keys, a member it names that is not there, an unknown loader.
_SKOPS_ERRORS = (
    KeyError,
    TypeError,
    ValueError,
    AttributeError,
    IndexError,
    ImportError,
    EOFError,
    struct.error,
    zipfile.BadZipFile,
    NotImplementedError,
)
_NPY_HEADERS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}
_MEMBER = "its skeleton.skops"
_OF_MEMBER = "its skeleton.skops's"


def _check_npy(data: bytes, name: str) -> None:
    """The ``.npy`` array ``data`` holds exactly the bytes its header declares, of a dtype
    without objects (``np.load`` allocates the declared shape before it reads)."""
    member = io.BytesIO(data)
    try:
        header = _NPY_HEADERS.get(np.lib.format.read_magic(member))
        if header is None:
            raise ValueError("a format version numpy's reader of this library does not read")
        shape, _, dtype = header(member)
    except (ValueError, SyntaxError, TypeError, EOFError, tokenize.TokenError) as err:
        raise Refused(
            f"{_MEMBER} holds the array {name!r}, whose header is not numpy's ({err})"
        ) from None
    declared = math.prod(shape) * dtype.itemsize  # Python ints: no overflow
    held = len(data) - member.tell()
    if dtype.hasobject or declared != held:
        raise Refused(
            f"{_MEMBER} holds the array {name!r}, whose header declares shape {shape} of "
            f"{dtype} ({declared} bytes) where it holds {held} bytes of data"
        )


def _members(data: bytes, limits: FileLimits, what: str) -> dict[str, bytes]:
    """The members of the archive ``data`` (``what``'s: "its skeleton.skops's"), their sizes
    checked before they are read."""
    try:
        archive, infos = zip_infos(io.BytesIO(data), what)
        with archive:
            check_sizes(infos, "schema.json", limits, what)
            return {info.filename: archive.read(info) for info in infos}
    except Refused:
        raise
    except NOT_AN_ARCHIVE as err:
        archive_name = what.removesuffix("'s")
        raise Refused(f"{archive_name} is not a zip archive ({err})") from None


def _check_arrays(members: dict[str, bytes], limits: FileLimits) -> None:
    """Every array member declares what it holds; a sparse matrix's archive too, once."""
    for name, data in members.items():
        if name.endswith(".npy"):
            _check_npy(data, name)
        elif name.endswith(".npz"):
            inner = _members(data, limits, f"{_OF_MEMBER} {name}'s")
            for inner_name, inner_data in inner.items():
                _check_npy(inner_data, f"{name}/{inner_name}")


def _check_schema(members: dict[str, bytes], limits: FileLimits) -> None:
    """``schema.json`` UTF-8 and nested at most ``limits.skops_depth`` deep, as is every JSON
    text it holds (the ``content`` that skops parses when it builds a number or a string)."""
    if "schema.json" not in members:
        raise Refused(f"{_MEMBER} has no schema.json")
    text = checked_json(
        members["schema.json"], "skeleton's schema.json", limits.skops_depth, "skops_depth"
    )
    try:
        schema = json.loads(text)
    except ValueError as err:
        raise Refused(f"{_MEMBER}'s schema.json is not JSON ({err})") from None
    stack = [schema]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            content = value.get("content")
            if isinstance(content, str) and json_depth(content.encode()) > limits.skops_depth:
                raise Refused(
                    f"{_MEMBER}'s schema.json holds a JSON text nested deeper than the "
                    f"{limits.skops_depth} that load reads (FileLimits.skops_depth)"
                )
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)


def _untrusted(data: bytes, trusted: list[str]) -> list[str]:
    try:
        found = skops.io.get_untrusted_types(data=data)
    except _SKOPS_ERRORS as err:
        raise Refused(
            f"{_MEMBER} is not a file skops can read ({type(err).__name__}: {err})"
        ) from None
    return sorted(set(found) - set(trusted))


def load_skeleton(data: bytes, trusted: list[str], limits: FileLimits):
    """The object skops's file ``data`` holds, after the checks of the module's notes.

    ``trusted``: the type names (``"module.name"``, as skops writes them) trusted besides
    skops's defaults. A type that is not trusted is refused by name.
    """
    _check_arrays(members := _members(data, limits, _OF_MEMBER), limits)
    _check_schema(members, limits)
    refused = _untrusted(data, trusted)
    if refused:
        shown = ", ".join(repr(name) for name in refused[:20])
        raise Refused(
            f"{_MEMBER} names types that load does not trust: {shown}. Nothing was built. "
            "Review them (skops.io.get_untrusted_types lists them), and if you trust them, pass "
            f"load(path, trusted=[{shown}])"
        )
    try:
        return skops.io.loads(data, trusted=trusted)
    except _SKOPS_ERRORS as err:
        raise Refused(
            f"{_MEMBER} is not a file skops can read ({type(err).__name__}: {err})"
        ) from None


def type_names(trusted) -> list[str]:
    """The names of ``trusted`` (types, or names as skops writes them: ``"module.name"``)."""
    if trusted is None:
        return []
    if isinstance(trusted, str | type):
        trusted = [trusted]
    names = []
    for item in trusted:
        if isinstance(item, type):
            names.append(f"{item.__module__}.{item.__qualname__}")
        elif isinstance(item, str) and re.fullmatch(r"[\w.]+", item):
            names.append(item)
        else:
            raise TypeError(
                f"trusted must be a list of types or of their names ('module.name', as "
                f"skops.io.get_untrusted_types gives them). Got {item!r} in it."
            )
    return names
