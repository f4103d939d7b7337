"""``medlama push-model``: the dry run writes exactly the files that would be uploaded, and no uploaded file
names a local path (no network here)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from huggingface_hub import ModelCard

from medlama.core.atomic import OWNER_NAME, write_owner
from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.publishing.hub import plan_model, push_model
from dry_runs import assert_busy_dry_run_refused  # tests/helpers (pytest pythonpath)

MODEL_FILES = ["1_Pooling/config.json", "README.md", "config.json", "config_sentence_transformers.json",
               "model.safetensors", "modules.json", "rewire_config.json", "sentence_bert_config.json",
               "tokenizer.json", "tokenizer_config.json"]


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory) -> Path:
    """A rewired-model-shaped folder: a tiny CLS-pooled model, a run record, checkpoints with trainer state."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from medlama.trainers.model import build_rewire_model

    root = tmp_path_factory.mktemp("hub")
    bert = root / "bert"
    bert.mkdir()
    (bert / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "gene", "cell"]) + "\n")
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=7, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=16, max_position_embeddings=32)).save_pretrained(bert)
    BertTokenizerFast(vocab_file=str(bert / "vocab.txt")).save_pretrained(bert)
    model, _ = build_rewire_model(bert)
    folder = root / "rewired"
    model.save(str(folder))
    (folder / "rewire_config.json").write_text(json.dumps(
        {"base_model": {"name": "tiny"}, "training": {"global_step": 4}}))
    for step in (2, 4):
        checkpoint = folder / "checkpoints" / f"checkpoint-{step}"
        model.save(str(checkpoint))
        for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth", "training_args.bin", "trainer_state.json"):
            (checkpoint / name).write_bytes(b"state")
    (folder / "checkpoints" / "rewire_config.json").write_text("{}")
    (folder / ".hidden").write_text("not for upload")
    write_owner(folder, "rewire", files=True)  # as `medlama rewire` records what it wrote
    return folder


def test_plan_leaves_out_checkpoints_and_hidden_files(model_folder):
    assert plan_model(model_folder) == MODEL_FILES
    with_checkpoints = plan_model(model_folder, include_checkpoints=True)
    for step in (2, 4):
        assert f"checkpoints/checkpoint-{step}/model.safetensors" in with_checkpoints
        assert f"checkpoints/checkpoint-{step}/trainer_state.json" in with_checkpoints
        assert f"checkpoints/checkpoint-{step}/optimizer.pt" not in with_checkpoints
        assert f"checkpoints/checkpoint-{step}/rng_state.pth" not in with_checkpoints
    assert "checkpoints/rewire_config.json" not in with_checkpoints and ".hidden" not in with_checkpoints


def test_dry_run_writes_exactly_what_would_be_uploaded(model_folder, tmp_path):
    target = tmp_path / "dry"
    manifest = push_model(model_folder, "someone/minilm-rewired", private=True, revision="v1", dry_run=target)
    written = sorted(p.relative_to(target / "files").as_posix() for p in (target / "files").rglob("*") if p.is_file())
    assert written == MODEL_FILES
    for name in MODEL_FILES:
        if name != "README.md":
            assert (target / "files" / name).read_bytes() == (model_folder / name).read_bytes()
    # the card is the folder's, with sentence-transformers' placeholder id replaced by the repository (branch)
    local_card = (model_folder / "README.md").read_text()
    assert 'model = SentenceTransformer("sentence_transformers_model_id")\n' in local_card
    assert (target / "files" / "README.md").read_text() == local_card.replace(
        'SentenceTransformer("sentence_transformers_model_id")',
        "SentenceTransformer(\"someone/minilm-rewired\", revision='v1')")
    on_disk = json.loads((target / "manifest.json").read_text())
    assert on_disk == manifest
    assert (on_disk["repo_id"], on_disk["repo_type"], on_disk["private"], on_disk["revision"]) == (
        "someone/minilm-rewired", "model", True, "v1")
    assert on_disk["commit_message"] == "Upload tiny rewired with Contrastive-Probe (4 steps)"
    assert [f["path"] for f in on_disk["files"]] == MODEL_FILES
    weights = next(f for f in on_disk["files"] if f["path"] == "model.safetensors")
    assert weights["sha256"] == hashlib.sha256((model_folder / "model.safetensors").read_bytes()).hexdigest()
    assert weights["size"] == (model_folder / "model.safetensors").stat().st_size
    # a second dry run into the same folder replaces the first
    push_model(model_folder, "someone/other", dry_run=target, include_checkpoints=True)
    assert json.loads((target / "manifest.json").read_text())["repo_id"] == "someone/other"
    assert (target / "files" / "checkpoints" / "checkpoint-2" / "model.safetensors").is_file()
    for step in (2, 4):  # a checkpoint's card says where it sits in the repository
        card = (target / "files" / "checkpoints" / f"checkpoint-{step}" / "README.md").read_text()
        assert f"# Step {step} of [someone/other](https://huggingface.co/someone/other)" in card
        assert "sentence_transformers_model_id" not in card


