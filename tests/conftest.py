"""Shared test setup: offline Hugging Face libraries, the real data in ../shared, one MedLAMA build, and a
small BioLAMA release in the layout of the authors' ``data.tar.gz`` (fixture ``biolama_fx``)."""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from types import SimpleNamespace

# Before any Hugging Face import: nothing may reach a hub, and no user cache (Hugging Face's or medlama's) is read
# or written.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_EVALUATE_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
if "HF_HOME" not in os.environ:
    _hf_home = tempfile.mkdtemp(prefix="medlama-tests-hf-")
    os.environ["HF_HOME"] = _hf_home
    atexit.register(shutil.rmtree, _hf_home, ignore_errors=True)  # leave nothing behind in /tmp
if "MEDLAMA_CACHE" not in os.environ:  # medlama's own cache (builder downloads, corpus indexes): the tests' own
    _medlama_cache = tempfile.mkdtemp(prefix="medlama-tests-cache-")
    os.environ["MEDLAMA_CACHE"] = _medlama_cache
    atexit.register(shutil.rmtree, _medlama_cache, ignore_errors=True)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# No plain progress lines in a test's captured stderr however slow the machine (tests that want them set it)
os.environ["MEDLAMA_LOG_INTERVAL"] = "1e9"
# Each test encodes what it probes (tests that count, fail or time encoding rely on it); the cache's own tests
# turn it on
os.environ["MEDLAMA_EMBEDDING_CACHE"] = "0"


