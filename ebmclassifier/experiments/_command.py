"""A command of the command line, its options declared once.

Each experiment module declares one :class:`Command`: its name, its help, its options and the
function that runs it. The command line (:mod:`ebmclassifier.cli`) builds its parsers from these
declarations, and a command that turns its options into a configuration object, or writes the
command line that reproduces a run, reads the same declarations (:meth:`Option.spell`,
:attr:`Option.field`), so an option is written in one place.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


class CommaList:
    """An argparse ``type``: ``"a,b,c"`` -> ``[kind("a"), kind("b"), kind("c")]``.

    Parameters
    ----------
    kind : type
        The type of each item (``str``, ``float``, ...).
    """

    def __init__(self, kind: type):
        self.kind = kind
        self.__name__ = f"comma-separated {kind.__name__}"  # argparse names the type in errors

    def __call__(self, text: str) -> list:
        try:
            return [self.kind(part) for part in text.split(",") if part.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a comma-separated list of {self.kind.__name__}, got {text!r}"
            ) from None

    def spell(self, values: Sequence) -> str:
        """The list written back as the option takes it (floats in ``%g`` form)."""
        if self.kind is float:
            return ",".join(f"{v:g}" for v in values)
        return ",".join(str(v) for v in values)


#: The value of a switch that was not given, by its argparse action.
_SWITCH_DEFAULTS = {"store_true": False, "store_false": True}


@dataclass(frozen=True)
class Option:
    """One option of a command.

    Parameters
    ----------
    flag : str
        ``"--max-train"``; its ``dest`` is argparse's (``max_train``) unless ``argparse`` names one.
    help : str
        The ``--help`` text.
    argparse : dict
        The other arguments of ``ArgumentParser.add_argument`` (``type``, ``default``,
        ``choices``, ``action``, ``dest``, ``metavar``).
    field : str or None
        The configuration field the option fills, where a command builds one from its options.
    echo : {"always", "changed", "never"}
        When the reproducing command line (:meth:`Command.command_line`) writes the option:
        whenever it has a value, only when it differs from its default, or never.
    """

    flag: str
    help: str
    argparse: dict = field(default_factory=dict)
    field: str | None = None
    echo: str = "always"

    @property
    def dest(self) -> str:
        return self.argparse.get("dest", self.flag.lstrip("-").replace("-", "_"))

    @property
    def is_switch(self) -> bool:
        return self.argparse.get("action") in _SWITCH_DEFAULTS

    @property
    def default(self):
        return self.argparse.get("default", _SWITCH_DEFAULTS.get(self.argparse.get("action")))

    def spell(self, value) -> list[str]:
        """The option as the command line that gave ``value`` wrote it (``[]``: not written).

        A switch is written when it was given; another option whenever it has a value, or
        with ``echo="changed"`` when the value is not the default.
        """
        if self.echo == "never" or value is None:
            return []
        if (self.echo == "changed" or self.is_switch) and value == self.default:
            return []
        if self.is_switch:
            return [self.flag]
        kind = self.argparse.get("type")
        return [self.flag, kind.spell(value) if isinstance(kind, CommaList) else str(value)]


@dataclass(frozen=True)
class Command:
    """A command of ``python -m ebmclassifier``: its options and the function that runs it.

    Parameters
    ----------
    name, help, description : str
        As ``subparsers.add_parser`` takes them.
    options : tuple of Option
    run : callable
        ``run(args) -> int``, the exit status, given the parsed options.
    """

    name: str
    help: str
    description: str
    options: tuple[Option, ...]
    run: Callable[[argparse.Namespace], int]

    def add_to(self, subparsers) -> argparse.ArgumentParser:
        """Register the command and its options; its ``func`` default is :attr:`run`."""
        parser = subparsers.add_parser(self.name, help=self.help, description=self.description)
        for option in self.options:
            parser.add_argument(option.flag, help=option.help, **option.argparse)
        parser.set_defaults(func=self.run)
        return parser

    def fields(self, args: argparse.Namespace) -> dict:
        """``{field: value}`` of the options that fill a configuration field."""
        return {o.field: getattr(args, o.dest) for o in self.options if o.field is not None}

    def command_line(self, args: argparse.Namespace) -> str:
        """The command that reproduces the run, every option spelled out as ``echo`` says."""
        parts = ["python", "-m", "ebmclassifier", self.name]
        for option in self.options:
            parts += option.spell(getattr(args, option.dest))
        return shlex.join(parts)