def test_cli_dry_run(model_folder, tmp_path, capsys):
    target = tmp_path / "dry"
    assert main(["push-model", str(model_folder), "me/model", "--dry-run", str(target), "--message", "hello"]) == 0
    assert f"dry run: {len(MODEL_FILES)} files" in capsys.readouterr().out
    assert json.loads((target / "manifest.json").read_text())["commit_message"] == "hello"


def test_push_errors(model_folder, tmp_path, monkeypatch, capsys):
    with pytest.raises(MedlamaInputError, match="not a sentence-transformers model folder"):
        push_model(tmp_path, "me/model", dry_run=tmp_path / "dry")
    with pytest.raises(MedlamaInputError, match="nope: model folder not found"):
        push_model(tmp_path / "nope", "me/model", dry_run=tmp_path / "dry")
    with pytest.raises(MedlamaInputError, match="invalid repository id 'not a/valid id'"):
        push_model(model_folder, "not a/valid id", dry_run=tmp_path / "dry")
    assert_busy_dry_run_refused(lambda **dry: push_model(model_folder, "me/model", **dry), tmp_path)
    with pytest.raises(MedlamaInputError, match="the dry-run folder must be outside the model folder"):
        push_model(model_folder, "me/model", dry_run=model_folder / "dry")
    # offline (as in these tests), a real upload stops before any network call and says why
    assert main(["push-model", str(model_folder), "me/model"]) == 2
    assert "the Hugging Face Hub is switched off here (HF_HUB_OFFLINE is set)" in capsys.readouterr().err
    # online, a real upload needs a token; without one it stops before any network call
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setattr("huggingface_hub.get_token", lambda: None)
    assert main(["push-model", str(model_folder), "me/model"]) == 2
    assert "no Hugging Face token: set HF_TOKEN or log in with `hf auth login`" in capsys.readouterr().err


# ------------------------------------------------------------------- no local path in the pushed tree (defect 3)

WORDS = "the a of and in to with for by on patients cells gene protein expression tumour mice blood".split()
#: An absolute path in text: ``/x/y`` not inside a URL or a relative path (not after ``:``, ``/`` or a word).
ABSOLUTE = re.compile(r"(?<![\w:/.~-])(?:~|[A-Za-z]:)?[\\/][\w.@+-]+[\\/][\w.@+-]+")


def local_names_in(tree: Path, forbidden: list[str]) -> list[str]:
    """``file: what`` for every forbidden string (any file) or absolute path (text files) found under ``tree``."""
    found = []
    for file in sorted(p for p in tree.rglob("*") if p.is_file()):
        data = file.read_bytes()
        found += [f"{file.name}: {word}" for word in forbidden if word.encode() in data]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        found += [f"{file.name}: {match}" for match in ABSOLUTE.findall(text)]
    return found


