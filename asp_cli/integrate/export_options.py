"""`asp export`'s options, each checked once, before the dataset is read: the ones that name nothing, and the ones
that would change nothing where they were given (refused, as --verl-trainer without --format verl is: a hostile-input
round's --workers 3 with the dispatch order and --verl-version 0.7 on JSON lines changed nothing, exit 0).
"""

from __future__ import annotations

from asp_cli.errors import SettingsError
from asp_cli.integrate.replay import check_workers
from asp_cli.integrate.verl_router import ROUTES

FORMATS = ("parquet", "jsonl", "verl")
ORDERS = ("dispatch", "train")
# Schedule columns copied onto every exported row (with the optional --prefix).
ASP_COLUMNS = ("epoch", "instance", "minibatch", "seq", "train_step", "predicted_tokens")
# The verl versions whose batch cutting export knows, and the rule each uses (`replay.chunk_capacities`):
# 0.9's default trainer cuts the prompts; 0.7's trainer (also 0.9's trainer.use_v1=False) the repeated batch.
VERL_CHUNKING = {"0.9": "v1", "0.7": "legacy"}


# A framework's name is a newcomer's first guess at --format (an OpenRLHF newcomer's `--format openrlhf`): the format
# and order docs/integrations.md gives each.
_FRAMEWORK_FORMATS = {"openrlhf": "OpenRLHF reads JSON lines: --format jsonl --order train",
                      "slime": "slime reads JSON lines: --format jsonl --order train --metadata-key metadata",
                      "areal": "AReaL reads JSON lines in dispatch order: --format jsonl",
                      "mindspeedrl": "MindSpeed-RL reads Parquet: --format parquet --order train"}
# A MindSpeed-RL newcomer's `--format mindspeed` (its package is mindspeed_rl, its Megatron backend MindSpeed) was
# told the three formats alone.
_FRAMEWORK_FORMATS["mindspeed"] = _FRAMEWORK_FORMATS["mindspeedrl"]


def check_format(format: str) -> None:  # noqa: A002
    """Refuse a ``format`` that is not one of `FORMATS`, saying which one a framework's name wants."""
    if format not in FORMATS:
        hint = _FRAMEWORK_FORMATS.get(str(format).lower().replace("-", "").replace("_", ""))
        raise SettingsError(f"--format must be one of {', '.join(FORMATS)} (got {format!r})"
                            + (f"; {hint} (docs/integrations.md)" if hint else ""))


def check_options(format: str, order: str, workers: int | None, verl_version: str | None, prefix: object,  # noqa: A002
                  route: str, metadata_key: object, trainer: str = "ppo") -> str:
    """Refuse options that name nothing or change nothing with ``format`` and ``order`` (resolved); the verl
    version to cut batches as (0.9 where none was given). ``trainer``: the verl trainer exported for (resolved)."""
    if order not in ORDERS:
        raise SettingsError(f"--order must be one of {', '.join(ORDERS)} (got {order!r})")
    # Options that change nothing where they were given are refused, as --verl-trainer without --format verl is
    # (a hostile-input round: --workers 3 with the dispatch order, --verl-version 0.7 on JSON lines, exit 0).
    if verl_version is not None and format != "verl" and order == "dispatch":
        raise SettingsError("--verl-version says how verl cuts a batch across its workers, which only --format verl "
                            "or --order train uses: leave it out, or add one of them")
    verl_version = "0.9" if verl_version is None else verl_version
    if verl_version not in VERL_CHUNKING:
        raise SettingsError(f"--verl-version must be one of {', '.join(VERL_CHUNKING)} (got {verl_version!r})")
    if not isinstance(prefix, str):
        raise SettingsError(f"--prefix must be text, '' for none (got {prefix!r})")
    if route not in ROUTES:
        raise SettingsError(f"--route must be one of {', '.join(ROUTES)} (got {route!r})")
    if metadata_key is not None and not isinstance(metadata_key, str):
        raise SettingsError(f"--metadata-key must be a field name, e.g. metadata (got {metadata_key!r})")
    if metadata_key is not None and (format == "verl" or not metadata_key.strip()):
        raise SettingsError("--metadata-key names an object field for --format jsonl or parquet (slime's "
                            "--metadata-key, e.g. metadata)" if metadata_key.strip() else
                            "--metadata-key needs a field name, e.g. metadata")
    if metadata_key is not None and "." in metadata_key:
        # slime's --metadata-key is one top-level key: a dotted one was written as a key of that name beside the
        # dataset's object, which asp's own --id-key then refused (E83; a hostile-input round).
        raise SettingsError(f"--metadata-key names one top-level object (slime's --metadata-key), not a path: "
                            f"{metadata_key!r} has a '.'; name the object itself, e.g. "
                            f"--metadata-key {metadata_key.split('.')[0] or 'metadata'}")
    if metadata_key is not None and metadata_key in {f"{prefix}{c}" for c in ("prompt_id", *ASP_COLUMNS)}:
        raise SettingsError(f"--metadata-key {metadata_key} is one of the fields asp puts inside that object; name "
                            "another, e.g. metadata")
    if workers is not None:
        check_workers(workers)  # with any --order: a 0 is a typo either way
        if order == "dispatch" and trainer == "fully-async":  # whose rollouter reads the file in dispatch order
            raise SettingsError("--workers cuts each train batch into the chunks verl's workers take, which verl's "
                                "fully asynchronous rollouter does not: it reads the file one prompt at a time, in "
                                "dispatch order; leave --workers out")
        if order == "dispatch":
            raise SettingsError("--workers cuts each train batch into the chunks verl's workers take, which only "
                                "--order train writes; the dispatch order keeps the schedule's: add --order train, "
                                "or leave --workers out")
    return verl_version