def _own_share_of_the_cpus() -> None:
    """Under pytest-xdist, each worker (and every process it starts) runs on its own share of the CPUs: with two
    workers on two cores, torch's threads in one worker (one per CPU it may use, as medlama's encoder sets them)
    would otherwise compete with the other's and spin at every barrier. Nothing changes without xdist."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not (worker.startswith("gw") and worker[2:].isdigit() and count.isdigit() and hasattr(os, "sched_setaffinity")):
        return
    cpus, index, count = sorted(os.sched_getaffinity(0)), int(worker[2:]), int(count)
    share = cpus[index::count] if count <= len(cpus) else [cpus[index % len(cpus)]]
    os.sched_setaffinity(0, share)


_own_share_of_the_cpus()

import pytest  # noqa: E402

import medlama.cli  # noqa: E402


def _card_yaml_compiled() -> None:
    """``load_dataset(folder, config)`` reads the folder's card (its ``configs``, in YAML) anew on every call,
    through huggingface_hub's ``repocard`` and PyYAML's pure-Python ``safe_load``: 0.2 s of the 0.34 s a call
    takes on a MedLAMA folder (its 230 configs), and the tests make hundreds of such calls. Here ``repocard``
    parses with PyYAML's compiled safe loader (libyaml's: the same safe schema), where PyYAML has one;
    ``tests/datasets/test_card_yaml.py`` checks it reads every built card as the pure-Python loader does."""
    import types

    import yaml
    from huggingface_hub import repocard

    if not getattr(yaml, "__with_libyaml__", False) or getattr(repocard.yaml, "compiled_for_tests", False):
        return
    compiled = types.ModuleType("yaml")
    compiled.__dict__.update(yaml.__dict__)
    compiled.safe_load = lambda stream: yaml.load(stream, Loader=yaml.CSafeLoader)  # noqa: S506 - the safe one
    compiled.compiled_for_tests = True
    repocard.yaml = compiled


_card_yaml_compiled()

# Every command module imported once, before any test patches a name in one of them: a command module
# first imported under a patch (``from medlama.commands.probe import load_queries``) would keep it.
medlama.cli.build_parser()

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("MEDLAMA_SHARED", REPO.parent / "shared"))


def shared_path(*parts: str) -> Path:
    """A path under ../shared; missing data fails in CI and skips elsewhere (a third party's clone)."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        message = f"real data not found at {path} (set MEDLAMA_SHARED to the shared/ folder)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def medlama_source() -> Path:
    """The local copy of the MedLAMA release (byte-identical to the pinned commit)."""
    return shared_path("data", "medlama")


@pytest.fixture(scope="session")
def elicit_corpora() -> Path:
    """The released rewiring corpora (10 x 10k PubMed sentences, 10k Wikipedia sentences)."""
    return shared_path("data", "elicit_corpora")


@pytest.fixture(scope="session")
def corpus_head(elicit_corpora, tmp_path_factory):
    """``corpus_head(index, lines)``: the first ``lines`` real sentences of ``pubmed_sents_no_punkt_10k_<index>``
    as a file ``pubmed_<index>`` of its own (a rewiring corpus small enough for a test)."""
    def head(index: int, lines: int) -> Path:
        text = (elicit_corpora / f"pubmed_sents_no_punkt_10k_{index}").read_text(encoding="utf-8")
        path = tmp_path_factory.mktemp(f"pubmed-{index}-head-{lines}") / f"pubmed_{index}"
        path.write_text("".join(text.splitlines(True)[:lines]), encoding="utf-8")
        return path
    return head


def built_once(tmp_path_factory, name: str, build) -> Path:
    """The folder ``build(folder)`` writes, built once per test run: under pytest-xdist the first worker to ask
    builds it (the others wait on a file lock) into the folder the workers share, and every worker reads it."""
    from filelock import FileLock

    if os.environ.get("PYTEST_XDIST_WORKER") is None:  # one process: its own temporary folder
        folder = tmp_path_factory.mktemp(name) / name
        build(folder)
        return folder
    shared = tmp_path_factory.getbasetemp().parent  # pytest-of-USER/pytest-N, the run's; each worker's is below
    folder, done = shared / name / name, shared / f"{name}.done"
    with FileLock(str(shared / f"{name}.lock")):
        if not done.is_file():
            if folder.parent.exists():  # a worker that died while building
                shutil.rmtree(folder.parent)
            folder.parent.mkdir()
            build(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def medlama_dir(tmp_path_factory, medlama_source) -> Path:
    """Folder of MedLAMA built with the real builder (``medlama build medlama``), once per test run and shared
    by the test workers; loadable with ``load_dataset(folder, config)``. Tests read it, never write into it."""
    from medlama.datasets.medlama_folder import write_medlama

    return built_once(tmp_path_factory, "medlama", lambda out: write_medlama(out, medlama_source, progress=False))


@pytest.fixture(scope="session")
def medlama_build(medlama_dir, medlama_source):
    """``(folder, MedlamaBuild, statistics)``: the session's MedLAMA folder, the real builder's build of the same
    release in memory (the rows the folder was written from) and the statistics the build wrote."""
    from medlama.datasets.medlama import build_medlama

    statistics = json.loads((medlama_dir / "build_info.json").read_text(encoding="utf-8"))["statistics"]
    return medlama_dir, build_medlama(medlama_source, progress=False), statistics


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models run far faster on one thread than on busy shared cores; restored afterwards. Modules of
    tiny-model tests use it with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def make_tiny_bert(tmp_path_factory):
    """``make_tiny_bert(name, *, mlm=False, layers=2, seed=0)``: a random BERT (hidden 32, 2 heads, 128
    positions) with the bundled model's 30k-token vocabulary, with or without an MLM head, saved in a new
    folder like a user's checkpoint and returned as that folder (``tests/helpers/tiny_bert.py``)."""
    from tiny_bert import save_tiny_bert  # tests/helpers (pytest pythonpath)

    def make(name: str, *, mlm: bool = False, layers: int = 2, seed: int = 0) -> Path:
        return save_tiny_bert(tmp_path_factory.mktemp(name), mlm=mlm, layers=layers, seed=seed)

    return make


# --------------------------------------------------------------------------- a small BioLAMA release

# source -> relation -> (manual template, records). A record: (subject label, subject aliases,
# [(object label, [object aliases]), ...]). The first 3 records are train, the next 2 dev, the rest test.
RELEASE = {
    "ctd": {
        "CD1": ("[X] prevents diseases such as [Y] .", [
            ("Aspirin", ["acetylsalicylic acid"], [("Myocardial Infarction", ["heart attack"]), ("Stroke", [])]),
            ("Metformin", [], [("Diabetes Mellitus, Type 2", ["type 2 diabetes", "T2DM"])]),
            ("Tamoxifen", ["Nolvadex"], [("Breast Neoplasms", ["breast cancer"])]),
            ("Folic Acid", ["folate"], [("Neural Tube Defects", ["NTD"])]),
            ("Atorvastatin", [], [("Coronary Disease", ["coronary heart disease"])]),
            ("Lamivudine", ["3TC"], [("Hepatitis B", ["hepatitis-B", "HBV infection"])]),
            ("Vitamin D", ["calciferol"], [("Rickets", []), ("Osteomalacia", ["soft bones"])]),
            ("Isoniazid", [], [("Tuberculosis", ["TB"])]),
            ("Oseltamivir", ["Tamiflu"], [("Influenza, Human", ["the flu", "influenza"])]),
        ]),
        "CG1": ("[X] interacts with genes such as [Y] .", [
            ("Bisphenol A", ["BPA"], [("ESR1", ["estrogen receptor 1"])]),
            ("Cadmium", [], [("MT1A", ["metallothionein 1A"]), ("HMOX1", [])]),
            ("Benzo(a)pyrene", [], [("CYP1A1", [])]),
            ("Arsenic", [], [("NFE2L2", ["NRF2"])]),
            ("Resveratrol", [], [("SIRT1", ["sirtuin 1"])]),
            ("Dexamethasone", [], [("NR3C1", ["glucocorticoid receptor"])]),
            ("Tetrachlorodibenzodioxin", ["TCDD"], [("AHR", ["aryl hydrocarbon receptor"])]),
            ("Ethanol", ["alcohol"], [("ADH1B", [])]),
            ("Valproic Acid", [], [("HDAC1", ["histone deacetylase 1"])]),
        ]),
    },
    "umls": {
        "UR44": ("[X] may prevent [Y] .", [
            ("sulfisoxazole", [], [("Bacterial Infections", ["bacterial infection"])]),
            ("Zidovudine", ["AZT"], [("HIV Infections", ["HIV infection"])]),
            ("Entecavir", [], [("Hepatitis B", ["Type B hepatitis"])]),
            ("Mefloquine", [], [("Malaria", [])]),
            ("Fluconazole", [], [("Candidiasis", ["thrush"]), ("Cryptococcosis", [])]),
            ("Warfarin", ["Coumadin"], [("Thrombosis", ["blood clot"]), ("Embolism", [])]),
            ("Acyclovir", [], [("Herpes Simplex", ["HSV infection"])]),
            ("Propranolol", [], [("Migraine Disorders", ["migraine"])]),
            ("Ivermectin", [], [("Onchocerciasis", ["river blindness"])]),
        ]),
        "UR116": ("[X] is the associated morphology of [Y] .", [
            ("Neoplasm", [], [("Carcinoma", [])]),
            ("Inflammation", [], [("Arthritis", ["joint inflammation"])]),
            ("Fibrosis", [], [("Cirrhosis", ["liver cirrhosis"])]),
            ("Ulcer", [], [("Peptic Ulcer", ["stomach ulcer"])]),
            ("Hemorrhage", [], [("Hemophilia", [])]),
            ("Necrosis", [], [("Gangrene", [])]),
            ("Edema", [], [("Nephrotic Syndrome", [])]),
            ("Stenosis", [], [("Aortic Valve Stenosis", ["aortic stenosis"])]),
            ("Calculus", [], [("Kidney Calculi", ["kidney stones", "nephrolithiasis"])]),
        ]),
    },
    "wikidata": {
        "P2175": ("[X] is used to treat [Y] .", [
            ("ibuprofen", [], [("pain", []), ("fever", ["pyrexia"])]),
            ("insulin", [], [("diabetes mellitus", ["diabetes"])]),
            ("salbutamol", ["albuterol"], [("asthma", [])]),
            ("omeprazole", [], [("gastroesophageal reflux disease", ["GERD", "acid reflux"])]),
            ("levothyroxine", [], [("hypothyroidism", [])]),
            ("amoxicillin", [], [("otitis media", ["middle ear infection"])]),
            ("sertraline", [], [("major depressive disorder", ["depression"])]),
            ("methotrexate", [], [("rheumatoid arthritis", ["RA"]), ("psoriasis", [])]),
            ("loratadine", [], [("allergic rhinitis", ["hay fever"])]),
        ]),
        "P780": ("[X] has symptoms such as [Y] .", [
            ("influenza", ["flu"], [("fever", ["pyrexia"]), ("cough", [])]),
            ("migraine", [], [("headache", ["cephalalgia"])]),
            ("anemia", [], [("fatigue", ["tiredness"])]),
            ("common cold", [], [("sneeze", ["sneezing"])]),
            ("gastroenteritis", [], [("diarrhea", ["diarrhoea"])]),
            ("asthma", [], [("wheeze", ["wheezing"]), ("dyspnea", ["shortness of breath"])]),
            ("appendicitis", [], [("abdominal pain", ["stomach ache"])]),
            ("hypoglycemia", [], [("sweating", ["diaphoresis"])]),
            ("conjunctivitis", [], [("red eye", ["pink eye"])]),
        ]),
    },
}
SPLIT_OF = ["train"] * 3 + ["dev"] * 2 + ["test"] * 4
#: A prompt for a relation the release has no triples for (upstream's prompt files have such lines).
EXTRA_PROMPT = {"wikidata": ("P9999", "[X] is a rare [Y] .")}
URI_PREFIX = {"ctd": "MESH:D", "umls": "C", "wikidata": "Q"}
TYPES = {"ctd": ("chemical", "disease"), "umls": ("T121", "T047"), "wikidata": ("Q12140", "Q12136")}


def uri(source: str, label: str) -> str:
    return f"{URI_PREFIX[source]}{int(hashlib.sha256(label.encode()).hexdigest(), 16) % 10**7:07d}"


def record(source: str, relation: str, subject: tuple) -> dict:
    label, aliases, objects = subject
    sub_uri = uri(source, label)
    return {
        "uuid": f"{sub_uri}-{relation}", "predicate_id": relation, "sub_uri": sub_uri, "sub_label": label,
        "sub_type": TYPES[source][0], "sub_aliases": aliases,
        "obj_uris": [uri(source, name) for name, _ in objects], "obj_labels": [name for name, _ in objects],
        "obj_types": [TYPES[source][1]] if source != "ctd" else [],
        "obj_aliases": [list(names) for _, names in objects],
    }


def write_release(root: Path) -> Path:
    """Write ``root/data/...`` as in ``data.tar.gz``; return ``root/data``."""
    data = root / "data"
    for source, relations in RELEASE.items():
        base = data / source
        for folder in ("meta", "prompts", "triples_processed") + (("entities",) if source != "umls" else ()):
            (base / folder).mkdir(parents=True, exist_ok=True)
        prompts = [{"relation": rel, "template": template, "label": rel.lower()}
                   for rel, (template, _) in relations.items()]
        if source in EXTRA_PROMPT:
            prompts.append({"relation": EXTRA_PROMPT[source][0], "template": EXTRA_PROMPT[source][1]})
        (base / "prompts" / "manual.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts))
        (base / "meta" / "relations.json").write_text(json.dumps(sorted(relations)))
        if source != "umls":
            (base / "entities" / "entities.txt").write_text("placeholder\n")
        for rel, (_, subjects) in relations.items():
            for split in ("train", "dev", "test"):
                lines = [json.dumps(record(source, rel, subject)) for subject, s in zip(subjects, SPLIT_OF)
                         if s == split]
                path = base / "triples_processed" / rel / f"{split}.jsonl"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("".join(line + "\n" for line in lines))
    return data


def write_archive(path: Path, data: Path) -> Path:
    """``tar -czf path data/`` (entries named ``data/...``, as upstream's archive)."""
    with tarfile.open(path, "w:gz") as tar:
        tar.add(data, arcname="data")
    return path


def counts(source: str | None = None, split: str = "test") -> int:
    """Number of records of ``split`` over the fixture's relations (of ``source``, or all)."""
    return sum(SPLIT_OF.count(split) for s, rels in RELEASE.items() if source in (None, s) for _ in rels)


@pytest.fixture(scope="session")
def biolama_fx() -> SimpleNamespace:
    """The BioLAMA fixture release: ``write_release(root)`` (returns ``root/data``), ``write_archive(path,
    data)``, ``counts(source=None, split="test")``, and its content ``RELEASE``, ``SPLIT_OF``, ``EXTRA_PROMPT``."""
    return SimpleNamespace(RELEASE=RELEASE, SPLIT_OF=SPLIT_OF, EXTRA_PROMPT=EXTRA_PROMPT, uri=uri, record=record,
                           write_release=write_release, write_archive=write_archive, counts=counts)


@pytest.fixture(scope="session")
def biolama_release_dir(biolama_fx, tmp_path_factory) -> Path:
    """The fixture BioLAMA release, extracted: a folder holding ``data/``."""
    root = tmp_path_factory.mktemp("biolama-release")
    biolama_fx.write_release(root)
    return root


@pytest.fixture(scope="session")
def biolama_dir(biolama_release_dir, tmp_path_factory) -> Path:
    """The fixture release built by ``medlama build biolama`` (all sources)."""
    from medlama.datasets.biolama_folder import write_biolama

    out = tmp_path_factory.mktemp("built") / "biolama"
    write_biolama(out, biolama_release_dir, progress=False)
    return out


@pytest.fixture(scope="session")
def sets(tmp_path_factory) -> Path:
    """Context-variance sets built by the real builder from the tiny inputs (both sources)."""
    import cv_inputs as cvb  # tests/helpers (pytest pythonpath): the tiny MedLAMA folder and corpora
    from medlama.datasets.context_variance import CorpusSpec, build_context_variance
    from medlama.datasets.context_variance.kb_adapters import knowledge_base_from_medlama

    root = tmp_path_factory.mktemp("cv-sets")
    kb = knowledge_base_from_medlama(cvb.write_medlama_folder(root / "medlama"), "full")
    notes, pmc = cvb.write_corpora(root / "corpora")
    build_context_variance(kb, [CorpusSpec.make(notes, "mimic"), CorpusSpec.make(pmc, "pmc")], root / "sets",
                           index_root=root / "indexes", progress=False)
    return root / "sets"


def pytest_collection_modifyitems(config, items):
    """The slow tests first (a stable sort keeps every other order): under ``--dist worksteal`` (pyproject's
    addopts) the worker that runs out takes the far end of the other's queue, the many short tests, so neither
    waits alone on a long test at the close."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