def tiny_bert(folder: Path, *, layers: int) -> Path:
    """A tiny random BERT of the test words saved in ``folder``, as a user's checkpoint would be."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=layers, num_attention_heads=2,
                         intermediate_size=16, max_position_embeddings=32)).save_pretrained(folder)
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(folder)
    return folder


def write_sentences(path: Path) -> Path:
    """40 lines of six test words each: a corpus to rewire on."""
    path.write_text("".join(" ".join(WORDS[(i + k) % len(WORDS)] for k in range(6)) + "\n" for i in range(40)))
    return path


@pytest.fixture(scope="module")
def rewired_from_tmp(tmp_path_factory) -> tuple[Path, Path]:
    """A real (tiny) rewiring of a model in a temporary folder, on a corpus in that folder: (root, output)."""
    from medlama.trainers.config import RewireConfig
    from medlama.trainers.trainer import rewire

    root = tmp_path_factory.mktemp("leaky-home")
    bert = tiny_bert(root / "my-bert", layers=2)
    corpus = write_sentences(root / "sentences.txt")
    config = RewireConfig.preset("paper", model=str(bert), steps=2, save_steps=2, batch_size=8, max_length=16,
                                 layer=1)
    rewire(corpus, root / "rewired", config, disable_tqdm=True)
    return root, root / "rewired"


def test_pushed_tree_names_no_local_path(rewired_from_tmp, tmp_path):
    root, model = rewired_from_tmp
    forbidden = [str(root), root.name, str(root.resolve()), "site-packages", str(Path.home())]
    assert local_names_in(model, forbidden), "the local copy keeps its paths (else this test checks nothing)"
    before = {p: p.read_bytes() for p in model.rglob("*") if p.is_file()}
    manifest = push_model(model, "someone/my-bert-rewired", dry_run=tmp_path / "dry", include_checkpoints=True)
    tree = tmp_path / "dry" / "files"
    assert local_names_in(tree, forbidden) == []
    assert root.name not in manifest["commit_message"]
    record = json.loads((tree / "rewire_config.json").read_text())
    assert record["base_model"]["name"] == record["base_model"]["path"] == record["config"]["model"] == "my-bert"
    assert record["corpus"][0]["path"] == "sentences.txt"
    assert record["corpus"][0]["sha256"] == hashlib.sha256((root / "sentences.txt").read_bytes()).hexdigest()
    assert record["command"].startswith("medlama rewire --corpus sentences.txt --out rewired --model my-bert --steps 2")
    card = (tree / "README.md").read_text()
    assert "# Contrastive-Probe rewiring of `my-bert`" in card and record["command"] in card
    # the card names the repository it is pushed to; no placeholder id, no training-pair widget anywhere
    assert 'model = SentenceTransformer("someone/my-bert-rewired")\n' in card
    for file in tree.rglob("README.md"):
        text = file.read_text()
        assert "sentence_transformers_model_id" not in text, file
        widgets = ModelCard(text).data.get("widget") or []
        assert all(w["source_sentence"] == "metformin might treat [MASK] ." for w in widgets), file
    assert ModelCard(card).data.base_model is None  # a local folder: no Hub id to name
    # the local copy is unchanged, and the pushed model loads
    assert {p: p.read_bytes() for p in model.rglob("*") if p.is_file()} == before
    from sentence_transformers import SentenceTransformer

    assert SentenceTransformer(str(tree)).encode(["the [MASK] gene"]).shape == (1, 16)


def test_pushed_card_with_scores_names_no_local_path(rewired_from_tmp, tmp_path):
    """The card after probing (its model-index) goes up path-free, parsed by huggingface_hub's card classes."""
    from medlama.trainers.model_card import update_model_card_scores

    root, model = rewired_from_tmp
    copy = tmp_path / "copy"
    shutil.copytree(model, copy)
    update_model_card_scores(copy, {"MedLAMA hard": {"acc@1": 4.49, "acc@10": 21.74}}, source="the recipe")
    assert str(root) in (copy / "README.md").read_text(), "the local card keeps its paths (else nothing is checked)"
    push_model(copy, "someone/my-bert-rewired", dry_run=tmp_path / "dry")
    tree = tmp_path / "dry" / "files"
    assert local_names_in(tree, [str(root), root.name, str(tmp_path), "site-packages", str(Path.home())]) == []
    card = ModelCard.load(tree / "README.md")
    assert [(r.metric_type, r.metric_value, r.dataset_config) for r in card.data.eval_results] == [
        ("acc@1", 4.49, "hard"), ("acc@10", 21.74, "hard")]
    index = card.data.to_dict()["model-index"]
    assert index[0]["name"] == "someone/my-bert-rewired" and index[0]["results"][0]["task"]["type"] == "fill-mask"
    # the corpus is a local file, no Hub dataset: it is named in the card's body, never under `datasets`
    assert card.data.language == "en" and card.data.datasets is None and "`sentences.txt` (40 lines" in card.text


