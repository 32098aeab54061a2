"""Model files: the archive's checks, made before any skops code runs, and the checks of every value in it.

`asp_cli.predict.model` loads and saves files with these; skops' trusted loading is the one loader. Here are
the limits on what a file may declare (member sizes from the central directory, nesting depth, the types of
every schema node), on what it may hold (finite numbers within bounds, texts, parameters), and the rewrite
that makes a saved file the same bytes for the same model (docs/predictor.md, "Model files").
"""

from __future__ import annotations

import errno
import io
import json
import math
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from asp_cli import limits
from asp_cli.errors import PredictorError, UnsafePredictorError, missing_hint, stdin_said

FORMAT_VERSION = 2  # the newest format this asp reads
MAX_RANDOM_STATE = 2**32 - 1  # scikit-learn's random_state range
META_MEMBER = "asp_meta.json"

# Every type a model file may ask skops to build: plain containers and NumPy arrays, nothing else (the
# model holds no estimator object). Checked against every node of the file's schema, not only against the
# types skops itself distrusts, so skops' own default trust list does not widen ours.
TRUSTED_TYPES: tuple[str, ...] = (
    "builtins.bool",
    "builtins.dict",
    "builtins.float",
    "builtins.int",
    "builtins.list",
    "builtins.str",
    "builtins.tuple",
    "numpy.dtype",
    "numpy.float64",
    "numpy.int64",
    "numpy.ndarray",
)

SCHEMA_MEMBER = "schema.json"
# Bounds on what a model holds (a fitted model is far inside them: coefficients below 2, intercepts and
# features' medians, knots and centres below 10 on the data asp was tried on). Beyond them a file is
# poisoned or damaged: predictions would overflow, or be NaN, or sit at the cap or at 1 for every prompt.
MAX_ABS_WEIGHT = 1e6  # coefficients and intercepts (log-token units)
MAX_ABS_FEATURE = 1e9  # fill values, knots and centres (feature units: counts and log counts)
MIN_SCALE = 1e-12  # `fit` sets scales below 1e-9 to 1
MAX_LOG_SPREAD = 10.0  # sigma of log length; 0.3 is typical
MAX_VOCABULARY = 10_000_000
MAX_KNOTS = 64
# Every parameter a file may set, with its type and range (log_spread may also be null: estimated at fit).
_PARAM_RANGES: dict[str, tuple[type, float, float]] = {
    "max_vocabulary": (int, 1, MAX_VOCABULARY), "min_df": (int, 1, 2**31 - 1), "ridge_alpha": (float, 0.0, 1e12),
    "head_alpha": (float, 0.0, 1e12), "use_metadata": (bool, 0, 1), "log_spread": (float, 0.0, MAX_LOG_SPREAD),
    "random_state": (int, 0, MAX_RANDOM_STATE), "char_ngrams": (bool, 0, 1),
}



def canonical_archive(archive: bytes, card: bytes) -> bytes:
    """skops' archive rewritten so that the same state gives the same bytes, with the card added.

    skops names each array member after the Python ``id()`` of the array and records ids as ``__id__`` in the
    schema, and zip members carry the clock's time: all differ from run to run. Ids and member names are
    renumbered in the order the schema lists them (the same id keeps the same number, so shared objects stay
    shared), every member gets the zip epoch (1980-01-01) and fixed attributes, and members are written in a
    fixed order: the schema, the arrays by number, the card.
    """
    with zipfile.ZipFile(io.BytesIO(archive)) as source:
        schema = json.loads(source.read(SCHEMA_MEMBER))
        arrays = {name: source.read(name) for name in source.namelist() if name != SCHEMA_MEMBER}
    ids: dict[Any, int] = {}
    files: dict[str, str] = {}
    stack = [schema]
    while stack:  # depth-first in the schema's own order
        node = stack.pop()
        if isinstance(node, dict):
            if "__id__" in node:
                node["__id__"] = ids.setdefault(node["__id__"], len(ids))
            if isinstance(node.get("file"), str) and node["file"] in arrays:
                node["file"] = files.setdefault(node["file"], f"{len(files)}.npy")
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            stack.extend(reversed(node))
    members = [(SCHEMA_MEMBER, json.dumps(schema, indent=2).encode())]
    members += sorted(((files[old], data) for old, data in arrays.items() if old in files),
                      key=lambda item: int(item[0].split(".")[0]))
    members.append((META_MEMBER, card))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # Unix, whatever system writes it
            info.external_attr = 0o644 << 16
            target.writestr(info, data, compresslevel=9)
    return out.getvalue()


def damaged(path: Path, what: str) -> PredictorError:
    return PredictorError(f"{path}: the model file is damaged or not an asp predictor ({what}); refit it with "
                          "`asp predictor fit`")


