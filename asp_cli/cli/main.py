"""The `asp` command line: a thin layer that parses options, calls the library and renders the result.

Each command group lives in its own module of ``asp_cli.cli`` with a ``register(app)`` function; this module only
assembles them and holds the global options. The console script is `asp_cli.cli.entry.main`, which installs the
signal handlers before this module (Typer, every command group) imports.
"""

from __future__ import annotations

import typer
from typer.core import TyperGroup

from asp_cli import __version__
from asp_cli.cli.common import set_traceback


# Frameworks' own names for asp's settings, where Click's guess misleads (each: asp's option, what to say): a
# MindSpeed-RL newcomer's `--global-batch-size` (megatron_training.global_batch_size) was offered --minibatch-size
# first, which is not it. Said only by a command that has asp's option.
_THEIR_NAMES = {
    "--global-batch-size": ("--train-batch-size", "prompts (groups) per training step are --train-batch-size: "
                            "MindSpeed-RL's and Megatron's global_batch_size; slime's --global-batch-size counts "
                            "samples, its --rollout-batch-size prompts"),
    "--rollout-batch-size": ("--train-batch-size", "prompts (groups) per training step are --train-batch-size: "
                             "slime's --rollout-batch-size, OpenRLHF's --rollout.batch_size"),
    "--max-tokens": ("--max-response-tokens", "the generation cap is --max-response-tokens: vLLM's max_tokens "
                     "(MindSpeed-RL's generate_config.sampling_config.max_tokens)"),
}

# Said beside a name's hint where the command has the option too: asp's own `--max-tokens-per-minibatch` is what
# `--max-tokens` shortens, and Click offered it, where the hint alone named --max-response-tokens.
_ALSO_OURS = {"--max-tokens": ("--max-tokens-per-minibatch", "a minibatch's token budget is --max-tokens-per-minibatch")}

# Typer's own Click (it vendors one) raises the usage errors; BadParameter is one, and its base the class of all.
_USAGE_ERROR = typer.BadParameter.__mro__[1]


class _Commands(TyperGroup):
    """asp's commands: an option value Typer could not read is named in its message. Typer (0.16 on) reads numbers
    through Pydantic, whose message leaves the value out ("Invalid value for '--instances' / '-k': Input should be
    a valid integer, unable to parse string as an integer": a newcomer could not tell which of two numbers it
    meant); the value is the Pydantic error's own ``input``."""

    def invoke(self, ctx: typer.Context):
        try:
            return super().invoke(ctx)
        except typer.BadParameter as exc:
            errors = getattr(exc.__cause__, "errors", None)
            given = errors()[0].get("input") if callable(errors) and errors() else None
            if isinstance(given, str) and repr(given) not in exc.message:
                exc.message = f"{exc.message.rstrip('.')} (got {given!r})"
            raise
        except _USAGE_ERROR as exc:  # Click's NoSuchOption: a framework's own name says asp's
            name = getattr(exc, "option_name", None)
            ours, hint = _THEIR_NAMES.get(name, (None, None)) if type(exc).__name__ == "NoSuchOption" else (None, None)
            if hint is None or exc.ctx is None or not any(ours in p.opts for p in exc.ctx.command.params):
                raise  # not one of those names, or a command without the option that is asp's for it
            also, words = _ALSO_OURS.get(name, (None, ""))
            if also and any(also in p.opts for p in exc.ctx.command.params):
                hint = f"{hint}; {words}"
            raise type(exc)(name, f"No such option: {name}; {hint}", ctx=exc.ctx) from None


app = typer.Typer(
    name="asp",
    cls=_Commands,
    help="Adaptive Scheduling Pipeline: offline rollout schedules for LLM RL training.",
    # Exit codes where a pipeline author looks first (a newcomer's round): `asp_cli.errors.ExitCode`.
    epilog="Exit codes: 0 ok, 1 a --check broken (or asp calibrate's fit worse than its base), 2 bad command line, 3 bad input file, 4 bad settings, 5 predictor "
           "file, 6 not an asp schedule, 7 output exists or cannot be written, 8 an inference server failed, 70 a bug, "
           "130 interrupted (docs/errors.md).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"asp {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    traceback: bool = typer.Option(
        False, "--traceback", help="Show the Python traceback of an error (or set ASP_TRACEBACK=1)."
    ),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Adaptive Scheduling Pipeline: offline rollout schedules for LLM RL training."""
    from asp_cli import testhooks

    set_traceback(traceback)
    testhooks.pause("callback")


def _register_all() -> None:
    # Every command group is imported eagerly: one that fails to import is a bug to report, not a command to
    # drop silently. The groups import the library lazily, so `asp --help` stays fast.
    from asp_cli.cli import pipeline, predictor, probe, replay, report, schedule, simulate

    for module in (schedule, probe, predictor, simulate, report, pipeline, replay):
        module.register(app)


_register_all()