def test_push_model_puts_the_probe_scores_of_that_folder_into_the_card(rewired_from_tmp, medlama_dir, tmp_path,
                                                                        capsys):
    """``--results PROBE_OUT``: the probe's acc@k of this very folder go into the pushed card's model-index and
    probing_scores.json; the folder itself is unchanged; a folder changed since the probe is refused."""
    _root, model = rewired_from_tmp
    probed = tmp_path / "probe"
    assert main(["probe", "--model", str(model), "--data", str(medlama_dir), "--relations", "may_treat", "--limit",
                 "8", "--out", str(probed)]) == 0
    run = json.loads((probed / "results.json").read_text())[0]
    before = {p: p.read_bytes() for p in model.rglob("*") if p.is_file()}
    capsys.readouterr()
    # a run of part of the set (--limit, one relation) is not the model's score on it: refused unless asked
    assert main(["push-model", str(model), "someone/my-bert-rewired", "--results", str(probed), "--dry-run",
                 str(tmp_path / "refused")]) == 2
    assert ("probed part of its query set (first 8 queries per relation, 1 relation)" in capsys.readouterr().err
            and not (tmp_path / "refused").exists())
    assert main(["push-model", str(model), "someone/my-bert-rewired", "--results", str(probed), "--partial-results",
                 "--dry-run", str(tmp_path / "dry")]) == 0
    assert ("card scores from MedLAMA hard[may_treat][first 8 per relation], 8 queries (partial)"
            in capsys.readouterr().out)
    tree = tmp_path / "dry" / "files"
    card = ModelCard.load(tree / "README.md")
    expected = {key: round(100 * value, 2) for key, value in run["metrics"].items() if key.startswith("acc@")}
    assert {r.metric_name: r.metric_value for r in card.data.eval_results} == {
        f"{key} (partial)": value for key, value in expected.items()}
    assert {r.dataset_config for r in card.data.eval_results} == {"hard"}
    assert card.data.to_dict()["model-index"][0]["name"] == "someone/my-bert-rewired"
    partial = "MedLAMA hard (partial: first 8 queries per relation, 1 relation)"
    assert "Not measured yet" not in card.text and f"| {partial} acc@1 |" in card.text
    pushed = json.loads((tree / "probing_scores.json").read_text())
    assert pushed["scores"] == {f"{partial} {key}": value for key, value in expected.items()}
    assert {p: p.read_bytes() for p in model.rglob("*") if p.is_file()} == before  # the folder is not changed

    changed = tmp_path / "changed" / model.name  # same name, trained on (one file differs): not what was probed
    shutil.copytree(model, changed)
    (changed / "rewire_config.json").write_text((changed / "rewire_config.json").read_text() + " ")
    from medlama.core.integrity import record_again

    record_again(changed, ["rewire_config.json"])  # as medlama's own later write would: vouched, yet not probed
    assert main(["push-model", str(changed), "someone/x", "--results", str(probed), "--partial-results", "--dry-run",
                 str(tmp_path / "dry2")]) == 2
    assert f"no run in it probed {model.name} as it is now" in capsys.readouterr().err
    assert not (tmp_path / "dry2").exists()


