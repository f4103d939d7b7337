"""``push-results`` gates a run's upload by the terms its dataset declares (``Declaration.terms``), not by a list of
dataset names: a dataset declared at run time gets its own terms; BioLAMA's umls source (and its all config) its
part's; a dataset nobody declared is private only."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from probe_outputs import toy_queries, toy_result  # tests/helpers (pytest pythonpath)

from medlama.cli import main
from medlama.datasets.registry import BuildCommand, Declaration, declared, register, unregister
from medlama.publishing.results_push import terms_of



@dataclass(frozen=True)
class ToySettings:
    """A toy build's settings (none)."""


#: A build that is never run: the toy dataset is only read.
TOY_BUILD = BuildCommand(help="a toy", description="a toy", settings=ToySettings, run=lambda settings, as_json: 0)


@pytest.fixture
def toy_dataset():
    """A dataset declared here, public by its own declaration."""
    register(Declaration(name="toy-open", card="medlama", terms="open", build=TOY_BUILD))
    yield "toy-open"
    unregister("toy-open")


def pushed(out, tmp_path, capsys, *flags: str) -> tuple[int, dict, str]:
    """``medlama push-results OUT me/r --dry-run``: its exit status, manifest and error line."""
    status = main(["push-results", str(out), "me/results", "--dry-run", str(tmp_path / "dry"), *flags])
    err = capsys.readouterr().err.strip()
    manifest = tmp_path / "dry" / "manifest.json"
    return status, json.loads(manifest.read_text()) if manifest.exists() else {}, err


def test_a_declared_dataset_is_pushed_by_its_own_terms(toy_dataset, tmp_path, capsys):
    out = toy_result(toy_queries(dataset=toy_dataset), "toy", 0.5, 1).save(tmp_path / "toy")
    status, manifest, err = pushed(out, tmp_path, capsys)
    assert status == 0, err
    assert manifest["gated"] is False and manifest["umls_derived"] is False
    card = (tmp_path / "dry" / "results" / "README.md").read_text()
    assert "umls" not in card.split("---")[1]  # no UMLS tag, no access form


def test_an_undeclared_dataset_is_private_only(tmp_path, capsys):
    out = toy_result(toy_queries(dataset="nobody-declared"), "x", 0.5, 1).save(tmp_path / "x")
    status, _, err = pushed(out, tmp_path, capsys)
    assert status == 2 and err.startswith("medlama: error: ") and "push them --private" in err
    assert not (tmp_path / "dry").exists()


@pytest.mark.parametrize("config, relations, terms", [
    ("ctd", ["ctd_1"], "open"), ("wikidata", ["wikidata_P1"], "open"), ("umls", ["umls_1"], "umls"),
    ("all", ["ctd_1", "wikidata_P1"], "umls"), (None, ["ctd_1", "umls_2"], "umls"), ("hard", [], "open")])
def test_biolama_parts_carry_their_terms(config, relations, terms):
    assert declared("biolama").terms_of(config, relations) == terms
    run = {"data": {"dataset": "biolama", "config": config}, "per_relation": {r: {} for r in relations}}
    assert terms_of([run]) == terms
    assert terms_of([run, {"data": {"dataset": "medlama", "config": "hard"}}]) == "umls"
    assert terms_of([run, {"data": {"dataset": "context-variance"}}]) == "restricted"


def test_a_declaration_takes_only_known_terms():
    with pytest.raises(ValueError, match="terms are one of"):
        Declaration(name="toy-bad", card="medlama", terms="public", build=TOY_BUILD)