def dealt_workers_note(router: str | None, workers: int | None, order: str, format: str) -> str | None:  # noqa: A002
    """A warning where ``--workers`` re-lays the batches of a schedule made for slime's router or OpenRLHF's deal,
    which take each batch whole in the file's order (one chunk, as asp timed it and exports it by default): an
    OpenRLHF newcomer's --workers 8 ("8 engines") put 3,090 of the sample's 3,540 prompts on other engines than the
    schedule's instance column, in silence."""
    if order != "train" or format == "verl" or workers in (None, 1) or router not in ("cache-aware",
                                                                                      "group-round-robin"):
        return None
    who = ("OpenRLHF deals it to its engines in turn, the schedule's instance each row's engine"
           if router == "group-round-robin" else "slime submits it through its router")
    return (f"--workers {workers} lays each batch out for {workers} contiguous chunks, but the schedule was made with "
            f"--router {router}, which takes each batch whole in the file's order ({who}), as asp timed it: laid out "
            "in chunks, rows reach other servers than planned; leave --workers out (one chunk a batch)")


def chat_text_note(column: str | None, values: list[object], format: str) -> str | None:  # noqa: A002
    """A warning where the prompt column holds chat lists as JSON text (a CSV's, or a dataset that stored them so),
    which asp reads as chat lists but a trainer takes as the text it is: OpenRLHF, slime and AReaL then prompt the
    policy with the JSON itself, and the settings printed for them named no chat template (a newcomer's CSV)."""
    import json

    if format == "verl" or column is None:
        return None
    first = next((v for v in values if isinstance(v, str) and v.strip()), None)
    try:
        parsed = json.loads(first) if first is not None and first.lstrip().startswith("[") else None
    except ValueError:
        return None
    if not (isinstance(parsed, list) and parsed and all(isinstance(m, dict) and "content" in m for m in parsed)):
        return None
    return (f"column '{column}' holds chat lists as JSON text (asp read them as chat lists): OpenRLHF, slime and "
            "AReaL take it as the text it is, so the policy would be prompted with that JSON; store the column as a "
            "list of messages first (json.loads of each value, written as JSON lines or Parquet: a CSV cannot hold "
            "lists)")


def mixed_chat_note(column: str | None, values: list[object], format: str) -> tuple[bool, str | None]:  # noqa: A002
    """Whether a prompt column of mixed kinds (``values``: as the reader gives it, the lists as their JSON text) holds
    chat lists, and a warning where it holds them in some rows and text in others, which slime and OpenRLHF read only with
    their chat template: the lists are templated and each text wrapped as one user message first (slime v0.3.1
    utils/data.py `_build_messages`, OpenRLHF `preprocess_data`). The settings printed named no chat template, and the
    warning for a CSV's JSON text told a newcomer whose file holds real lists to store them as lists (a slime
    newcomer's round)."""
    import json

    if format == "verl" or column is None:
        return False, None
    chats = 0
    for value in values:
        try:
            parsed = json.loads(value) if isinstance(value, str) and value.lstrip().startswith("[") else None
        except ValueError:
            continue
        chats += isinstance(parsed, list) and all(isinstance(m, dict) and "content" in m for m in parsed) and bool(parsed)
    if not chats or chats == len(values):  # all lists: their contents' kinds differ (text parts and images)
        return bool(chats), None
    return True, (f"column '{column}' holds chat lists in {chats:,} rows and text in {len(values) - chats:,}: slime's "
            "--apply-chat-template and OpenRLHF's --data.apply_chat_template (in the settings printed) template the lists and "
            "wrap each text as one user message first; without them the lists reach the policy as lists. Where the "
            "texts are already templated, make every prompt a chat list (or all text) first")