def test_bundled_model_is_named_by_its_hub_id(model_folder, tmp_path):
    from medlama.core.defaults import default_model_path

    bundled = str(default_model_path())
    assert "site-packages" in bundled
    folder = tmp_path / "minilm"
    shutil.copytree(model_folder, folder)
    corpus = tmp_path / "corpora" / "pubmed_0"
    record = {"config": {"model": None}, "corpus": [{"path": str(corpus), "name": "pubmed_0", "sha256": "ab" * 32}],
              "base_model": {"name": "sentence-transformers/all-MiniLM-L6-v2", "path": bundled},
              "command": f"medlama rewire --corpus {corpus} --out {folder} --steps 2",
              "training": {"global_step": 2}}
    (folder / "rewire_config.json").write_text(json.dumps(record, indent=2))
    card = (folder / "README.md").read_text() + f"\nBase model loaded from {bundled}.\n```bash\n{record['command']}\n```\n"
    (folder / "README.md").write_text(card)
    write_owner(folder, "rewire", files=True)
    push_model(folder, "someone/minilm", dry_run=tmp_path / "dry")
    tree = tmp_path / "dry" / "files"
    assert local_names_in(tree, [str(tmp_path), tmp_path.name, "site-packages"]) == []
    public = json.loads((tree / "rewire_config.json").read_text())
    assert public["base_model"] == {"name": "sentence-transformers/all-MiniLM-L6-v2",
                                    "path": "sentence-transformers/all-MiniLM-L6-v2"}
    assert public["command"] == "medlama rewire --corpus pubmed_0 --out minilm --steps 2"
    assert "Base model loaded from sentence-transformers/all-MiniLM-L6-v2." in (tree / "README.md").read_text()


