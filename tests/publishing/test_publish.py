"""``medlama push-dataset`` / ``push-metric``: dry-run trees load back offline and equal their source; the real
upload path runs against a stand-in ``HfApi`` (no test touches the network)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import evaluate
import pytest
import yaml
from datasets import load_dataset
from huggingface_hub import DatasetCard

from medlama.core.atomic import OWNER_NAME, write_owner
from medlama.cli import main
from medlama.datasets.biolama_folder import write_biolama
from medlama.core.errors import MedlamaInputError
from medlama.publishing.hub import GATED_FIELDS, push_dataset, push_metric
from medlama.metrics import metric_path

import cv_inputs as cvb  # tests/helpers (pytest pythonpath): the tiny MedLAMA folder and corpora
from dry_runs import assert_busy_dry_run_refused  # tests/helpers (pytest pythonpath)

SECRET = "hf_medlamaTestTokenNeverToBeShown"


def front_matter(text: str) -> dict:
    return yaml.safe_load(text.split("---")[1])


def body(text: str) -> str:
    return text.split("---", 2)[2]


def tree_files(tree: Path) -> dict[str, bytes]:
    return {p.relative_to(tree).as_posix(): p.read_bytes() for p in sorted(tree.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def biolama_public_dir(biolama_release_dir, tmp_path_factory) -> Path:
    """BioLAMA without its UMLS source: nothing UMLS-derived."""
    out = tmp_path_factory.mktemp("built-public") / "biolama"
    write_biolama(out, biolama_release_dir, sources=["ctd", "wikidata"], progress=False)
    return out


@pytest.fixture(scope="module")
def medlama_like_dir(tmp_path_factory) -> Path:
    """A small folder shaped like a MedLAMA build: the MedLAMA card template, configs, Parquet files."""
    from datasets import Dataset

    from medlama.datasets.card import render_card
    from medlama.datasets.medlama import candidate_features, features

    out = tmp_path_factory.mktemp("medlama-like") / "medlama"
    row = {"id": "may_treat-0001", "relation": "may_treat", "head_cui": "C1", "head_name": "aspirin",
           "answer_cuis": ["C2"], "answer_names": ["pain"], "answer_count": 1,
           "query_human": "aspirin may treat [Y] .", "query_default": "aspirin may treat [Y] .", "avg_match": 0.0,
           "avg_rouge_l": 0.0, "is_hard": True}
    (out / "data" / "hard").mkdir(parents=True)
    (out / "candidates").mkdir()
    Dataset.from_list([row], features=features()).to_parquet(str(out / "data/hard/may_treat.parquet"))
    Dataset.from_dict({"name": ["aspirin", "pain"]}, features=candidate_features()).to_parquet(
        str(out / "candidates/hard.parquet"))
    layout = {"hard": "data/hard/*.parquet", "candidates_hard": "candidates/hard.parquet"}
    (out / "README.md").write_text(render_card("medlama", folder=out, configs=layout, default_config="hard",
                                               statistics="| table |"))
    (out / "build_info.json").write_text(json.dumps({"report": {"source": "/home/someone/private/medlama"}}))
    (out / "notes.txt").write_text("not named by any config")
    write_owner(out, "build medlama", files=True)  # as `medlama build medlama` records what it wrote
    return out


# --------------------------------------------------------------------------- datasets


def test_biolama_dry_run_tree_loads_back_and_equals_the_source(biolama_dir, tmp_path, capsys):
    target = tmp_path / "dry"
    assert main(["push-dataset", str(biolama_dir), "someone/biolama", "--dry-run", str(target)]) == 0
    assert f"written to {target / 'biolama'}" in capsys.readouterr().out
    tree = target / "biolama"
    source, uploaded = tree_files(biolama_dir), tree_files(tree)
    assert OWNER_NAME in source and OWNER_NAME not in uploaded  # the local ownership record is never uploaded
    del source[OWNER_NAME]
    assert sorted(uploaded) == sorted(source)
    for name, content in uploaded.items():
        if name.endswith(".parquet"):
            assert content == source[name], name
    readme, original = uploaded["README.md"].decode(), source["README.md"].decode()
    meta, original_meta = front_matter(readme), front_matter(original)
    assert meta["extra_gated_fields"] == GATED_FIELDS and "UMLS" in meta["extra_gated_prompt"]
    assert meta == original_meta and original_meta["gated"] == "manual"  # the folder's own card is gated too
    assert body(readme) == body(original).replace("<user>/biolama", "someone/biolama")  # loads name the repo
    assert "<user>/" not in readme and 'load_dataset("someone/biolama", "umls")' in readme
    for config in ("all", "umls", "wikidata_P780"):
        for split in ("train", "dev", "test"):
            ours = load_dataset(str(tree), config, split=split)
            theirs = load_dataset(str(biolama_dir), config, split=split)
            assert ours.features == theirs.features and ours.to_list() == theirs.to_list(), (config, split)
    manifest = json.loads((target / "manifest.json").read_text())
    assert (manifest["repo_id"], manifest["repo_type"], manifest["gated"], manifest["umls_derived"]) == (
        "someone/biolama", "dataset", "manual", True)
    assert [f["path"] for f in manifest["files"]] == sorted(uploaded) and manifest["left_out"] == []
    info = json.loads(uploaded["build_info.json"])
    assert info["report"]["origin"] == Path(info["report"]["origin"]).name  # no local path goes up
    assert str(tmp_path.parent) not in uploaded["build_info.json"].decode()


def test_gating_follows_the_data(biolama_fx, biolama_public_dir, biolama_dir, tmp_path):
    manifest = push_dataset(biolama_public_dir, "someone/biolama-open", dry_run=tmp_path / "open")
    readme = (tmp_path / "open" / "biolama-open" / "README.md").read_text()
    assert manifest["gated"] is False and not manifest["umls_derived"]
    assert "extra_gated_prompt" not in front_matter(readme) and "umls" not in front_matter(readme)["tags"]
    assert load_dataset(str(tmp_path / "open" / "biolama-open"), "ctd",
                        split="test").num_rows == biolama_fx.counts("ctd")
    manifest = push_dataset(biolama_public_dir, "someone/biolama-open", gated="manual", dry_run=tmp_path / "open")
    assert manifest["gated"] == "manual"
    assert "extra_gated_fields" in front_matter((tmp_path / "open" / "biolama-open" / "README.md").read_text())
    with pytest.raises(MedlamaInputError, match="derived from the UMLS Metathesaurus, .* gated .* or --private"):
        push_dataset(biolama_dir, "someone/biolama", gated="none", dry_run=tmp_path / "x")
    assert not (tmp_path / "x").exists()
    manifest = push_dataset(biolama_dir, "someone/biolama", gated="none", private=True, dry_run=tmp_path / "x")
    assert manifest["gated"] is False and manifest["private"] is True


def test_medlama_folder_is_gated_and_loads_back(medlama_like_dir, tmp_path):
    manifest = push_dataset(medlama_like_dir, "someone/medlama", revision="v1", dry_run=tmp_path / "dry")
    tree = tmp_path / "dry" / "medlama"
    assert manifest["umls_derived"] and manifest["gated"] == "manual" and manifest["revision"] == "v1"
    assert manifest["left_out"] == ["notes.txt"] and not (tree / "notes.txt").exists()
    assert "extra_gated_prompt" in front_matter((tree / "README.md").read_text())
    assert json.loads((tree / "build_info.json").read_text())["report"]["source"] == "medlama"
    assert load_dataset(str(tree), "hard", split="test")[0]["head_name"] == "aspirin"
    assert load_dataset(str(tree), "candidates_hard", split="test")["name"] == ["aspirin", "pain"]


@pytest.mark.slow
def test_real_medlama_build_dry_run(medlama_dir, tmp_path):
    push_dataset(medlama_dir, "someone/medlama", dry_run=tmp_path / "dry")
    tree = tmp_path / "dry" / "medlama"
    assert load_dataset(str(tree), "hard", split="test").num_rows == 15_329
    assert load_dataset(str(tree), "candidates_full_may_treat", split="test").to_list() == load_dataset(
        str(medlama_dir), "candidates_full_may_treat", split="test").to_list()
    assert "extra_gated_fields" in front_matter((tree / "README.md").read_text())


def test_dataset_errors(biolama_dir, tmp_path):
    with pytest.raises(MedlamaInputError, match="invalid repository id"):
        push_dataset(biolama_dir, "not a/valid id", dry_run=tmp_path / "dry")
    with pytest.raises(MedlamaInputError, match="nowhere: dataset folder not found"):
        push_dataset(tmp_path / "nowhere", "me/data", dry_run=tmp_path / "dry")
    (tmp_path / "empty").mkdir()
    with pytest.raises(MedlamaInputError, match=r"empty: not a built dataset folder \(no README.md\)"):
        push_dataset(tmp_path / "empty", "me/data", dry_run=tmp_path / "dry")
    broken = tmp_path / "broken"
    shutil.copytree(biolama_dir, broken)
    [dev] = (broken / "data" / "umls" / "UR44").glob("dev-*.parquet")  # named after its content
    dev.unlink()
    with pytest.raises(MedlamaInputError, match=r"config 'all': no file matches 'data/umls/UR44/dev-[0-9a-f]{8}\.parquet'"):
        push_dataset(broken, "me/data", dry_run=tmp_path / "dry")
    assert_busy_dry_run_refused(lambda **dry: push_dataset(biolama_dir, "me/data", **dry), tmp_path)
    with pytest.raises(MedlamaInputError, match="must be outside the folder being published"):
        push_dataset(biolama_dir, "me/data", dry_run=biolama_dir / "dry")
    with pytest.raises(MedlamaInputError, match="unknown gating 'open'"):
        push_dataset(biolama_dir, "me/data", gated="open", dry_run=tmp_path / "dry")


# --------------------------------------------------------------------------- context-variance sets


@pytest.fixture(scope="module")
def cv_root(tmp_path_factory) -> Path:
    """A MedLAMA-shaped folder, NOTEEVENTS.csv and a PMC folder, and two context-variance builds made by the
    command: ``pmc-only`` (MedLAMA triples, PMC contexts declared CC-BY-4.0) and ``with-mimic`` (MIMIC notes as
    well)."""
    root = tmp_path_factory.mktemp("cv-publish")
    medlama = cvb.write_medlama_folder(root / "medlama")
    notes, pmc = cvb.write_corpora(root / "corpora")
    base = ["build", "context-variance", "--medlama", str(medlama), "--config", "full", "--index-dir",
            str(root / "indexes")]
    licensed = ["--corpus-licence", "pmc=CC-BY-4.0"]
    assert main([*base, "--pmc", str(pmc), *licensed, "--out", str(root / "pmc-only")]) == 0
    assert main([*base, "--mimic", str(notes), "--pmc", str(pmc), *licensed, "--out", str(root / "with-mimic")]) == 0
    return root


def test_context_variance_from_medlama_is_gated(cv_root, tmp_path):
    folder = cv_root / "pmc-only"
    meta = front_matter((folder / "README.md").read_text())
    assert "umls" in meta["tags"] and "mimic" not in meta["tags"]
    manifest = push_dataset(folder, "someone/cv", dry_run=tmp_path / "dry")
    assert manifest["umls_derived"] and manifest["gated"] == "manual" and not manifest["mimic_derived"]
    tree = tmp_path / "dry" / "cv"
    assert front_matter((tree / "README.md").read_text())["extra_gated_fields"] == GATED_FIELDS
    assert load_dataset(str(tree), "pmc_real", split="test").num_rows == load_dataset(
        str(folder), "pmc_real", split="test").num_rows > 0
    with pytest.raises(MedlamaInputError, match="derived from the UMLS Metathesaurus, .* gated .* or --private"):
        push_dataset(folder, "someone/cv", gated="none", dry_run=tmp_path / "open")
    assert not (tmp_path / "open").exists()


def test_context_variance_with_mimic_is_pushed_private_only(cv_root, tmp_path):
    folder = cv_root / "with-mimic"
    meta = front_matter((folder / "README.md").read_text())
    assert {"umls", "mimic"} <= set(meta["tags"])
    assert "The rows of `ehr` quote MIMIC clinical notes" in (folder / "README.md").read_text()
    for gated in (None, "manual", "none"):  # no gating makes a public push acceptable
        with pytest.raises(MedlamaInputError, match=rf"{folder.name}: this dataset quotes MIMIC clinical notes "
                                                    r"\(source ehr\), which the PhysioNet data use agreement forbids "
                                                    r"redistributing: it can only be pushed --private"):
            push_dataset(folder, "someone/cv", gated=gated, dry_run=tmp_path / "public")
    assert not (tmp_path / "public").exists()
    api = FakeApi()
    with pytest.raises(MedlamaInputError, match="can only be pushed --private"):
        push_dataset(folder, "someone/cv", api=api)
    assert api.calls == []  # refused before the repository is even created
    manifest = push_dataset(folder, "someone/cv", private=True, dry_run=tmp_path / "private")
    assert manifest["private"] and manifest["mimic_derived"] and manifest["gated"] == "manual"
    assert load_dataset(str(tmp_path / "private" / "cv"), "ehr_real", split="test").num_rows > 0


def test_a_hand_edited_folder_is_refused_naming_what_failed(cv_root, biolama_public_dir, tmp_path):
    """A folder whose card was edited by hand (here: the umls and mimic tags taken off), one no medlama build
    wrote, and one written by another command are not uploaded, whatever they claim."""
    folder = tmp_path / "edited"
    shutil.copytree(cv_root / "with-mimic", folder)
    card = DatasetCard.load(folder / "README.md")
    card.data.tags = [tag for tag in card.data.tags if tag not in ("umls", "mimic")]
    card.save(folder / "README.md")
    api = FakeApi()
    for private in (False, True):
        with pytest.raises(MedlamaInputError, match=r"edited: 'README.md' has changed since `medlama build "
                                                    r"context-variance` wrote it \(.* bytes when written, .* now\)"):
            push_dataset(folder, "someone/cv", private=private, api=api)
    assert api.calls == []
    unowned = tmp_path / "unowned"
    shutil.copytree(biolama_public_dir, unowned, ignore=shutil.ignore_patterns(OWNER_NAME))
    with pytest.raises(MedlamaInputError, match=r"unowned: `medlama push-dataset` uploads only a folder written by "
                                                r"`medlama build medlama` or `medlama build biolama` or `medlama build "
                                                r"context-variance`, and this one has no ownership record"):
        push_dataset(unowned, "someone/biolama", dry_run=tmp_path / "dry")
    write_owner(unowned, "probe", files=True)
    with pytest.raises(MedlamaInputError, match="this folder was written by `medlama probe`"):
        push_dataset(unowned, "someone/biolama", dry_run=tmp_path / "dry")
    write_owner(unowned, "build biolama")  # an ownership record without file records (an earlier version's)
    with pytest.raises(MedlamaInputError, match="the ownership record lists no files with their sizes and SHA-256"):
        push_dataset(unowned, "someone/biolama", dry_run=tmp_path / "dry")
    assert not (tmp_path / "dry").exists()


def test_context_variance_tree_holds_no_local_path(cv_root, tmp_path):
    local = str(cv_root)  # the folder every input, index and output of the builds lies in
    info = json.loads((cv_root / "with-mimic" / "build_info.json").read_text())
    assert local in json.dumps(info)  # the build keeps its corpus files and indexes for reuse ...
    for name in ("pmc-only", "with-mimic"):
        push_dataset(cv_root / name, "someone/cv", private=True, dry_run=tmp_path / name)
        tree = tmp_path / name / "cv"
        for relative, content in tree_files(tree).items():  # ... the upload tree names none of them
            assert local.encode() not in content and str(tmp_path).encode() not in content, relative
    published = json.loads((tmp_path / "with-mimic" / "cv" / "build_info.json").read_text())
    assert published["origin"] == "MedLAMA `full`"
    assert [s["paths"] for s in published["sources"]] == [["NOTEEVENTS.csv"], ["pmc"]]
    assert all(s["index"].startswith(f"{s['source']}-") and "/" not in s["index"] for s in published["sources"])
    assert "triples from MedLAMA `full`;" in (tmp_path / "with-mimic" / "cv" / "README.md").read_text()


# --------------------------------------------------------------------------- licences travel with the folder


def test_mimic_converted_to_json_lines_is_still_pushed_private_only(cv_root, tmp_path, capsys):
    """MIMIC notes read through --corpus NAME:jsonl:PATH (even a source named like a format) keep PhysioNet's
    licence: the folder records it, and push-dataset refuses a public push whatever the reader was."""
    notes = cvb.write_mimic_iv_jsonl(tmp_path / "converted")
    base = ["build", "context-variance", "--medlama", str(cv_root / "medlama"), "--config", "full", "--index-dir",
            str(cv_root / "indexes"), "--corpus", f"mimic:jsonl:{notes}"]
    assert main([*base, "--corpus-licence", "mimic=CC-BY-4.0", "--out", str(tmp_path / "declared")]) == 2
    assert ("source 'mimic' holds MIMIC notes (records with HADM_ID, NOTE_ID, NOTE_SEQ, NOTE_TYPE, SUBJECT_ID in "
            "notes.jsonl), whose licence is PhysioNet-Credentialed-Health-Data-1.5.0") in capsys.readouterr().err
    assert not (tmp_path / "declared").exists()
    folder = tmp_path / "sets"
    assert main([*base, "--out", str(folder)]) == 0
    (source,) = json.loads((folder / "build_info.json").read_text())["sources"]
    assert (source["format"], source["licence"], source["licence_basis"]) == (
        "jsonl", "PhysioNet-Credentialed-Health-Data-1.5.0", "columns")
    card = (folder / "README.md").read_text()
    assert "mimic" in front_matter(card)["tags"] and "The rows of `mimic` quote MIMIC clinical notes" in card
    for gated in (None, "none"):
        with pytest.raises(MedlamaInputError, match=r"quotes MIMIC clinical notes \(source mimic\).* can only be "
                                                    r"pushed --private"):
            push_dataset(folder, "someone/cv", gated=gated, dry_run=tmp_path / "public")
    assert not (tmp_path / "public").exists()
    manifest = push_dataset(folder, "someone/cv", private=True, dry_run=tmp_path / "private")
    assert manifest["licences"] == {"mimic": "PhysioNet-Credentialed-Health-Data-1.5.0"} and manifest["mimic_derived"]


def test_a_source_of_undeclared_licence_is_pushed_private_only(cv_root, tmp_path):
    folder = tmp_path / "undeclared"
    base = ["build", "context-variance", "--medlama", str(cv_root / "medlama"), "--config", "full", "--index-dir",
            str(cv_root / "indexes"), "--pmc", str(cv_root / "corpora" / "pmc"), "--out", str(folder)]
    assert main(base) == 0
    (source,) = json.loads((folder / "build_info.json").read_text())["sources"]
    assert (source["licence"], source["licence_basis"]) == ("unknown", "undeclared")
    assert "- `pmc`: unknown (not declared); `medlama push-dataset` pushes it only `--private`" in (
        folder / "README.md").read_text()
    with pytest.raises(MedlamaInputError, match=r"the licence of source pmc \(unknown \(not declared\)\) does not "
                                                r"allow redistribution.*--corpus-licence pmc=LICENCE"):
        push_dataset(folder, "someone/cv", dry_run=tmp_path / "public")
    assert push_dataset(folder, "someone/cv", private=True, dry_run=tmp_path / "private")["licences"] == {
        "pmc": "unknown"}
    declared = cv_root / "pmc-only"  # the same corpus, declared CC-BY-4.0 when built: recorded, pushed public
    assert "- `pmc`: CC-BY-4.0 (declared by the builder)" in (declared / "README.md").read_text()
    assert push_dataset(declared, "someone/cv", dry_run=tmp_path / "open")["licences"] == {"pmc": "CC-BY-4.0"}


def test_corpus_licence_flag_is_checked_before_any_work(cv_root, tmp_path, capsys):
    base = ["build", "context-variance", "--medlama", str(tmp_path / "no-such-folder"), "--out", str(tmp_path / "o"),
            "--pmc", str(cv_root / "corpora" / "pmc")]
    for flag, message in (("pubmed=CC0-1.0", "--corpus-licence names no source 'pubmed'; the sources are ['pmc']"),
                          ("pmc", "bad --corpus-licence 'pmc': write NAME=LICENCE"),
                          ("ehr=CC0-1.0", "source 'ehr' is read as MIMIC notes, whose licence is PhysioNet")):
        extra = ["--mimic", str(cv_root / "corpora" / "NOTEEVENTS.csv")] if flag.startswith("ehr") else []
        assert main([*base, *extra, "--corpus-licence", flag]) == 2
        assert message in capsys.readouterr().err


# --------------------------------------------------------------------------- the last check: no local path


def home_folder() -> str:
    home = str(Path.home())
    if home in ("/", "/tmp", "/home", "/usr", "/var", "/opt") or not Path(home).is_absolute():
        pytest.skip(f"the home folder {home!r} is a system folder here, which the check leaves alone")
    return home


def test_a_dataset_card_naming_the_home_folder_is_refused(biolama_public_dir, tmp_path):
    home = home_folder()
    folder = tmp_path / "biolama"
    shutil.copytree(biolama_public_dir, folder)
    with (folder / "README.md").open("a", encoding="utf-8") as card:
        card.write(f"\nBuilt from the release in `{home}/medlama-private/biolama`.\n")
    write_owner(folder, "build biolama", files=True)  # as if the build itself had written it
    with pytest.raises(MedlamaInputError) as error:
        push_dataset(folder, "someone/biolama", dry_run=tmp_path / "dry")
    message = str(error.value)
    assert f"the upload tree's file 'README.md' names the local path {home!r} (the home folder)" in message
    assert "nothing was uploaded" in message and message.startswith(f"{folder}: ")
    assert not (tmp_path / "dry").exists()
    api = FakeApi()  # a real upload is refused before any call
    with pytest.raises(MedlamaInputError, match="names the local path"):
        push_dataset(folder, "someone/biolama", api=api)
    assert api.calls == [] and api.uploaded == {}


def test_a_metric_card_naming_the_python_environment_is_refused(tmp_path):
    import sys

    folder = tmp_path / "ucm"
    shutil.copytree(metric_path("ucm"), folder)
    with (folder / "README.md").open("a", encoding="utf-8") as card:
        card.write(f"\nTested with {sys.prefix}/bin/python.\n")
    if sys.prefix in ("/usr", "/usr/local", "/opt"):
        pytest.skip(f"Python is installed system-wide here ({sys.prefix}), a folder the check leaves alone")
    with pytest.raises(MedlamaInputError, match=r"file 'README.md' names the local path .* \(the Python environment "
                                                r"\(sys.prefix\)\)"):
        push_metric(folder, "someone/ucm", dry_run=tmp_path / "dry")
    assert not (tmp_path / "dry").exists()


def test_the_check_matches_whole_paths_in_text_files_only(tmp_path):
    from medlama.publishing.hub import check_tree_names_no_local_path

    home = home_folder()
    source = tmp_path / "pushed" / "data"
    tree = tmp_path / "tree"
    tree.mkdir()
    # not the home folder: a longer name, a URL's path, a relative path, a name ending like it
    (tree / "notes.md").write_text(f"{home}fs and https://example.org{home}/x and .{home}/y and pytest-of{home}z\n")
    (tree / "weights.bin").write_bytes(f"{home}/secret".encode())  # binary by name
    (tree / "blob").write_bytes(b"\0\1" + f'"{home}/secret"'.encode())  # binary: holds a null byte
    check_tree_names_no_local_path(tree, source)
    for text in (f'{{"path": "{home}"}}', f"see {home}.", f"({home}/a)", home, f"x {source}\n",
                 f"in {source.parent}/other"):
        (tree / "notes.md").write_text(text)
        with pytest.raises(MedlamaInputError, match="file 'notes.md' names the local path"):
            check_tree_names_no_local_path(tree, source)


# --------------------------------------------------------------------------- metrics

SAMPLES = {
    "acc_at_k": ({"predictions": [["Fever", "cough"], ["the rash", "x"]], "references": [["fever"], ["rash"]],
                  "groups": ["a", "b"]}, {"k": [1, 2], "match": "normalized"}),
    "ucm": ({"target_rank_before": [2, 5, 3], "target_rank_after": [1, 5, 4],
             "added_is_correct": [True, True, False]}, {}),
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_metric_dry_run_loads_back_and_equals_the_source(name, tmp_path):
    target = tmp_path / "dry"
    assert main(["push-metric", name, f"someone/{name}", "--dry-run", str(target)]) == 0
    tree, source = target / name, metric_path(name)
    assert sorted(tree_files(tree)) == sorted(["README.md", "app.py", f"{name}.py", "requirements.txt"])
    assert (tree / f"{name}.py").read_bytes() == (source / f"{name}.py").read_bytes()
    assert (tree / "requirements.txt").read_bytes() == (source / "requirements.txt").read_bytes()
    card, original = (tree / "README.md").read_text(), (source / "README.md").read_text()
    assert front_matter(card) == front_matter(original) and front_matter(card)["app_file"] == "app.py"
    assert f'evaluate.load("someone/{name}")' in card and f'evaluate.load("metrics/{name}")' not in card
    app = (tree / "app.py").read_text()
    assert f'REPO_ID = "someone/{name}"' in app and "evaluate.load(repo_id)" in app and "def parse_inputs(" in app
    inputs, options = SAMPLES[name]
    cache = str(tmp_path / "cache")
    published = evaluate.load(str(tree), keep_in_memory=True, cache_dir=cache)
    bundled = evaluate.load(str(source), keep_in_memory=True, cache_dir=cache)
    assert published.compute(**inputs, **options) == bundled.compute(**inputs, **options)
    manifest = json.loads((target / "manifest.json").read_text())
    assert (manifest["repo_type"], manifest["space_sdk"], manifest["script"]) == ("space", "gradio", f"{name}.py")


def test_metric_under_another_repository_name(tmp_path):
    manifest = push_metric("acc_at_k", "someone/biomed-acc", dry_run=tmp_path / "dry")
    tree = tmp_path / "dry" / "biomed-acc"
    assert manifest["script"] == "biomed-acc.py"  # evaluate.load("someone/biomed-acc") fetches biomed-acc.py
    assert (tree / "biomed-acc.py").read_bytes() == (metric_path("acc_at_k") / "acc_at_k.py").read_bytes()
    module = evaluate.load(str(tree), keep_in_memory=True, cache_dir=str(tmp_path / "cache"))
    assert module.compute(predictions=[["a"]], references=[["a"]], k=1)["acc@1"] == 1.0
    with pytest.raises(MedlamaInputError, match="cannot contain '.'"):
        push_metric("acc_at_k", "someone/acc.v2", dry_run=tmp_path / "other")
    with pytest.raises(MedlamaInputError, match="unknown metric 'bleu'"):
        push_metric("bleu", "someone/bleu", dry_run=tmp_path / "other")


# --------------------------------------------------------------------------- the upload path, without a network


class FakeApi:
    """Stands in for ``huggingface_hub.HfApi``: records calls, keeps a copy of each uploaded folder."""

    instances: list["FakeApi"] = []

    def __init__(self, token=None, **_):
        self.token = token
        self.calls: list[tuple] = []
        self.uploaded: dict[str, bytes] = {}
        FakeApi.instances.append(self)

    def create_repo(self, repo_id, **kwargs):
        self.calls.append(("create_repo", repo_id, kwargs))

    def update_repo_settings(self, repo_id, **kwargs):
        self.calls.append(("update_repo_settings", repo_id, kwargs))

    def create_branch(self, repo_id, **kwargs):
        self.calls.append(("create_branch", repo_id, kwargs))

    def upload_folder(self, **kwargs):
        self.calls.append(("upload_folder", kwargs["repo_id"], {k: v for k, v in kwargs.items() if k != "folder_path"}))
        self.uploaded = tree_files(Path(kwargs["folder_path"]))

        class Info:
            commit_url = f"https://huggingface.co/{kwargs['repo_id']}/commit/0"

        return Info()


def test_upload_gates_before_uploading_the_dry_run_tree(biolama_dir, tmp_path):
    api = FakeApi()
    manifest = push_dataset(biolama_dir, "someone/biolama", private=True, revision="v1", api=api)
    assert [call[0] for call in api.calls] == ["create_repo", "update_repo_settings", "create_branch", "upload_folder"]
    assert api.calls[0][2] == {"repo_type": "dataset", "private": True, "exist_ok": True}
    assert api.calls[1][2] == {"gated": "manual", "repo_type": "dataset"}
    assert api.calls[3][2]["revision"] == "v1" and api.calls[3][2]["repo_type"] == "dataset"
    push_dataset(biolama_dir, "someone/biolama", private=True, revision="v1", dry_run=tmp_path / "dry")
    assert api.uploaded == tree_files(tmp_path / "dry" / "biolama")
    assert manifest["commit_url"].startswith("https://huggingface.co/someone/biolama")
    metric_api = FakeApi()
    push_metric("ucm", "someone/ucm", api=metric_api)
    assert metric_api.calls[0] == ("create_repo", "someone/ucm", {"repo_type": "space", "private": False,
                                                                  "exist_ok": True, "space_sdk": "gradio"})
    assert [call[0] for call in metric_api.calls] == ["create_repo", "upload_folder"]
    assert sorted(metric_api.uploaded) == ["README.md", "app.py", "requirements.txt", "ucm.py"]


def test_cli_token_from_environment_never_shown(biolama_public_dir, tmp_path, monkeypatch, capsys):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    FakeApi.instances.clear()
    assert main(["push-dataset", str(biolama_public_dir), "someone/biolama"]) == 0
    assert main(["push-metric", "acc_at_k", "someone/acc_at_k", "--private"]) == 0
    captured = capsys.readouterr()
    assert "uploaded 26 files" in captured.out and "uploaded 4 files" in captured.out  # 12 ranking and 12 _mc files
    assert [api.token for api in FakeApi.instances] == [SECRET, SECRET]
    assert SECRET not in captured.out + captured.err
    for api in FakeApi.instances:
        assert all(SECRET.encode() not in content for content in api.uploaded.values())


def test_cli_refuses_offline_or_without_token(biolama_public_dir, monkeypatch, capsys):
    import huggingface_hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["push-dataset", str(biolama_public_dir), "someone/biolama"]) == 2
    assert "HF_HUB_OFFLINE is set" in capsys.readouterr().err
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    assert main(["push-metric", "ucm", "someone/ucm"]) == 2
    assert "no Hugging Face token: set HF_TOKEN or log in with `hf auth login`" in capsys.readouterr().err


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("command", ["push-metric", "push-dataset"])
def test_real_push_without_network_is_a_clear_error(command, biolama_public_dir, tmp_path):
    """A real upload whose Hub cannot be reached (HF_ENDPOINT on a closed local port): exit status 2, a message
    naming the repository and the cause, no traceback, no token."""
    import os
    import subprocess
    import sys

    endpoint = f"http://127.0.0.1:{closed_port()}"
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("HF_") and key != "TRANSFORMERS_OFFLINE"}  # the test suite's offline switches
    env.update(HF_ENDPOINT=endpoint, HF_TOKEN=SECRET, HF_HOME=str(tmp_path / "hf-home"))
    what = "ucm" if command == "push-metric" else str(biolama_public_dir)
    kind = "space" if command == "push-metric" else "dataset"
    done = subprocess.run([sys.executable, "-m", "medlama", command, what, "someone/offline-test"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"medlama: error: could not create the {kind} repository someone/offline-test on "
                                  f"the Hugging Face Hub ({endpoint}): ")
    assert "ConnectError" in done.stderr and "nothing was created or uploaded" in done.stderr
    assert "Traceback" not in done.stderr and SECRET not in done.stdout + done.stderr and done.stdout == ""


def test_a_push_names_its_branch_with_branch(tmp_path, capsys):
    """Pushes commit to ``--branch``; ``--revision`` is ``probe``'s (a model revision to load), never a push's."""
    assert main(["push-metric", "acc_at_k", "someone/acc_at_k", "--branch", "v1", "--dry-run",
                 str(tmp_path / "dry")]) == 0
    assert json.loads((tmp_path / "dry" / "manifest.json").read_text())["revision"] == "v1"
    with pytest.raises(SystemExit):
        main(["push-metric", "acc_at_k", "someone/acc_at_k", "--revision", "v1", "--dry-run", str(tmp_path / "x")])
    assert "unrecognized arguments: --revision" in capsys.readouterr().err
