"""What a push is told besides the folder and the repository: the settings of ``push-dataset``,
``push-results``, ``push-model`` and ``push-metric`` (their flags are made from these fields)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from medlama.core.settings import Checked, setting


@dataclass(frozen=True)
class PushSettings(Checked):
    """Settings every push takes: the repository's privacy, the branch and message of the commit, a dry run."""

    private: bool = setting(False, switch=True, show_default=False, help="create the repository as private")
    revision: str | None = setting(None, flag="--branch", parse=str, show_default=False, metavar="BRANCH",
                                   help="branch to commit to (created if missing; default: main)")
    commit_message: str | None = setting(None, flag="--message", parse=str, metavar="MESSAGE", show_default=False,
                                         help="commit message (default: one naming what is uploaded)")
    dry_run: Path | None = setting(None, parse=Path, metavar="DIR", show_default=False,
                                   help="upload nothing: write the exact upload tree to DIR/<repo name>/ and "
                                        "DIR/manifest.json (default: upload)")


@dataclass(frozen=True)
class DatasetPushSettings(PushSettings):
    """A dataset push (``push-dataset``, ``push-results``): the common settings and the access gating."""

    gated: Literal["auto", "manual", "none"] | None = setting(
        None, parse=str, show_default=False,
        help="access requests: auto-approved, manually approved, or none (default: manual for UMLS-derived data, "
             "none otherwise; none needs --private for UMLS data)")


@dataclass(frozen=True)
class ModelPushSettings(PushSettings):
    """A model push (``push-model``): the common settings, the checkpoints, the probe scores for the card."""

    include_checkpoints: bool = setting(False, switch=True, show_default=False,
                                        help="also upload checkpoints/*/ models (not their optimizer states)")
    results: Path | None = setting(
        None, parse=Path, metavar="PROBE_OUT", show_default=False,
        help="the output folder of `medlama probe --model PATH`: its acc@k scores (percent) go into the uploaded "
             "card's model-index and probing scores table (PATH is not changed); runs of another model, or of "
             "PATH before it changed, are refused (default: none)")
    partial_results: bool = setting(
        False, switch=True, show_default=False,
        help="with --results: also put the scores of a run of part of its query set (--limit, some --relations) "
             "into the card, each metric named as partial (default: refused)")
