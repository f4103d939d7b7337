"""``medlama compare``: runs written by the probe's own writer (small query sets built here, scored by the acc@k
module), their comparison checked against direct computations (scipy's exact binomial test on the discordant
queries, numpy's bootstrap with the same seed, Holm by hand), refusals of runs that are not of the same
queries, the output formats, and the per-relation plot's error bars."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import binomtest

from probe_outputs import TOY_NAMES, TOY_RELATIONS, toy_queries, toy_result  # tests/helpers (pytest pythonpath)

from medlama.cli import main
from medlama.core.errors import MedlamaInputError
from medlama.runs.result import ProbeResult
from medlama.analysis import CompareSettings, compare_runs, load_runs
from medlama.runs.workflow import write_outputs

RELATIONS, NAMES = TOY_RELATIONS, list(TOY_NAMES)


def written(folder, *results):
    """``results.json`` and ``predictions.jsonl`` as the probe writes them (without its plots: quicker)."""
    from medlama.runs.outputs import write_probe_results

    folder.mkdir()
    write_probe_results(folder, results)
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    made = {}
    base = toy_queries()
    for name, skill, seed in (("base", 0.3, 1), ("better", 0.6, 2)):
        made[name] = root / name
        made[f"{name}-result"] = toy_result(base, name, skill, seed)
        made[f"{name}-result"].save(made[name])
    made["two"] = root / "two"  # one folder, two runs
    write_outputs(made["two"], [toy_result(base, "m1", 0.4, 3), toy_result(base, "m2", 0.5, 4)])
    return made


def direct_hits(res: ProbeResult, k: int) -> np.ndarray:
    return np.array([bool(set(gold) & set(ranked[:k])) for gold, ranked in zip(res.gold, res.predictions)])


def test_numbers_are_the_direct_computations(folders):
    settings = CompareSettings(resamples=300, seed=5)
    record = compare_runs(load_runs([folders["base"], folders["better"]]), settings)
    a, b = folders["base-result"], folders["better-result"]
    assert record["ks"] == [1, 5, 10] and record["queries"] == 90
    for k in record["ks"]:
        ha, hb = direct_hits(a, k), direct_hits(b, k)
        board = record["leaderboard"]
        assert board[0][f"acc@{k}"]["value"] == pytest.approx(a.acc(k)) == pytest.approx(ha.mean())
        assert board[1][f"acc@{k}_macro"]["value"] == pytest.approx(b.acc(k, "macro"))
        assert board[0][f"acc@{k}"]["interval"] == list(a.acc_ci(k, resamples=300, seed=5))
        micro = record["comparisons"][0][f"acc@{k}"]
        only_a, only_b = int((ha & ~hb).sum()), int((hb & ~ha).sum())
        assert (micro["a_only"], micro["b_only"]) == (only_a, only_b)
        if only_a + only_b:
            assert micro["p_value"] == pytest.approx(binomtest(only_a, only_a + only_b, 0.5).pvalue, rel=1e-9)
        picks = np.random.default_rng(5).integers(0, 90, size=(300, 90))  # the same queries for both runs
        spread = hb[picks].mean(axis=1) - ha[picks].mean(axis=1)
        assert micro["interval"] == pytest.approx(np.percentile(spread, [2.5, 97.5]).tolist(), rel=1e-12)
        assert micro["difference"] == pytest.approx(hb.mean() - ha.mean())
        per = record["comparisons"][0]["per_relation"]
        raw = {}
        for relation in RELATIONS:
            pick = np.array(a.relations) == relation
            x, y = int((ha[pick] & ~hb[pick]).sum()), int((hb[pick] & ~ha[pick]).sum())
            raw[relation] = binomtest(x, x + y, 0.5).pvalue if x + y else 1.0
            assert per[relation][f"acc@{k}"]["p_value"] == pytest.approx(raw[relation], rel=1e-9)
        ordered = sorted(RELATIONS, key=raw.get)
        running = 0.0
        for rank, relation in enumerate(ordered):  # Holm by hand
            running = max(running, min(1.0, (3 - rank) * raw[relation]))
            assert per[relation][f"acc@{k}"]["p_holm"] == pytest.approx(running, rel=1e-9)


def test_runs_of_other_queries_or_pools_are_refused_naming_what_differs(folders, tmp_path):
    cases = {
        "candidate pool": toy_queries(candidates=NAMES + ["extra name"]),
        "data fingerprint": toy_queries(fingerprint="f1"),
        "queries": toy_queries(per_relation=29),
    }
    for what, other in cases.items():
        folder = tmp_path / what.replace(" ", "-")
        written(folder, toy_result(other, "other", 0.5, 9))
        with pytest.raises(MedlamaInputError, match=f"'base' .* and 'other' .* differ in their {what}"):
            compare_runs(load_runs([folders["base"], folder]))
    written(tmp_path / "normalized", toy_result(toy_queries(), "other", 0.5, 9, match="normalized"))
    with pytest.raises(MedlamaInputError, match="'base' .* and 'other' .* differ in their answer matching: exact vs "
                                                "normalized"):
        compare_runs(load_runs([folders["base"], tmp_path / "normalized"]))
    swapped = toy_queries()
    swapped.gold[4] = ["name 39"] if swapped.gold[4] != ["name 39"] else ["name 38"]
    written(tmp_path / "gold", toy_result(swapped, "gold", 0.5, 9))
    with pytest.raises(MedlamaInputError, match="relation or gold answers of query 'disease_has_finding-4'"):
        compare_runs(load_runs([folders["base"], tmp_path / "gold"]))
    with pytest.raises(MedlamaInputError, match="a comparison needs two or more"):
        load_runs([folders["base"]])
    broken = tmp_path / "broken"
    written(broken, folders["base-result"])
    lines = (broken / "predictions.jsonl").read_text().splitlines()
    (broken / "predictions.jsonl").write_text("\n".join(lines[:3] + ["{not json"] + lines[4:]) + "\n")
    with pytest.raises(MedlamaInputError, match=r"predictions.jsonl, row 4: not JSON"):
        load_runs([folders["better"], broken])


def test_cli_formats_plot_and_several_runs_per_folder(folders, tmp_path, capsys):
    runs = [str(folders["base"]), str(folders["two"])]
    assert main(["compare", *runs, "--json", "--resamples", "200"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert [entry["label"] for entry in record["leaderboard"]] == ["base", "m1", "m2"]
    assert [c["run"] for c in record["comparisons"]] == ["m1", "m2"]
    assert record["method"]["settings"] == {"resamples": 200, "seed": 0, "level": 0.95}
    assert [i["folder"] for i in record["inputs"]] == ["base", "two", "two"]
    assert str(tmp_path.parent) not in json.dumps(record["inputs"])
    import medlama  # the Python API computes the same record and checks its settings as strictly

    same = medlama.compare(*runs, resamples=200)
    assert {k: v for k, v in same.items() if k != "provenance"} == {k: v for k, v in record.items() if k != "provenance"}
    with pytest.raises(MedlamaInputError, match="resampels"):
        medlama.compare(*runs, resampels=200)
    assert main(["compare", *runs, "--format", "markdown"]) == 0
    markdown = capsys.readouterr().out
    assert "| run | acc@1 | acc@5 | acc@10 |" in markdown and "| may_treat | 30 |" in markdown
    assert main(["compare", *runs, "--format", "latex"]) == 0
    latex = capsys.readouterr().out
    assert latex.count(r"\begin{tabular}") == 4 and r"may\_treat" in latex
    assert r"$\Delta$ acc@1" in latex and "Δ" not in latex
    plot = tmp_path / "board.png"
    assert main(["compare", *runs, "--plot", str(plot)]) == 0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "Leaderboard" in capsys.readouterr().out
    assert main(["compare", *runs, "--plot", str(plot)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(["compare", str(folders["base"]), str(folders["base"])]) == 2
    assert "given twice" in capsys.readouterr().err


def test_a_recipe_output_gives_its_un_rewired_and_rewired_runs(folders, tmp_path, capsys):
    from medlama.recipe.workflow import RecipeResult

    base = toy_queries()
    recipe = tmp_path / "recipe"
    recipe.mkdir()
    RecipeResult(base=toy_result(base, "un-rewired", 0.3, 1, model="someone/base"),
                 rewired=[toy_result(base, "rewired (c0)", 0.5, 6, model="someone/base")], models=[]).save(recipe)
    assert main(["compare", str(recipe), str(folders["better"]), "--json", "--resamples", "100"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert [c["run"] for c in record["comparisons"]] == ["rewired (c0)", "better"]
    assert record["comparisons"][0]["baseline"] == "un-rewired"


def test_per_relation_plot_draws_each_relations_interval(folders, monkeypatch):
    from medlama.core.intervals import bootstrap_mean_ci
    from medlama.runs import plots

    res = folders["better-result"]
    drawn = {}
    monkeypatch.setattr(plots, "save_figure", lambda fig, path, **_: drawn.setdefault("fig", fig))
    plots.plot_relations([res], "unused.png", k=10)
    from matplotlib.container import BarContainer

    [bars] = [c for c in drawn["fig"].axes[0].containers if isinstance(c, BarContainer)]
    hits = direct_hits(res, 10)
    segments = bars.errorbar.lines[2][0].get_segments()  # one vertical segment per bar: [low, high] in percent
    for relation, patch, segment in zip(sorted(RELATIONS), bars.patches, segments):
        low, high = bootstrap_mean_ci(hits[np.array(res.relations) == relation].astype(float))
        assert patch.get_height() == pytest.approx(100 * res.metrics["groups"][relation]["acc@10"])
        assert [segment[0][1], segment[1][1]] == pytest.approx([100 * low, 100 * high])
