"""Typed settings, each defined once: a dataclass whose fields carry their help text, choices and bounds.

Every configuration of the toolkit (a prober's settings, the rewiring config, ...) is a dataclass whose
fields are made with :func:`setting`. From those fields alone come

* the checks (:func:`check`: types from the annotations, ``choices``, ``min``/``max``), called from the
  dataclass's ``__post_init__`` so that no invalid settings object can exist;
* construction from a mapping (:func:`settings_from`): an unknown or misspelt name is an error that
  suggests the nearest real one, never silently ignored;
* the recorded command line (:func:`to_flags`) and the comparison of two runs (:func:`differences`);
* the command-line flags, built by the CLI's ``flags`` module (the only place that knows argparse).

Example::

    @dataclass(frozen=True)
    class RetrievalSettings:
        batch_size: int = setting(128, help="texts per forward pass", min=1)
        pooling: Literal["cls", "mean"] = setting("cls", help="how a text becomes one vector")

        def __post_init__(self) -> None:
            check(self)
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, Union

from medlama.core.errors import MedlamaInputError

S = TypeVar("S")

def setting(default: Any = dataclasses.MISSING, *, help: str, choices: Sequence[Any] | None = None,
            min: float | None = None, max: float | None = None, flag: str | None = None, short: str | None = None,
            metavar: str | None = None, cli: bool = True, switch: bool = False, show_default: bool | str = True,
            parse: Any = None, default_factory: Any = dataclasses.MISSING, **extra: Any) -> Any:
    """A dataclass field with what a user needs to know about it.

    ``help``: one line for ``--help`` and error messages. ``choices``: the allowed values (a ``Literal``
    annotation gives them too; a sequence that reads them when asked, as the declared datasets' names, is kept). ``min``/``max``: inclusive bounds of a number. ``flag``: the command-line
    spelling (default ``--field-name``); ``short``: a one-letter spelling beside it (``-q``). ``metavar``: the
    value's name in ``--help``. ``cli=False``: not a command-line flag (set from Python only). ``switch``: a
    bool flag with one spelling that flips the default (``--overwrite``; ``--no-verify`` for a true default),
    not ``--x/--no-x``. ``show_default``: what ``--help`` shows as the default (``False``: the help says it).
    ``parse``: the function reading the flag's word, where the annotation's reading is not enough (a device
    name checked at once; a path in which ``none`` is a name).
    ``extra``: further facts a configuration keeps about its own fields (for example which settings a
    resumed run may change), read back with ``field.metadata[name]``; ``nonfinite=True`` lets a float
    setting be infinite (NaN never is: it passes every bound).
    """
    if choices is not None and (isinstance(choices, list) or not isinstance(choices, Sequence)):
        choices = tuple(choices)  # a copy; a read-only sequence stays itself (one read when asked stays live)
    metadata = {"help": help, "choices": choices, "min": min, "max": max,
                "flag": flag, "short": short, "metavar": metavar, "cli": cli, "switch": switch,
                "show_default": show_default, "parse": parse, **extra}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def fields_of(cls_or_obj: Any) -> tuple[dataclasses.Field, ...]:
    """The fields of a settings dataclass (class or instance)."""
    return dataclasses.fields(cls_or_obj)


def flag_of(field: dataclasses.Field) -> str:
    """The command-line spelling of a field: ``--batch-size`` for ``batch_size`` unless set otherwise."""
    return field.metadata.get("flag") or "--" + field.name.replace("_", "-")


def help_of(field: dataclasses.Field) -> str:
    return field.metadata.get("help") or ""


def default_of(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def type_hints(cls_or_obj: Any) -> dict[str, Any]:
    cls = cls_or_obj if isinstance(cls_or_obj, type) else type(cls_or_obj)
    return typing.get_type_hints(cls)


def unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    """``(X, True)`` for ``X | None`` / ``Optional[X]``, else ``(annotation, False)``."""
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) < len(typing.get_args(annotation)):
            inner = args[0] if len(args) == 1 else Union[tuple(args)]  # noqa: UP007 - runtime construction
            return inner, True
    return annotation, False


def choices_of(field: dataclasses.Field, annotation: Any) -> tuple[Any, ...] | None:
    """Allowed values: the field's ``choices``, else those of a ``Literal`` annotation (or its elements')."""
    if field.metadata.get("choices"):
        return tuple(field.metadata["choices"])
    inner, _ = unwrap_optional(annotation)
    if typing.get_origin(inner) in (tuple, list):
        args = [a for a in typing.get_args(inner) if a is not Ellipsis]
        inner = args[0] if args else Any
    if typing.get_origin(inner) is Literal:
        return typing.get_args(inner)
    return None


def _type_error(name: str, expected: str, value: Any) -> MedlamaInputError:
    return MedlamaInputError(f"setting {name!r} must be {expected}, got {value!r}")


def _describe(annotation: Any) -> str:
    if typing.get_origin(annotation) is Literal:
        return " or ".join(map(repr, typing.get_args(annotation)))
    return {int: "an integer", float: "a number", str: "a string"}.get(annotation,
                                                                      getattr(annotation, "__name__", str(annotation)))


def _check_scalar(name: str, annotation: Any, value: Any, infinite: bool = False) -> None:
    origin = typing.get_origin(annotation)
    if annotation is Any:
        return
    if origin is Literal:
        return  # checked with the choices
    if origin in (Union, types.UnionType):
        for option in typing.get_args(annotation):
            if typing.get_origin(option) is Literal:  # a word beside a type (a batch size or "auto")
                if value in typing.get_args(option):
                    return
                continue
            try:
                _check_scalar(name, option, value, infinite)
                return
            except MedlamaInputError:
                continue
        raise _type_error(name, " or ".join(_describe(a) for a in typing.get_args(annotation)), value)
    if annotation is bool:
        if not isinstance(value, bool):
            raise _type_error(name, "true or false", value)
    elif annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _type_error(name, "an integer", value)
    elif annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _type_error(name, "a number", value)
        if value != value:  # NaN passes every bound check: refuse it here
            raise _type_error(name, "a finite number (not NaN)", value)
        if not infinite and not math.isfinite(value):  # inf passes a one-sided bound, and trains to NaN
            raise _type_error(name, "a finite number", value)
    elif annotation is str:
        if not isinstance(value, str):
            raise _type_error(name, "a string", value)
    elif annotation is Path:
        if not isinstance(value, (str, Path)):
            raise _type_error(name, "a path", value)
    elif isinstance(annotation, type) and not isinstance(value, annotation):
        raise _type_error(name, f"a {annotation.__name__}", value)


def check(settings: S) -> S:
    """Check every field of ``settings`` against its annotation, choices and bounds; return it.

    Raises :class:`MedlamaInputError` naming the setting, the rule and the value.
    """
    hints = type_hints(settings)
    for field in fields_of(settings):
        value = getattr(settings, field.name)
        annotation, optional = unwrap_optional(hints.get(field.name, Any))
        infinite = bool(field.metadata.get("nonfinite"))
        if value is None:
            if optional or annotation is Any:
                continue
            raise _type_error(field.name, "set (it has no 'None' value)", value)
        origin = typing.get_origin(annotation)
        items: Sequence[Any]
        if origin in (tuple, list):
            if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list)):
                raise _type_error(field.name, "a list", value)
            element = next((a for a in typing.get_args(annotation) if a is not Ellipsis), Any)
            for item in value:
                _check_scalar(field.name, element, item, infinite)
            items = value
        else:
            _check_scalar(field.name, annotation, value, infinite)
            items = [value]
        allowed = choices_of(field, hints.get(field.name, Any))
        low, high = field.metadata.get("min"), field.metadata.get("max")
        for item in items:
            if allowed is not None and item not in allowed:
                raise MedlamaInputError(f"setting {field.name!r} must be one of "
                                        f"{', '.join(map(repr, allowed))}, got {item!r}")
            if not isinstance(item, (int, float)):  # bounds are a number's ("auto" beside a batch size has none)
                continue
            if low is not None and item < low:
                raise MedlamaInputError(f"setting {field.name!r} must be at least {low}, got {item!r}")
            if high is not None and item > high:
                raise MedlamaInputError(f"setting {field.name!r} must be at most {high}, got {item!r}")
    return settings


class Checked:
    """The base of a settings dataclass whose fields need no check beyond :func:`check`: made, it is checked."""

    def __post_init__(self) -> None:
        check(self)


def unknown_names(cls: type, names: Sequence[str]) -> list[str]:
    known = {f.name for f in fields_of(cls)}
    return [name for name in names if name not in known]


def did_you_mean(name: str, known: Sequence[str]) -> str:
    """``name`` quoted, with the nearest of ``known`` when one is close: ``'mciro' (did you mean 'micro'?)``."""
    near = difflib.get_close_matches(name, list(known), n=1)
    return f"{name!r}" + (f" (did you mean {near[0]!r}?)" if near else "")


def _refuse_unknown(cls: type, names: Sequence[str], what: str) -> None:
    unknown = unknown_names(cls, names)
    if not unknown:
        return
    known = [f.name for f in fields_of(cls)]
    notes = [did_you_mean(name, known) for name in unknown]
    raise MedlamaInputError(f"unknown {what} setting(s): {', '.join(notes)}; known: {', '.join(known)}")


def settings_from(cls: type[S], values: Mapping[str, Any] | None = None, *, base: S | None = None,
                  what: str | None = None, **more: Any) -> S:
    """``cls`` built from ``base`` (or the defaults) with ``values`` and ``more`` replacing fields.

    An unknown name is an error (with the nearest known name), so a misspelt setting never passes unseen.
    ``None`` in ``values`` means "not given" only for fields whose annotation does not allow ``None``.
    """
    given = {**(values or {}), **more}
    _refuse_unknown(cls, list(given), what or cls.__name__)
    hints = type_hints(cls)
    kept = {}
    for name, value in given.items():
        if value is None and not unwrap_optional(hints.get(name, Any))[1]:
            continue
        kept[name] = value
    if base is not None:
        return dataclasses.replace(base, **kept)
    return cls(**kept)


def as_dict(settings: Any) -> dict[str, Any]:
    """JSON-ready ``{field: value}`` (paths as strings, tuples as lists)."""
    out = {}
    for field in fields_of(settings):
        value = getattr(settings, field.name)
        if isinstance(value, Path):
            value = str(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[field.name] = value
    return out


def differences(a: Any, b: Any, names: Sequence[str] | None = None) -> list[tuple[str, Any, Any]]:
    """``(field, value in a, value in b)`` for each field (of ``names``, or all) where the two differ."""
    chosen = names if names is not None else [f.name for f in fields_of(a)]
    return [(name, getattr(a, name), getattr(b, name)) for name in chosen if getattr(a, name) != getattr(b, name)]


def to_flags(settings: Any, *, relative_to: Any | None = None) -> list[str]:
    """The command-line flags that set ``settings``: only those differing from ``relative_to`` (default:
    the class defaults), each spelt as :func:`flag_of` says. Fields with ``cli=False`` are left out."""
    hints = type_hints(settings)
    out: list[str] = []
    for field in fields_of(settings):
        if not field.metadata.get("cli", True):
            continue
        value = getattr(settings, field.name)
        reference = getattr(relative_to, field.name) if relative_to is not None else default_of(field)
        if value == reference:
            continue
        flag = flag_of(field)
        annotation, _ = unwrap_optional(hints.get(field.name, Any))
        if annotation is bool and field.metadata.get("switch"):
            out.append(flag)  # one spelling, which flips the default
        elif annotation is bool:
            out.append(flag if value else "--no-" + flag[2:])
        elif value is None:
            out.extend([flag, "none"])  # an optional setting switched off, as the flags parse it
        elif isinstance(value, (tuple, list)):
            out.extend([flag, *map(str, value)])
        else:
            out.extend([flag, str(value)])
    return out
