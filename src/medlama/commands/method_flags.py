"""``medlama probe``'s method flags, made from the probers' settings dataclasses (``medlama.probers.registry``).

* Each method's flags sit in their own argument group; a flag several methods share (``--reduction``) is
  added once, its help listing each method's default. ``--batch-size`` is :class:`~medlama.core.batching.BatchSizeFlag`'s,
  as every command that offers it makes it.
* ``--preset`` names a preset of a chosen method (retrieval: reference, cosine, sentence-transformers;
  mask-predict: paper, paper-order+order, biolama, fill-mask).
* ``--raw-predictions`` is the one flag that is not a field: it sets ``to_candidates`` to false.
* A flag that no chosen method takes is an error naming the flag and the methods, never silently ignored.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from medlama.commands.flags import add_settings_flags, given_settings, shown_default
from medlama.core.batching import BatchSizeFlag
from medlama.core.errors import MedlamaInputError
from medlama.probers.registry import METHODS, settings_for
from medlama.core.settings import default_of, fields_of, flag_of

PRESET_HELP = {
    "retrieval": "reference: the reference implementation's ([CLS] of the last layer, L2, names 25 / queries 50 "
                 "tokens); cosine: the same with cosine; sentence-transformers: SentenceTransformer.encode itself "
                 "(the model's own pooling, normalisation and max_seq_length) with cosine, as sentence-transformers' "
                 "InformationRetrievalEvaluator",
    "mask-predict": "paper: the paper's X-FACTR settings (beam 5, up to 5 masks, 10 rounds) with the independent "
                    "fill; paper-order+order: order fill + order refinement; biolama: BioLAMA's (beam 5, up to 10 "
                    "masks, confidence fill, no refinement), as medlama optiprompt decodes; fill-mask: the single-token "
                    "fill-mask baseline of the paper's table 3 (one mask, the 10 best vocabulary tokens)",
}
RAW_PREDICTIONS = "--raw-predictions"  # to_candidates=False: a negated field, so not made by add_settings_flags


def _field(cls: type, name: str):
    return next(f for f in fields_of(cls) if f.name == name)


def _names(cls: type) -> list[str]:
    return [f.name for f in fields_of(cls) if f.metadata.get("cli", True)]


def shared_fields() -> list[str]:
    """Command-line fields that more than one method has, in first-seen order."""
    counts: dict[str, int] = {}
    for method in METHODS.values():
        for name in _names(method.settings):
            counts[name] = counts.get(name, 0) + 1
    return [name for name, count in counts.items() if count > 1]


def takers(field: str) -> list[str]:
    """The methods whose settings have ``field``."""
    return [name for name, method in METHODS.items() if field in {f.name for f in fields_of(method.settings)}]


def method_defaults(field: str, settings: dict[str, type]) -> str:
    """What ``field`` is and defaults to in each settings class of ``settings`` (``{name: class}``), one entry for
    the names that say the same: ``causal-likelihood, causal-constrained: ... (default: 32); ...``."""
    said: dict[str, list[str]] = {}
    for owner, cls in settings.items():
        if field in {f.name for f in fields_of(cls)}:
            known = _field(cls, field)
            said.setdefault(f"{known.metadata.get('help')} (default: {shown_default(default_of(known))})",
                            []).append(owner)
    return "; ".join(f"{', '.join(names)}: {text}" for text, names in said.items())


def add_method_arguments(parser: argparse.ArgumentParser) -> None:
    """``--preset``, the shared flags, and one group of flags per method."""
    presets = [(name, preset) for name, method in METHODS.items() for preset in method.presets]
    parser.add_argument("--preset", choices=sorted({preset for _, preset in presets}), default=argparse.SUPPRESS,
                        help="a named bundle of the chosen method's settings; the flags given replace its values "
                             "(default: each method's first): "
                             + "; ".join(f"{name}: {text}" for name, text in PRESET_HELP.items()))
    shared = shared_fields()
    group = parser.add_argument_group("options of several methods")
    classes = {name: method.settings for name, method in METHODS.items()}
    add_settings_flags(group, BatchSizeFlag,
                       helps={"batch_size": lambda lead: f"{lead}, for every method; "
                                                         + method_defaults("batch_size", classes)})
    for name in shared:
        if name == "batch_size":  # BatchSizeFlag's, just above
            continue
        cls = METHODS[takers(name)[0]].settings
        text = "by method; " + method_defaults(name, classes)
        add_settings_flags(group, cls, only=(name,), helps={name: lambda _, text=text: text}, said=(name,))
    owners = takers("to_candidates")
    group.add_argument(RAW_PREDICTIONS, action="store_true", default=argparse.SUPPRESS,
                       help=f"{' and '.join(owners)}: report decoded strings as they are, not as the candidate "
                            "names with the same token ids")
    for name, method in METHODS.items():
        add_settings_flags(parser, method.settings, exclude=tuple(shared), title=f"--method {name}")


def _refuse(flag: str, owners: Sequence[str], methods: Sequence[str]) -> None:
    if not set(owners) & set(methods):
        raise MedlamaInputError(f"{flag} applies to {' and '.join(owners)}, not {' or '.join(methods)}")


def method_settings(args: argparse.Namespace, methods: Sequence[str]) -> dict[str, Any]:
    """Each chosen method's settings from the flags given; a flag no chosen method takes is an error."""
    given: dict[str, Any] = {}
    flags: dict[str, str] = {}
    for method in METHODS.values():
        for name, value in given_settings(args, method.settings).items():
            given[name] = value
            flags[name] = flag_of(_field(method.settings, name))
    if vars(args).get("raw_predictions"):
        given["to_candidates"], flags["to_candidates"] = False, RAW_PREDICTIONS
    for name in given:
        _refuse(flags[name], takers(name), methods)
    chosen_presets: dict[str, str] = {}
    preset = vars(args).get("preset")
    if preset is not None:
        owners = [name for name, method in METHODS.items() if preset in method.presets]
        _refuse(f"--preset {preset}", owners, methods)
        chosen_presets.update({name: preset for name in owners if name in methods})
    out = {}
    for method in methods:
        own = {f.name for f in fields_of(METHODS[method].settings)}
        values = {name: value for name, value in given.items() if name in own}
        out[method] = settings_for(method, values, preset=chosen_presets.get(method))
    return out
