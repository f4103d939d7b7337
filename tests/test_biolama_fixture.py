"""A small BioLAMA release written by the tests, in exactly the layout of the authors' ``data.tar.gz``.

Other test files load this module by path (``importlib.util.spec_from_file_location``) and call
``write_release`` / ``write_archive``. The tests here check the fixture itself against the documented format.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

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


def test_fixture_has_the_release_layout(tmp_path):
    data = write_release(tmp_path)
    for source in ("ctd", "umls", "wikidata"):
        assert (data / source / "prompts" / "manual.jsonl").is_file()
        assert (data / source / "meta").is_dir()
        assert (data / source / "entities").is_dir() == (source != "umls")
        for rel in RELEASE[source]:
            assert sorted(p.name for p in (data / source / "triples_processed" / rel).iterdir()) == [
                "dev.jsonl", "test.jsonl", "train.jsonl"]
    line = json.loads((data / "umls" / "triples_processed" / "UR44" / "test.jsonl").read_text().splitlines()[0])
    assert set(line) == {"uuid", "predicate_id", "sub_uri", "sub_label", "sub_type", "sub_aliases", "obj_uris",
                         "obj_labels", "obj_types", "obj_aliases"}
    assert line["uuid"] == f"{line['sub_uri']}-UR44" and len(line["obj_aliases"]) == len(line["obj_labels"])
    archive = write_archive(tmp_path / "data.tar.gz", data)
    with tarfile.open(archive) as tar:
        assert "data/umls/triples_processed/UR44/test.jsonl" in tar.getnames()