def is_model_file(path: Path) -> bool:
    """``path.is_file()``, but False for a name too long for the file system, where no file can be (it raised
    ENAMETOOLONG: exit 3, where a missing model file is exit 5)."""
    try:
        return path.is_file()
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        return False


def missing_model(path: Path) -> PredictorError:
    """The error for a model path that holds no file: missing, a folder, a dangling link, a pipe, a name too long
    for the file system."""
    if stdin_said(path):  # `--predictor -` was "no such model file" (E129)
        return PredictorError(stdin_said(path))
    try:
        if path.is_dir():
            what = "is a folder, not a model file"
        elif path.is_symlink() and not path.exists():
            what = "is a link to nothing"
        elif path.exists():
            what = "is not a regular file (a pipe, a device or a socket)"
        else:
            what = "no such model file"
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        what = "the name is too long for the file system, so no such model file exists"
    home = missing_hint(path) if what == "no such model file" else ""
    return PredictorError(f"{path}: {what}" + (home or "; give a file written by `asp predictor fit`"))


def read_archive(path: Path) -> tuple[bytes, zipfile.ZipFile]:
    """The file's bytes and its zip directory, refused before anything inflates when it declares too much."""
    if not is_model_file(path):
        raise missing_model(path)
    not_one = f"{path}: not an asp predictor file (a skops archive from `asp predictor fit`)"
    try:
        if path.stat().st_size > limits.MAX_ZIP_TOTAL_BYTES:
            raise PredictorError(f"{path}: {path.stat().st_size:,} bytes is larger than any asp model file "
                                 f"({limits.MAX_ZIP_TOTAL_BYTES:,} at most); it is not an asp predictor")
        with zipfile.ZipFile(path) as directory:  # the central directory only: nothing inflates
            limits.check_zip(directory, str(path), PredictorError, "an asp predictor")
        data = path.read_bytes()
        archive = zipfile.ZipFile(io.BytesIO(data))
    except PermissionError as exc:
        raise PredictorError(f"{path}: cannot be read ({exc.strerror}); check the file's permissions") from None
    except (zipfile.BadZipFile, OSError, ValueError):
        raise PredictorError(not_one) from None
    limits.check_zip(archive, str(path), PredictorError, "an asp predictor")  # the bytes read may have changed
    return data, archive


def member(archive: zipfile.ZipFile, name: str, path: Path) -> bytes:
    try:
        return archive.read(name)
    except KeyError:
        raise PredictorError(f"{path}: not an asp predictor file (a skops archive from `asp predictor fit`)") from None
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, zlib.error) as exc:
        raise damaged(path, f"member {name!r}: {str(exc)[:120]}") from None


def card_of(archive: zipfile.ZipFile, path: Path) -> dict[str, Any]:
    raw = member(archive, META_MEMBER, path)
    card = limits.loads(raw, f"{path}: {META_MEMBER}", PredictorError,
                        invalid=f"{path}: not an asp predictor file (a skops archive from `asp predictor fit`)")
    if not isinstance(card, dict):
        raise PredictorError(f"{path}: not an asp predictor file (a skops archive from `asp predictor fit`)")
    version = card.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        said = "has no format version" if version is None else f"has a format version that is no version ({version!r})"
        raise PredictorError(f"{path}: the model file {said}; refit it with `asp predictor fit`")
    if version > FORMAT_VERSION:
        raise PredictorError(
            f"{path}: model format version {version} is newer than this asp reads ({FORMAT_VERSION}); upgrade asp"
        )
    return card


def read_card(path: Path) -> dict[str, Any]:
    """The card stored in a model file, read without building any object.

    Raises
    ------
    PredictorError
        Missing file, not an asp model file (or one declaring members too large to be one), nesting too deep,
        or a newer format version.
    """
    path = Path(path)
    _, archive = read_archive(path)
    with archive:
        return card_of(archive, path)


def not_a_model(path: Path) -> str | None:
    """What a file is where it is not an asp model file (`read_card` refuses it; `asp predictor fit --force` does not
    replace it, E101), or None where it is one, of this asp's format or a newer one."""
    try:
        read_card(path)
    except PredictorError as exc:
        if "newer than this asp reads" in str(exc):
            return None
        with open(path, "rb") as handle:
            zipped = handle.read(4) == b"PK\x03\x04"
        return "a zip archive without an asp model's card" if zipped else "not a skops archive, as a model file is"
    return None


