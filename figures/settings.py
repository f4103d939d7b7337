"""What ``medlama figure`` and ``medlama sweep`` are told (their flags are made from these fields), and the names of
the sweep's files."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from medlama.core.settings import Checked, setting
from medlama.trainers.config import QUICK_PRESET, RewireConfig

#: The figures ``medlama figure`` draws: name -> (the paper's figure, what the inputs are).
FIGURES = {
    "tokens": ("figure 1 (right): answers by number of tokens, the 2.6% single-token share reconciled",
               "a built MedLAMA folder or Hub id"),
    "steps": ("figure 4: acc@k over rewiring steps, mean ± std over corpora, micro and the top relations",
              "output folders of `medlama recipe --probe-checkpoints` (or a sweep's points/KEY)"),
    "layers": ("figure 7: acc@k per layer and relation", "output folders of `medlama probe --layers ...`"),
    "sweep": ("figure 9 / appendix A.2-A.3: acc@k over steps per mask ratio, learning rate, tau, corpus size",
              "the output folder of `medlama sweep`"),
}


@dataclass(frozen=True, kw_only=True)
class FigureSettings(Checked):
    """Where the figure goes and what it draws."""

    out: Path | None = setting(None, parse=Path, metavar="FILE.png", show_default="figure-NAME.png here",
                               help="the PNG to write; its data goes to the .json beside it")
    overwrite: bool = setting(False, switch=True, show_default=False,
                              help="replace a figure already there (default: refuse)")
    k: int = setting(1, min=1, help="the cut-off drawn (acc@k) by steps and layers (the paper: acc@1)")
    top: int = setting(9, min=1, help="steps: relation panels beside the micro average (the paper: 9)")
    tokenizer: str | None = setting(None, parse=str, show_default="the bundled model's (bert-base-uncased vocabulary)",
                                    help="tokens: the tokenizer counting answer tokens (a folder or name)")


#: The sweep's record and each finished point's; the figure ``medlama sweep`` draws at the end.
SWEEP_FILE, POINT_FILE, FIGURE_FILE = "sweep.json", "point.json", "figure-sweep.png"
#: The owner recorded in the output folder.
SWEEP_KIND = "sweep"
#: The grid's axes: (setting of :class:`SweepSettings`, field of :class:`RewireConfig`, short name in keys).
AXES = (("learning_rate", "learning_rate", "lr"), ("tau", "temperature", "tau"), ("mask_ratio", "mask_ratio", "mask"),
        ("corpus_size", "max_sentences", "n"))


@dataclass(frozen=True, kw_only=True)
class SweepSettings(Checked):
    """The grid (each axis one or more values; every combination is a point) and what every point shares. The
    defaults are CPU-sized: three mask ratios of figure 9, the demo preset's learning rate and tau, 1,000
    sentences (table 8's smallest), 50 steps probed every 25."""

    model: str | None = setting(None, parse=str, show_default="the bundled all-MiniLM-L6-v2",
                                help="encoder folder or name")
    corpus: tuple[Path, ...] = setting(parse=Path, metavar="FILE",
                                       help="sentence files, each point rewired on each (the spread over them is "
                                            "the figure's std; the paper: 10 PubMed samples)")
    learning_rate: tuple[float, ...] = setting((5e-5,), flag="--lr", min=0, metavar="LR",
                                               help="learning rates (table 8: 1e-5 2e-5 5e-5)")
    tau: tuple[float, ...] = setting((0.04,), min=0, help="InfoNCE temperatures (table 8: 0.02 to 0.05)")
    mask_ratio: tuple[float, ...] = setting((0.1, 0.3, 0.5), min=0, max=1,
                                            help="mask ratios (figure 9: 0.1 0.2 0.3 0.4 0.5)")
    corpus_size: tuple[int, ...] = setting((1000,), min=2, metavar="N",
                                           help="sentences sampled from each corpus (table 8: 1000 10000 20000 100000)")
    steps: int = setting(50, min=1, help="rewiring steps of every point")
    save_steps: int = setting(25, min=1, help="probe a checkpoint every N steps (and the last)")
    rewire_batch_size: int = setting(32, min=2, metavar="N", help="pairs per optimiser step")
    seed: int = setting(33, min=0, help="seed of the masks, batches and training (the same at every point)")

    def points(self) -> list[dict]:
        """Every grid point, ``{"learning_rate", "tau", "mask_ratio", "corpus_size"}``, in grid order."""
        axes = [tuple(dict.fromkeys(getattr(self, name))) for name, _, _ in AXES]
        return [dict(zip((name for name, _, _ in AXES), values)) for values in itertools.product(*axes)]

    def config(self, point: dict) -> RewireConfig:
        """The rewiring of ``point``: the demo preset with the sweep's shared settings and the point's values."""
        values = {field: point[name] for name, field, _ in AXES}
        return RewireConfig.preset(QUICK_PRESET, steps=self.steps, save_steps=self.save_steps, seed=self.seed,
                                   batch_size=self.rewire_batch_size, model=self.model, skip_short_lines=True,
                                   **values).validate()


def point_key(point: dict) -> str:
    """The folder name of a grid point: ``lr5e-05-tau0.04-mask0.5-n1000``."""
    return "-".join(f"{short}{point[name]:g}" for name, _, short in AXES)