def object_label_note(label: str) -> str:
    """A warning where the label column the settings name holds objects or lists: slime hands the reward function
    `data[--label-key]` as it is, and its built-in `--rm-type` rules take text or a number (slime v0.3.1
    rm_hub/deepscaler.py asserts it), so a slime newcomer's dict label was printed `--label-key label` as ready."""
    return (f"label column '{label}' holds objects or lists, which slime (--label-key) and OpenRLHF (--data.label_key) "
            "hand the reward function as they are: slime's built-in --rm-type rules take text or a number, so give "
            "a --custom-rm-path (OpenRLHF: a reward function) that reads them, or make the label a text column first")


def mindspeed_label_note(label: str, values: object) -> str | None:
    """A warning for a Parquet export (MindSpeed-RL's format) whose label column holds values that are not text:
    MindSpeed-RL v2.3.0's Alpaca-style preprocessing (its GRPO examples' handlers; the label is map_keys' response)
    turns a response that is neither text nor a list into none and drops the row (`convert_alpaca_to_intermediate`,
    `align_dataset`, mindspeed_rl/datasets/handler_utils.py:321-328, 176), shifting every later row off the
    schedule's batches without a word (a MindSpeed-RL newcomer's integer answers). ``values``: the column (Polars)."""
    kind = str(values.dtype)  # type: ignore[attr-defined]
    text = kind in ("String", "Utf8", "Null") or kind.startswith("List")  # Null: no value at all (JSON nulls)
    empty = values.null_count()  # type: ignore[attr-defined]
    other = 0 if text else len(values) - empty  # type: ignore[arg-type]
    if not (empty or other):
        return None
    are = lambda count: "that are" if count != 1 else "that is"  # noqa: E731
    number = ("true/false" if kind == "Boolean" else "a number, not text" if not kind.startswith(("Struct", "Object"))
              else "objects, not text" if other != 1 else "an object, not text")
    first, what = (other, number) if other else (empty, "empty (null)")
    return (f"label column '{label}' holds {first:,} value{'s' if first != 1 else ''} {are(first)} {what}"
            + (f", and {empty:,} {are(empty)} empty (null)" if other and empty else "")
            + ": MindSpeed-RL's preprocessing (its "
            f"Alpaca-style handlers, with '{label}' as map_keys' response) drops such rows "
            "(mindspeed_rl/datasets/handler_utils.py:176), which shifts every later row off the schedule's batches; "
            "store the labels as text and schedule that file")


def mixed_label_note(label: str, kinds: list[str | None], fmt: str) -> str | None:
    """A warning where the label column mixes kinds of value that are each text or a number (numbers in some rows,
    text in others): which kinds, in which rows, and what the export's format makes of them. It was told it "holds
    objects or lists", of a column holding none. A column of numbers alone that the reader gave as text (an integer
    past 64 bits beside others) is no mix: said for Parquet, which writes them all as text; None for JSON lines,
    which keep each number."""
    rows: dict[str, list[int]] = {}
    for row, kind in enumerate(kinds):
        if kind is not None:
            rows.setdefault(kind, []).append(row + 1)
    text = ("every value is written as text (a number as its digits): a reward function that compares the label with "
            "a number finds text in every row")
    if len(rows) < 2:  # " and numbers in 40 rows ...", and "a number in some rows and text in others" of numbers
        return None if fmt != "parquet" or not rows else (
            f"label column '{label}' holds numbers that Parquet cannot hold as one number type (an integer past 64 bits "
            f"beside others), so {text}; make the labels text in the dataset and schedule that file")

    def said(kind: str) -> str:
        at = rows[kind]
        head, rest = (at[:3], f"{len(at) - 3:,} more") if len(at) > 3 else (at[:-1], str(at[-1]))
        shown = ", ".join(map(str, head)) + (" and " if head else "") + rest
        name = {"number": "numbers"}.get(kind, kind)
        return f"{name} in {len(at):,} row{'s' if len(at) != 1 else ''} ({'rows' if len(at) != 1 else 'row'} {shown})"
    parts = [said(k) for k in sorted(rows, key=lambda k: rows[k][0])]
    mix = ", ".join(parts[:-1]) + " and " + parts[-1]
    handed = ("a number in some rows and text in others" if set(rows) == {"number", "text"} else
              "each row's own kind (" + " or ".join({"number": "a number"}.get(k, k) for k in sorted(rows)) + ")")
    made = (f"Parquet holds one kind per column, so {text}" if fmt == "parquet" else
            "JSON lines keep each row's own, so slime (--label-key) and OpenRLHF (--data.label_key) hand the reward "
            f"function {handed}: one that compares them as one kind misjudges the rest")
    return (f"label column '{label}' mixes kinds: {mix} (counted from 1 over the dataset's rows); {made}; make the "
            "labels one kind (text) in the dataset and schedule that file")