def trusted_state(data: bytes, archive: zipfile.ZipFile, path: Path) -> Any:
    """skops' trusted loading of an archive whose every schema node asks for a type in ``TRUSTED_TYPES``."""
    schema = limits.loads(member(archive, SCHEMA_MEMBER, path), f"{path}: {SCHEMA_MEMBER}", PredictorError,
                          invalid=f"{path}: unreadable model file ({SCHEMA_MEMBER} is not valid JSON)")
    asked, contents = schema_types(schema)
    refused = sorted(asked - set(TRUSTED_TYPES))
    if not refused:
        import skops.io as sio

        try:
            refused = sorted(set(sio.get_untrusted_types(data=data)) - set(TRUSTED_TYPES))
        except Exception as exc:  # noqa: BLE001 - skops raises many kinds for a bad file
            raise PredictorError(f"{path}: unreadable model file ({type(exc).__name__}: {str(exc)[:200]}); it is damaged: "
                             "refit it with `asp predictor fit`, or copy it again") from None
    if refused:
        raise UnsafePredictorError(
            f"{path}: refused to load: the file asks for types asp does not trust ({', '.join(refused[:5])}); "
            "only load model files written by `asp predictor fit`"
        )
    # skops parses each value node's JSON text itself: check its nesting first.
    if limits.too_deep_rows(contents):
        raise PredictorError(f"{path}: {SCHEMA_MEMBER} holds a value nested more than {limits.MAX_NESTING_DEPTH} "
                             "levels deep; it is not an asp predictor")
    import skops.io as sio

    try:
        return sio.loads(data, trusted=list(TRUSTED_TYPES))
    except Exception as exc:  # noqa: BLE001 - skops raises many kinds for a bad file
        raise PredictorError(f"{path}: unreadable model file ({type(exc).__name__}: {str(exc)[:200]}); it is damaged: "
                             "refit it with `asp predictor fit`, or copy it again") from None


def schema_types(node: Any) -> tuple[set[str], list[str]]:
    """Every ``module.class`` a skops schema asks to build, and the JSON text of its value nodes (walks the
    whole tree without recursion)."""
    found: set[str] = set()
    contents: list[str] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "__class__" in item:
                found.add(f"{item.get('__module__', '?')}.{item['__class__']}")
            if item.get("__loader__") == "JsonNode" and isinstance(item.get("content"), str):
                contents.append(item["content"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found, contents


def check_array(state: dict[str, Any], key: str, path: Path, *, ndim: int, bound: float, low: float | None = None) -> np.ndarray:
    """``state[key]`` as a float64 array of ``ndim`` dimensions, finite and within ``[-bound, bound]``
    (``[low, bound]`` when ``low`` is given)."""
    value = state.get(key)
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "fiu" or value.ndim != ndim:
        raise damaged(path, f"{key!r} is not a {ndim}-dimensional array of numbers")
    array = value.astype(np.float64)
    if array.size and not np.isfinite(array).all():
        raise damaged(path, f"{key!r} holds NaN or infinite values")
    lowest = -bound if low is None else low
    if array.size and (array.min() < lowest or array.max() > bound):
        raise damaged(path, f"{key!r} holds values outside [{lowest:g}, {bound:g}]")
    return array


def check_number(state: dict[str, Any], key: str, path: Path, *, low: float, high: float) -> float:
    value = state.get(key)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise damaged(path, f"{key!r} is not a number")
    number = float(value)
    if not math.isfinite(number) or not low <= number <= high:
        raise damaged(path, f"{key!r} is {number!r}, outside [{low:g}, {high:g}]")
    return number


def check_texts(state: dict[str, Any], key: str, path: Path, *, most: int) -> tuple[str, ...]:
    value = state.get(key)
    if not isinstance(value, list) or len(value) > most or not all(isinstance(v, str) for v in value):
        raise damaged(path, f"{key!r} is not a list of at most {most:,} texts")
    if len(set(value)) != len(value):
        raise damaged(path, f"{key!r} repeats an entry")
    return tuple(value)


def check_params(state: dict[str, Any], path: Path) -> dict[str, Any]:
    raw = state.get("params")
    if not isinstance(raw, str):
        raise damaged(path, "'params' is not text")
    params = limits.loads(raw, f"{path}: params", PredictorError, invalid=str(damaged(path, "'params' is not JSON")))
    if not isinstance(params, dict) or not set(params) <= set(_PARAM_RANGES):
        raise damaged(path, "'params' names unknown parameters")
    for name, value in params.items():
        kind, low, high = _PARAM_RANGES[name]
        if name == "log_spread" and value is None:
            continue
        if kind is bool:
            ok = isinstance(value, bool)
        elif isinstance(value, bool) or not isinstance(value, int if kind is int else (int, float)):
            ok = False
        else:
            ok = (isinstance(value, int) or math.isfinite(value)) and low <= value <= high
        if not ok:
            raise damaged(path, f"parameter {name!r} is {value!r}")
    return params


def card_count(training: dict[str, Any], key: str, path: Path) -> int:
    value = training.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 2**63 - 1:
        raise damaged(path, f"the card's training {key!r} is not a count")
    return value
