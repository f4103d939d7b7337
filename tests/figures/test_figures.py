"""The papers' figures drawn from recorded runs (``medlama figure``, ``medlama sweep``), each figure's data checked
against an independent computation from the runs' own files: a hand count of answer tokens (figure 1), numpy's
mean and std over the per-corpus records (figures 4 and 9), hits recounted from predictions.jsonl (figure 7)."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest
from datasets import load_dataset
from transformers import AutoTokenizer

from medlama.cli import main
from medlama.core.defaults import default_model_path

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]

#: Three relations with small pools (ranked each against its own: --candidates relation), where a tiny random
#: encoder already gets a few hits in its top 10.
RELATIONS = ["disease_has_normal_cell_origin", "disease_has_normal_tissue_origin", "may_prevent"]
PROBE = ["--relations", *RELATIONS, "--candidates", "relation"]


def png_size(path: Path) -> tuple[int, int]:
    """Width and height of a PNG, read by matplotlib (the file must be a whole image)."""
    height, width = matplotlib.image.imread(str(path)).shape[:2]
    return width, height


def figure_record(png: Path) -> dict:
    record = json.loads(png.with_suffix(".json").read_text())
    assert record["png"] == png.name and png.read_bytes()[:4] == b"\x89PNG"
    assert record["provenance"]["versions"]["medlama"] and record["provenance"]["date"]
    assert isinstance(record["provenance"]["command"], str) and record["sources"]
    return record


@pytest.fixture(scope="module")
def tiny_encoder(make_tiny_bert) -> Path:
    return make_tiny_bert("figures-tiny-bert")


def test_tokens_figure_counts_by_hand_and_names_the_2_6_percent(medlama_dir, tmp_path, capsys):
    png = tmp_path / "tokens.png"
    assert main(["figure", "tokens", str(medlama_dir), "--out", str(png)]) == 0
    record = figure_record(png)
    data = record["data"]
    tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    for config in ("full", "hard"):
        rows = load_dataset(str(medlama_dir), config)["test"]
        by_relation: dict[str, set] = {}
        occurrences = []
        for relation, names in zip(rows["relation"], rows["answer_names"]):
            by_relation.setdefault(relation, set()).update(names)
            occurrences += names
        count = {name: len(tokenizer.tokenize(name)) for names in by_relation.values() for name in names}
        distinct = sorted(count)
        shares = data["sets"][config]
        assert shares["distinct_answers"] == len(distinct) and shares["answer_occurrences"] == len(occurrences)
        single = shares["single_token"]
        assert single["distinct_answers"] == pytest.approx(np.mean([count[n] == 1 for n in distinct]))
        assert single["answer_occurrences"] == pytest.approx(np.mean([count[n] == 1 for n in occurrences]))
        assert single["distinct_answers_macro"] == pytest.approx(
            np.mean([np.mean([count[n] == 1 for n in names]) for names in by_relation.values()]))
        bars = shares["histogram_distinct_answers"]
        assert bars["1"] == pytest.approx(single["distinct_answers"])
        assert bars["4"] == pytest.approx(np.mean([count[n] == 4 for n in distinct]))
        assert bars["10+"] == pytest.approx(np.mean([count[n] >= 10 for n in distinct]))
        assert sum(bars.values()) == pytest.approx(1)
    # the card's two counts are the full set's pooled ones; the paper's 2.6% is the per-relation mean
    card = json.loads((medlama_dir / "build_info.json").read_text())["statistics"][-1]
    assert card["relation"] == "all"
    assert card["single_token_answers"] == pytest.approx(data["sets"]["full"]["single_token"]["distinct_answers"])
    assert card["single_token_answer_occurrences"] == pytest.approx(
        data["sets"]["full"]["single_token"]["answer_occurrences"])
    closest = data["closest_to_paper"]
    assert (closest["set"], closest["count"]) == ("full", "distinct_answers_macro")
    assert round(100 * closest["share"], 1) == 2.6
    assert "bert-base-uncased" in record["caption"] and "2.6%" in record["caption"]
    width, height = png_size(png)
    assert width > 1.8 * height  # two panels side by side: distinct names, every answer


def test_layers_figure_recounts_hits_per_layer_and_relation(medlama_dir, tiny_encoder, tmp_path, capsys):
    probe_out, png = tmp_path / "layers-probe", tmp_path / "layers.png"
    assert main(["probe", "--data", str(medlama_dir), *PROBE, "--limit", "40", "--model", str(tiny_encoder),
                 "--label", "tiny", "--layers", "1", "2", "--out", str(probe_out)]) == 0
    assert main(["figure", "layers", str(probe_out), "--k", "10", "--out", str(png)]) == 0
    entry = figure_record(png)["data"]["models"]["tiny"]
    assert entry["layers"] == [1, 2] and entry["relations"] == sorted(RELATIONS) + ["micro"]
    rows = [json.loads(line) for line in (probe_out / "predictions.jsonl").read_text().splitlines()]
    for row_index, layer in enumerate(entry["layers"]):
        mine = [r for r in rows if r["run"] == f"tiny L{layer}"]
        hit = {r["id"]: bool(set(r["gold"]) & set(r["predictions"][:10])) for r in mine}  # by hand
        expected = [np.mean([hit[r["id"]] for r in mine if r["relation"] == rel]) for rel in sorted(RELATIONS)]
        expected.append(np.mean(list(hit.values())))
        assert entry["acc"][row_index] == pytest.approx(expected)
        for value, interval in zip(entry["acc"][row_index], entry["intervals"][row_index]):
            assert interval[0] <= value <= interval[1]
    assert sum(map(sum, entry["acc"])) > 0  # the check had something to count
    width, height = png_size(png)
    assert width > height  # one map, relations across


def test_steps_figure_is_numpy_mean_and_std_over_the_recipe_corpora(medlama_dir, tiny_encoder, corpus_head,
                                                                     tmp_path, capsys):
    out, png = tmp_path / "recipe", tmp_path / "steps.png"
    corpora = [corpus_head(index, 150) for index in (0, 1)]
    assert main(["recipe", "--model", str(tiny_encoder), "--corpus", *map(str, corpora), "--steps", "2",
                 "--rewire-batch-size", "8", "--probe-checkpoints", "--data", str(medlama_dir), *PROBE,
                 "--limit", "40", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    checkpoints = results["checkpoints"]
    assert [c["corpus"] for c in checkpoints] == [c.name for c in corpora]
    for entry, run in zip(checkpoints, results["runs"][1:]):  # the last checkpoint is the rewired model probed
        assert entry["steps"]["2"]["acc@10"] == run["metrics"]["acc@10"]
        assert entry["steps"]["2"]["per_relation"] == run["per_relation"]
    assert main(["figure", "steps", str(out), "--k", "10", "--top", "2", "--out", str(png)]) == 0
    panels = figure_record(png)["data"]["panels"]
    assert len(panels) == 3 and list(panels)[0] == "micro average"
    micro = panels["micro average"]
    base = results["runs"][0]  # step 0: the un-rewired model, one value: its bootstrap interval is the spread
    assert micro[0] == {"step": 0, "mean": base["metrics"]["acc@10"], "std": None, "values": [base["metrics"]["acc@10"]],
                        "interval": base["intervals"]["acc@10"]}
    assert micro[1]["interval"] is None  # two corpora: their std is the spread
    values = np.array([c["steps"]["2"]["acc@10"] for c in checkpoints])
    assert micro[1]["step"] == 2 and micro[1]["mean"] == pytest.approx(values.mean())
    assert micro[1]["std"] == pytest.approx(values.std(ddof=1))
    last = {rel: np.mean([c["steps"]["2"]["per_relation"][rel]["acc@10"] for c in checkpoints]) for rel in RELATIONS}
    top = sorted(RELATIONS, key=lambda rel: (-last[rel], rel))[:2]
    assert list(panels)[1:] == top
    for rel in top:
        per = np.array([c["steps"]["2"]["per_relation"][rel]["acc@10"] for c in checkpoints])
        assert panels[rel][1]["mean"] == pytest.approx(per.mean()) and panels[rel][1]["std"] == pytest.approx(
            per.std(ddof=1))


def write_recipe_record(folder: Path, values: np.ndarray, relations: list[str]) -> None:
    """A recipe results.json with checkpoint probes of known values: ``values[corpus, step, relation]``."""
    folder.mkdir()
    steps = {}
    checkpoints = []
    for c in range(values.shape[0]):
        steps = {str(25 * (s + 1)): {"acc@1": float(values[c, s].mean()),
                                     "per_relation": {r: {"acc@1": float(values[c, s, i])}
                                                      for i, r in enumerate(relations)}}
                 for s in range(values.shape[1])}
        checkpoints.append({"corpus": f"pubmed_{c}", "steps": steps})
    record = {"query_set": "hard", "runs": [{"label": "un-rewired", "metrics": {"acc@1": 0.01},
                                             "per_relation": {r: {"acc@1": 0.01} for r in relations}}],
              "checkpoints": checkpoints, "provenance": {"data": {"sha256": "x"}}}
    (folder / "results.json").write_text(json.dumps(record))


def test_steps_figure_top_nine_of_twelve_relations(tmp_path, capsys):
    rng = np.random.default_rng(4)
    relations = [f"relation_{i:02d}" for i in range(12)]
    values = rng.uniform(0, 0.3, size=(10, 4, 12))  # 10 corpora, 4 checkpoints, 12 relations
    write_recipe_record(tmp_path / "recipe", values, relations)
    png = tmp_path / "steps.png"
    assert main(["figure", "steps", str(tmp_path / "recipe"), "--out", str(png)]) == 0
    panels = figure_record(png)["data"]["panels"]
    top = [relations[i] for i in np.argsort(-values[:, -1].mean(axis=0), kind="stable")[:9]]
    assert list(panels) == ["micro average", *top]
    for name in top:
        i = relations.index(name)
        assert [p["step"] for p in panels[name]] == [0, 25, 50, 75, 100]
        assert [p["mean"] for p in panels[name][1:]] == pytest.approx(values[:, :, i].mean(axis=0))
        assert [p["std"] for p in panels[name][1:]] == pytest.approx(values[:, :, i].std(axis=0, ddof=1))
    width, height = png_size(png)
    assert width > 2 * height  # 10 panels: two rows of five


def test_sweep_resumes_point_by_point_and_draws_figure_9(medlama_dir, tiny_encoder, corpus_head, tmp_path, capsys):
    out = tmp_path / "sweep"
    corpora = [str(corpus_head(index, 150)) for index in (0, 1)]
    common = ["sweep", "--model", str(tiny_encoder), "--corpus", *corpora, "--steps", "1", "--save-steps", "1",
              "--rewire-batch-size", "8", "--corpus-size", "100", "--data", str(medlama_dir), *PROBE, "--limit", "20",
              "--out", str(out)]
    assert main([*common, "--mask-ratio", "0.2", "0.5"]) == 0
    capsys.readouterr()
    points = sorted((out / "points").glob("*/point.json"))
    assert [p.parent.name for p in points] == ["lr5e-05-tau0.04-mask0.2-n100", "lr5e-05-tau0.04-mask0.5-n100"]
    before = {p: p.read_bytes() for p in points}
    # a rerun with one more mask ratio runs that point only
    assert main([*common, "--mask-ratio", "0.2", "0.5", "0.3"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("finished earlier, kept") == 2 and "mask0.3-n100: rewiring" in printed
    assert all(p.read_bytes() == before[p] for p in points)
    # another shared setting is refused: its points would not be comparable
    assert main([*common, "--steps", "2"]) == 2
    assert "another sweep setting (steps)" in capsys.readouterr().err

    record = figure_record(out / "figure-sweep.png")
    panel = record["data"]["panels"]["mask_ratio"]
    assert list(panel["acc@10"]) == ["0.2", "0.3", "0.5"]
    for ratio, line in panel["acc@10"].items():
        point = json.loads((out / "points" / line["key"] / "point.json").read_text())
        assert point["rewire_config"]["mask_ratio"] == float(ratio)
        assert [e["corpus"] for e in point["checkpoints"]] == [Path(c).name for c in corpora]
        for drawn in line["series"][1:]:
            values = np.array([e["steps"][str(drawn["step"])]["acc@10"] for e in point["checkpoints"]])
            assert drawn["mean"] == pytest.approx(values.mean()) and drawn["std"] == pytest.approx(values.std(ddof=1))
        assert [d["step"] for d in line["series"]] == [0, 1]
    width, height = png_size(out / "figure-sweep.png")
    assert height > width  # one column (mask ratio), two rows (acc@1, acc@10)
    # the figure command draws the same data again from the records
    assert main(["figure", "sweep", str(out), "--out", str(tmp_path / "again.png")]) == 0
    assert figure_record(tmp_path / "again.png")["data"] == record["data"]
    # and figure 4 of one point: its micro panel is the sweep's line of that point
    line = panel["acc@10"]["0.5"]
    assert main(["figure", "steps", str(out / "points" / line["key"]), "--k", "10", "--out",
                 str(tmp_path / "point.png")]) == 0
    assert figure_record(tmp_path / "point.png")["data"]["panels"]["micro average"] == line["series"]
