"""What ``medlama build medlama`` and ``medlama build biolama`` are told: where the build goes, which release
it reads and how that release is checked (the commands' flags are made from these fields).

The fields are not checked here: the hardness thresholds are checked where the rule is made
(:func:`medlama.datasets.medlama.check_threshold`, naming the flag), the release where it is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from medlama.core.settings import setting
from medlama.datasets.choices import DEFAULT_CHOICES, DEFAULT_SEED
from medlama.loaders.biolama_release import SOURCES

_NO_VERIFY = "skip the SHA-256 check of a local source (a modified copy on purpose)"
_CHOICES = ("distractors per query of the multiple-choice configs (*_mc): drawn from the query's relation pool, "
            "no gold answer among them")
_SEED = "seed of the multiple-choice draw (recorded in the card and build_info.json)"


@dataclass(frozen=True)
class MedlamaBuildSettings:
    """A MedLAMA build: the output folder, the release, the hardness thresholds, the checksum check."""

    out: Path = setting(parse=Path, help="output folder, e.g. out/medlama; load it with "
                                         "medlama.load_medlama('hard', data=OUT)")
    source: str | None = setting(None, parse=str, show_default="$MEDLAMA_SOURCE, else download",
                                 help="local release: a folder holding prompts.csv and 2021AA/, or a .tar.gz/.zip "
                                      "of it")
    match_threshold: float = setting(0.1, parse=float, help="hard if avg_match < this")
    rouge_threshold: float = setting(0.1, parse=float, help="hard if avg_rouge_l < this")
    verify_checksums: bool = setting(True, flag="--no-verify", switch=True, show_default=False, help=_NO_VERIFY)
    choices: int = setting(DEFAULT_CHOICES, min=1, metavar="N", help=_CHOICES)
    choices_seed: int = setting(DEFAULT_SEED, min=0, metavar="SEED", help=_SEED)


@dataclass(frozen=True)
class BiolamaBuildSettings:
    """A BioLAMA build: the output folder, the archive and its checksum, the sources built."""

    out: Path = setting(parse=Path, help="output folder, e.g. out/biolama; load it with "
                                         "medlama.datasets.folders.load_config(OUT, 'umls', 'test')")
    source: str | None = setting(None, parse=str, show_default=False,
                                 help="local release: data.tar.gz, or the extracted data/ folder (or its parent); "
                                      "default: $BIOLAMA_SOURCE, else download")
    sha256: str | None = setting(None, parse=str, metavar="HASH", show_default=False,
                                 help="expected SHA-256 of the archive (download or local .tar.gz); default: "
                                      "$BIOLAMA_SHA256, else the pinned one (none yet)")
    verify_checksums: bool = setting(True, flag="--no-verify", switch=True, show_default=False,
                                     help="accept the archive without checking its SHA-256 (recorded in the card)")
    sources: tuple[str, ...] = setting(SOURCES, choices=SOURCES, metavar="SOURCE", show_default=False,
                                       help="build only these sources (ctd, umls, wikidata; default: all three)")
    choices: int = setting(DEFAULT_CHOICES, min=1, metavar="N", help=_CHOICES)
    choices_seed: int = setting(DEFAULT_SEED, min=0, metavar="SEED", help=_SEED)
