"""Command-line flags made from settings dataclasses (``medlama.core.settings``): the only place that turns a
configuration into argparse arguments, so a field's name, help, choices and default are written once.

A flag's value is parsed by the field's annotation (``int``, ``float``, ``str``, ``Path``, ``bool`` as
``--x/--no-x`` or, for a ``switch``, one spelling, ``Literal`` as choices, ``tuple[...]`` as one or more
values, ``X | None`` accepting ``none``), or by the field's own ``parse``. Flags that are not given stay out
of the namespace (``argparse.SUPPRESS``), so :func:`given_settings` returns exactly what the user typed and
the rest comes from the defaults or a preset (``filled=True`` puts the defaults in, for commands that read
the namespace whole). Only positional arguments, and the few flags that are no setting (``--json``), are
written by hand in the commands.
"""

from __future__ import annotations

import argparse
import inspect
import re
import dataclasses
import types
import typing
from pathlib import Path
from collections.abc import Callable, Collection, Mapping
from typing import Any

from medlama.core import settings as S

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


def add_settings_flags(parser: Any, cls: type, *,
                       exclude: tuple[str, ...] = (), only: tuple[str, ...] | None = None, defaults: Any = None,
                       title: str | None = None, prefix: str = "",
                       helps: Mapping[str, Callable[[str], str]] | None = None, said: Collection[str] = (),
                       filled: bool = False) -> None:
    """Add a flag for every command-line field of the settings class ``cls`` (less ``exclude``; with ``only``,
    just those fields) to ``parser``, an ``argparse.ArgumentParser`` or one of its argument groups.

    ``defaults``: an instance (a preset) whose values ``--help`` shows as the defaults; by default the
    class's own. ``title``: put the flags in an argument group. ``prefix``: prepended to each flag name
    (``--rewire-`` for the recipe's rewiring flags); the namespace keys become ``prefix_field``. ``helps``:
    field name -> a function rewording that field's help for this command (its default is still appended, but
    for the fields in ``said``, whose reworded help says their defaults itself: one per method).
    ``filled``: a flag not given still sets its default in the namespace (for commands that read every
    value); by default it stays out, so that :func:`given_settings` sees only what was typed. A field without
    a default is a required flag.
    """
    target = parser.add_argument_group(title) if title else parser
    hints = S.type_hints(cls)
    for field in S.fields_of(cls):
        chosen = field.name not in exclude and (only is None or field.name in only)
        if not chosen or not field.metadata.get("cli", True):
            continue
        flag = S.flag_of(field)
        if prefix:
            flag = "--" + prefix + flag[2:]
        dest = (prefix.replace("-", "_") + field.name) if prefix else field.name
        annotation = hints.get(field.name, Any)
        default = getattr(defaults, field.name) if defaults is not None else S.default_of(field)
        help_text = S.help_of(field)
        if helps and field.name in helps:
            help_text = helps[field.name](help_text)
        if field.name not in said:
            help_text += _default_text(field, default)
        help_text = help_text.replace("%", "%%")  # argparse formats help with %
        kwargs: dict[str, Any] = {"dest": dest, "help": help_text,
                                  "default": default if filled else argparse.SUPPRESS}
        if default is dataclasses.MISSING:
            kwargs.update(required=True, default=None)
        kwargs.update(_value_kwargs(field, annotation, default))
        target.add_argument(*[flag, *([field.metadata["short"]] if field.metadata.get("short") else [])], **kwargs)


def _default_text(field: dataclasses.Field, default: Any) -> str:
    """`` (default: X)`` for ``--help``: X the value, or the field's ``show_default`` words (``False``: the
    help says it)."""
    said = field.metadata.get("show_default", True)
    if default is dataclasses.MISSING or said is False:
        return ""
    if isinstance(said, str):
        return f" (default: {said})"
    return f" (default: {shown_default(default)})"


def shown_default(default: Any) -> str:
    """A default as every ``--help`` writes it: ``none``, ``on``/``off``, values joined by spaces."""
    if default is None:
        return "none"
    if isinstance(default, bool):
        return "on" if default else "off"
    return " ".join(map(str, default)) if isinstance(default, (tuple, list)) else str(default)


def _value_kwargs(field: dataclasses.Field, annotation: Any, default: Any) -> dict[str, Any]:
    """How argparse reads the field's value: ``action`` for a bool, else ``type``, ``nargs``, ``choices``,
    ``metavar``."""
    inner, optional = S.unwrap_optional(annotation)
    if inner is bool:
        if field.metadata.get("switch"):  # one spelling only: --overwrite, or --no-verify for a true default
            return {"action": "store_false" if default is True else "store_true"}
        return {"action": argparse.BooleanOptionalAction}
    kwargs: dict[str, Any] = {}
    choices = S.choices_of(field, annotation)
    element = inner
    if typing.get_origin(inner) in (tuple, list):
        element = next((a for a in typing.get_args(inner) if a is not Ellipsis), str)
        kwargs["nargs"] = "+"
    parse = field.metadata.get("parse")
    if parse is not None:  # the field's own reading of a word (no "none" unless it says so)
        kwargs["type"] = parse
    else:
        kwargs["type"] = _parser_for(element if not optional else element | None, field.name) \
            if element is not Any else str
    if choices is not None:
        kwargs["choices"] = list(choices) + ([None] if optional and parse is None else [])
        kwargs["metavar"] = "{" + ",".join(map(str, choices)) + "}"
    if field.metadata.get("metavar"):
        kwargs["metavar"] = field.metadata["metavar"]
    return kwargs


def given_settings(args: argparse.Namespace, cls: type, *, prefix: str = "") -> dict[str, Any]:
    """``{field: value}`` for the flags of ``cls`` that the user gave (see :func:`add_settings_flags`)."""
    out = {}
    for field in S.fields_of(cls):
        dest = (prefix.replace("-", "_") + field.name) if prefix else field.name
        if hasattr(args, dest):
            value = getattr(args, dest)
            out[field.name] = tuple(value) if isinstance(value, list) else value
    return out


def plain_text(doc: str) -> str:
    """A module docstring as ``--help`` shows it: reST's double backquotes and roles (``:func:`x```) read as
    plain words."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", lambda found: found.group(1).split(".")[-1], doc)
    return text.replace("``", "")


def add_command(subparsers: Any, name: str, run: Any, *, help: str, doc: str | None = None) -> argparse.ArgumentParser:
    """One sub-command: its parser, its one-line ``help``, and the function it runs. ``--help``'s description is
    ``doc`` (a command module's docstring) or else ``run``'s own docstring, shown as written (plain words for
    reST)."""
    parser = subparsers.add_parser(name, help=help, description=plain_text(inspect.cleandoc(doc or run.__doc__ or help)),
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.set_defaults(func=run)
    return parser