def test_a_file_that_would_leak_a_path_stops_the_push(model_folder, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(model_folder, folder)
    (folder / "rewire_config.json").write_text(json.dumps({"base_model": {"name": str(tmp_path / "bert"),
                                                                          "path": str(tmp_path / "bert")}}))
    (folder / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes() + str(tmp_path / "bert").encode())
    (folder / "model.safetensors").rename(folder / "model.safetensors.bak")
    (folder / "pytorch_model.bin").write_bytes((folder / "model.safetensors.bak").read_bytes())
    (folder / "model.safetensors.bak").unlink()
    write_owner(folder, "rewire", files=True)
    with pytest.raises(MedlamaInputError, match="pytorch_model.bin: this file names the local path"):
        push_model(folder, "someone/model", dry_run=tmp_path / "dry")
    assert not (tmp_path / "dry").exists()


def test_an_extra_file_naming_site_packages_stops_the_push(model_folder, tmp_path):
    import site

    folder = tmp_path / "model"
    shutil.copytree(model_folder, folder)
    packages = site.getsitepackages()[0]
    (folder / "notes.txt").write_text(f"trained with the packages in {packages}/torch\n")
    with pytest.raises(MedlamaInputError, match="'notes.txt' was not written by `medlama rewire`"):
        push_model(folder, "someone/model", dry_run=tmp_path / "dry")
    write_owner(folder, "rewire", files=True)  # as if rewire had written it: the local-path check stops it
    with pytest.raises(MedlamaInputError) as error:
        push_model(folder, "someone/model", dry_run=tmp_path / "dry")
    assert f"the upload tree's file 'notes.txt' names the local path {packages!r}" in str(error.value)
    assert "site-packages folder" in str(error.value) or "Python" in str(error.value)
    assert not (tmp_path / "dry").exists()
    (folder / "notes.txt").write_text("trained with the packages in site-packages (no path)\n")
    write_owner(folder, "rewire", files=True)
    assert "notes.txt" in [f["path"] for f in push_model(folder, "someone/model", dry_run=tmp_path / "dry")["files"]]


def test_upload_sends_the_dry_run_tree(rewired_from_tmp, tmp_path):
    """The real upload (a stand-in ``HfApi``) sends exactly the dry run's files, path-free, as one commit."""
    _root, model = rewired_from_tmp

    class Api:
        def __init__(self):
            self.calls = []

        def create_repo(self, repo_id, **options):
            self.calls.append(("create_repo", repo_id, options))

        def create_branch(self, repo_id, **options):
            self.calls.append(("create_branch", repo_id, options))

        def upload_folder(self, *, repo_id, folder_path, **options):
            self.calls.append(("upload_folder", repo_id, options))
            shutil.copytree(folder_path, tmp_path / "sent")
            return type("Info", (), {"commit_url": f"https://huggingface.co/{repo_id}/commit/1"})()

    api = Api()
    manifest = push_model(model, "someone/my-bert", revision="v1", api=api)
    assert [call[0] for call in api.calls] == ["create_repo", "create_branch", "upload_folder"]
    assert manifest["commit_url"] == "https://huggingface.co/someone/my-bert/commit/1"
    dry = push_model(model, "someone/my-bert", revision="v1", dry_run=tmp_path / "dry")
    sent = {p.relative_to(tmp_path / "sent").as_posix(): p.read_bytes() for p in (tmp_path / "sent").rglob("*")
            if p.is_file()}
    assert sent == {p.relative_to(tmp_path / "dry" / "files").as_posix(): p.read_bytes()
                    for p in (tmp_path / "dry" / "files").rglob("*") if p.is_file()}
    assert manifest["files"] == dry["files"] and all(model.joinpath(name).is_file() for name in sent)


def test_skipped_short_lines_are_named_by_the_corpus_file_name(tmp_path):
    # --skip-short-lines records "<corpus path>, line N": pushed, only the file name (found by the fault suite).
    from medlama.publishing.public_names import public_rewire_record

    corpus = str(tmp_path / "sentences.txt")
    record = {"corpus": [{"name": "sentences.txt", "path": corpus}],
              "cloze": {"skipped_examples": [f"{corpus}, line 26", f"{corpus}, line 65"]}}
    public, replacements = public_rewire_record(record)
    assert public["cloze"]["skipped_examples"] == ["sentences.txt, line 26", "sentences.txt, line 65"]
    assert replacements[corpus] == "sentences.txt" and str(tmp_path) not in json.dumps(public)


def test_a_folder_medlama_did_not_write_or_cut_weights_are_refused(model_folder, tmp_path):
    """push-model uploads what `medlama rewire` wrote: not a copy of the bundled model, not weights cut in half."""
    from medlama.core.defaults import default_model_path

    bundled = tmp_path / "bundled"
    shutil.copytree(default_model_path(), bundled)
    assert plan_model(bundled)  # a loadable sentence-transformers folder ...
    with pytest.raises(MedlamaInputError, match=r"bundled: `medlama push-model` uploads only a folder written by "
                                                r"`medlama rewire`, and this one has no ownership record"):
        push_model(bundled, "someone/minilm", dry_run=tmp_path / "dry")  # ... that no rewire wrote
    cut = tmp_path / "cut"
    shutil.copytree(model_folder, cut)
    weights = (cut / "model.safetensors").read_bytes()
    (cut / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    with pytest.raises(MedlamaInputError, match=r"cut: 'model.safetensors': its tensors need [\d,]+ bytes but the "
                                                r"file has [\d,]+: the file is truncated"):
        push_model(cut, "someone/model", dry_run=tmp_path / "dry")
    (cut / "model.safetensors").write_bytes(weights)  # whole again, but the card replaced by hand
    (cut / "README.md").write_text("# my own card\n")
    with pytest.raises(MedlamaInputError, match="'README.md' has changed since `medlama rewire` wrote it"):
        push_model(cut, "someone/model", dry_run=tmp_path / "dry")
    assert not (tmp_path / "dry").exists()
    (cut / OWNER_NAME).unlink()
    with pytest.raises(MedlamaInputError, match="has no ownership record"):
        push_model(cut, "someone/model", dry_run=tmp_path / "dry")


def test_a_model_with_nan_weights_is_never_pushed(rewired_from_tmp, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    _root, model = rewired_from_tmp
    broken = tmp_path / "broken"
    shutil.copytree(model, broken)
    weights = load_file(broken / "model.safetensors")
    name = sorted(weights)[0]
    weights[name] = torch.full_like(weights[name], float("nan"))
    save_file(weights, broken / "model.safetensors", metadata={"format": "pt"})
    assert main(["push-model", str(broken), "someone/broken", "--dry-run", str(tmp_path / "dry")]) == 2
    assert f"1 weight tensor(s) hold NaN or infinity (first: {name})" in capsys.readouterr().err
    assert not (tmp_path / "dry").exists()


def test_a_model_rewired_from_relative_paths_goes_up_without_them(tmp_path, monkeypatch):
    """Relative local paths (``../my-bert``, ``../corpus/sentences.txt``) are local paths too: the pushed
    record, command and card name each by its last part."""
    from medlama.trainers.config import RewireConfig
    from medlama.trainers.trainer import rewire

    work = tmp_path / "work"
    (tmp_path / "corpus").mkdir()
    work.mkdir()
    tiny_bert(tmp_path / "my-bert", layers=1)
    write_sentences(tmp_path / "corpus" / "sentences.txt")
    monkeypatch.chdir(work)
    monkeypatch.setattr("sys.argv", ["medlama", "rewire", "--corpus", "../corpus/sentences.txt", "--out",
                                     "../rewired", "--model", "../my-bert"])
    config = RewireConfig.preset("paper", model="../my-bert", steps=2, save_steps=2, batch_size=8, max_length=16,
                                 layer=1)
    rewire("../corpus/sentences.txt", "../rewired", config, disable_tqdm=True)
    push_model(tmp_path / "rewired", "someone/my-bert-rewired", dry_run=tmp_path / "dry")
    tree = tmp_path / "dry" / "files"
    leaks = [f"{file.name}: {word}" for file in sorted(tree.rglob("*")) if file.is_file()
             for word in ("../my-bert", "../corpus", "../rewired") if word.encode() in file.read_bytes()]
    assert leaks == []
    record = json.loads((tree / "rewire_config.json").read_text())
    assert record["config"]["model"] == record["base_model"]["name"] == "my-bert"
    assert record["corpus"][0]["path"] == "sentences.txt"


def test_the_card_lists_checkpoints_only_when_they_go_up(rewired_from_tmp, tmp_path):
    """Without --include-checkpoints the upload holds no checkpoints/ folder, and its card lists none; with it,
    every folder the card names is in the upload."""
    _, model = rewired_from_tmp
    assert "`checkpoints/checkpoint-2`" in (model / "README.md").read_text()  # the local card lists them
    push_model(model, "someone/m", dry_run=tmp_path / "without")
    tree = tmp_path / "without" / "files"
    card = (tree / "README.md").read_text()
    assert not (tree / "checkpoints").exists() and "checkpoints/checkpoint-" not in card
    assert "| Checkpoints | 1 kept with the local copy, not in this repository (every 2 steps)" in card
    push_model(model, "someone/m", dry_run=tmp_path / "with", include_checkpoints=True)
    tree = tmp_path / "with" / "files"
    named = re.findall(r"`(checkpoints/checkpoint-\d+)`", (tree / "README.md").read_text())
    assert named == ["checkpoints/checkpoint-2"] and all((tree / folder / "model.safetensors").is_file() for folder in named)
