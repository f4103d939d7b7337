"""Command-line flags made from settings dataclasses (``medlama.core.settings``): the only place that turns a
configuration into argparse arguments, so a field's name, help, choices and default are written once.

A flag's value is parsed by the field's annotation (``int``, ``float``, ``str``, ``Path``, ``bool`` as
``--x/--no-x`` (``--x`` alone for a field set with ``switch=True``), ``Literal`` as choices, ``tuple[...]``
as one or more values, ``X | None`` accepting ``none``); ``--help`` shows the default, or the field's
``shown`` words for it (``shown=None``: none shown). Flags that are not given stay out of the namespace
(``argparse.SUPPRESS``), so :func:`given_settings` returns exactly what the user typed and the rest comes
from the defaults or a preset. Old spellings still parse and print what replaced them: a settings field's
in its ``old_flags``, the flags that are not fields in :data:`RENAMED_FLAGS` (old method *names*, such as
``--method contrastive``, in ``medlama.probers.registry.OLD_NAMES``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import types
import typing
from pathlib import Path
from collections.abc import Callable, Mapping
from typing import Any

from medlama.core import settings as S
from medlama.core.errors import MedlamaInputError

#: Renamed flags that are not settings fields, old -> new: still parsed (hidden from ``--help``), each use
#: saying on stderr what replaced it. ``--ranker``: ``medlama ucm``'s ``--method`` before the rankers and the
#: probers shared method names; ``--mask-predict-preset``: ``medlama probe``'s ``--preset`` before every
#: method had presets.
RENAMED_FLAGS: dict[str, str] = {"--ranker": "--method", "--mask-predict-preset": "--preset"}


def _parser_for(annotation: Any, field_name: str) -> Any:
    """A function turning one command-line word into a value of ``annotation``."""
    inner, optional = S.unwrap_optional(annotation)
    origin = typing.get_origin(inner)
    if origin in (typing.Union, types.UnionType):  # a number or a word: "--batch-size 64" or "--batch-size auto"
        return _union_parser(typing.get_args(inner), optional)
    if origin is typing.Literal:
        kinds = {type(value) for value in typing.get_args(inner)}
        base = kinds.pop() if len(kinds) == 1 else str
    elif inner in (int, float, str, Path):
        base = inner
    else:
        base = str

    def parse(word: str) -> Any:
        if optional and word.lower() == "none":
            return None
        try:
            return base(word)
        except ValueError:
            kind = {int: "an integer", float: "a number"}.get(base, base.__name__)
            raise argparse.ArgumentTypeError(f"{word!r} is not {kind}") from None

    parse.__name__ = getattr(base, "__name__", "value")  # argparse names the type in its errors
    return parse


def _union_parser(options: tuple, optional: bool) -> Any:
    words = [value for option in options if typing.get_origin(option) is typing.Literal
             for value in typing.get_args(option)]
    kinds = [option for option in options if option in (int, float)]

    def parse(word: str) -> Any:
        if optional and word.lower() == "none":
            return None
        if word in words:
            return word
        for kind in kinds:
            try:
                return kind(word)
            except ValueError:
                continue
        raise argparse.ArgumentTypeError(f"{word!r} is not {' or '.join(['a number', *map(repr, words)])}")

    parse.__name__ = "value"
    return parse


class _OldFlag(argparse.Action):
    """An old spelling: stores the value under the new name and says what replaced it (once, on stderr)."""

    def __init__(self, option_strings, dest, note: str = "", new_flag: str = "", **kwargs):
        self.note, self.new_flag = note, new_flag
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"medlama: {option_string} is now {self.new_flag}" + (f" ({self.note})" if self.note else ""),
              file=sys.stderr)
        setattr(namespace, self.dest, values if self.nargs != 0 else self.const)


def add_settings_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type, *,
                       exclude: tuple[str, ...] = (), defaults: Any = None, title: str | None = None,
                       prefix: str = "", helps: Mapping[str, Callable[[str], str]] | None = None) -> None:
    """Add a flag for every command-line field of the settings class ``cls`` (less ``exclude``).

    ``defaults``: an instance (a preset) whose values ``--help`` shows as the defaults; by default the
    class's own. ``title``: put the flags in an argument group. ``prefix``: prepended to each flag name
    (``--rewire-`` for the recipe's rewiring flags); the namespace keys become ``prefix_field``. ``helps``:
    field name -> a function rewording that field's help for this command (its default is still appended).
    """
    target = parser.add_argument_group(title) if title else parser
    hints = S.type_hints(cls)
    for field in S.fields_of(cls):
        if field.name in exclude or not field.metadata.get("cli", True):
            continue
        flag = S.flag_of(field)
        if prefix:
            flag = "--" + prefix + flag[2:]
        dest = (prefix.replace("-", "_") + field.name) if prefix else field.name
        annotation = hints.get(field.name, Any)
        inner, optional = S.unwrap_optional(annotation)
        default = getattr(defaults, field.name) if defaults is not None else S.default_of(field)
        shown = "none" if default is None else (
            " ".join(map(str, default)) if isinstance(default, (tuple, list)) else default)
        if "shown" in field.metadata:  # the default in words ("no plot"); None: not shown
            shown = field.metadata["shown"]
        help_text = S.help_of(field)
        if helps and field.name in helps:
            help_text = helps[field.name](help_text)
        if default is not dataclasses.MISSING and shown is not None:
            help_text += f" (default: {shown})"
        help_text = help_text.replace("%", "%%")  # argparse formats help with %
        kwargs: dict[str, Any] = {"dest": dest, "default": argparse.SUPPRESS, "help": help_text}
        if inner is bool:  # --x/--no-x; a ``switch`` field (off by default) is --x alone
            kwargs["action"] = "store_true" if field.metadata.get("switch") else argparse.BooleanOptionalAction
        else:
            choices = S.choices_of(field, annotation)
            element = inner
            if typing.get_origin(inner) in (tuple, list):
                element = next((a for a in typing.get_args(inner) if a is not Ellipsis), str)
                kwargs["nargs"] = "+"
            kwargs["type"] = _parser_for(element if not optional else element | None, field.name) \
                if element is not Any else str
            if choices is not None:
                kwargs["choices"] = list(choices) + ([None] if optional else [])
                kwargs["metavar"] = "{" + ",".join(map(str, choices)) + "}"
            if field.metadata.get("metavar"):
                kwargs["metavar"] = field.metadata["metavar"]
        target.add_argument(flag, **kwargs)
        for old, note in (field.metadata.get("old_flags") or {}).items():
            old_kwargs = {k: v for k, v in kwargs.items() if k not in ("action", "help")}
            if inner is bool:
                old_kwargs.update(nargs=0, const=True)
            target.add_argument(old, action=_OldFlag, note=note, new_flag=flag, help=argparse.SUPPRESS,
                                **old_kwargs)


def add_renamed_flag(parser: argparse.ArgumentParser, old: str, **kwargs: Any) -> None:
    """Parse the old spelling ``old`` (a key of :data:`RENAMED_FLAGS`) into its own namespace key; read it
    with :func:`renamed_value`. ``kwargs``: as ``add_argument`` (``nargs``, ``choices``)."""
    parser.add_argument(old, action=_OldFlag, new_flag=RENAMED_FLAGS[old], default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS, **kwargs)


def renamed_value(args: argparse.Namespace, old: str, *, exclusive: bool = False) -> Any:
    """The value the renamed flag ``old`` gave (None when not given). ``exclusive``: giving both spellings is
    an error (when the new one's value would otherwise be dropped)."""
    value = vars(args).get(old[2:].replace("-", "_"))
    new = RENAMED_FLAGS[old]
    if value is not None and exclusive and vars(args).get(new[2:].replace("-", "_")) is not None:
        raise MedlamaInputError(f"give {new} only ({old} is its old name)")
    return value


def given_settings(args: argparse.Namespace, cls: type, *, prefix: str = "") -> dict[str, Any]:
    """``{field: value}`` for the flags of ``cls`` that the user gave (see :func:`add_settings_flags`)."""
    out = {}
    for field in S.fields_of(cls):
        dest = (prefix.replace("-", "_") + field.name) if prefix else field.name
        if hasattr(args, dest):
            value = getattr(args, dest)
            out[field.name] = tuple(value) if isinstance(value, list) else value
    return out
