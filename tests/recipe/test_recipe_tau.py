"""``medlama recipe --tau``: the rewiring's temperature from the main job's command line (table 8 stars 0.03, the
presets train with the released run's 0.04), handed to the rewiring and checked like ``medlama rewire --tau``."""

from __future__ import annotations

import pytest

from medlama.cli import main


class Stop(Exception):
    """Raised by the stand-in workflow once it has seen the rewiring settings."""


@pytest.fixture
def seen(monkeypatch):
    import medlama.recipe.workflow as workflow

    configs = []

    def stand_in(queries, corpora, out, **kwargs):
        configs.append(kwargs["rewire_config"])
        raise Stop

    monkeypatch.setattr(workflow, "rewire_then_probe", stand_in)
    monkeypatch.setattr("medlama.commands.recipe.load_queries", lambda args: None)
    return configs


def test_recipe_tau_reaches_the_rewiring(seen, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the patients were treated with aspirin for pain \n" * 20, encoding="utf-8")
    for given, expected in ((["--tau", "0.03"], 0.03), ([], 0.04)):
        with pytest.raises(Stop):
            main(["recipe", "--corpus", str(corpus), *given, "--out", str(tmp_path / f"o{len(seen)}")])
        assert seen[-1].temperature == expected


def test_recipe_refuses_a_temperature_that_is_not_positive(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the patients were treated with aspirin for pain \n" * 20, encoding="utf-8")
    assert main(["recipe", "--corpus", str(corpus), "--tau", "0", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "medlama: error:" in err and "temperature must be a positive number" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()
