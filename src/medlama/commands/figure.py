"""``medlama figure NAME INPUT...``: one of the papers' figures, drawn from what runs recorded.

Writes a PNG and, beside it, the figure's data as JSON (every number drawn, how each spread was computed, the
inputs' SHA-256 and the data they were probed on, versions, settings, command and date), both atomically.

  tokens  DATA        figure 1 (right): MedLAMA's answers by number of tokens, and which count gives the paper's
                      2.6% single-token names (full set, distinct answers per relation, mean over relations)
  steps   RECIPE...   figure 4: acc@k over rewiring steps, mean ± std over the corpora, the micro average and
                      the top 9 relations (`medlama recipe --probe-checkpoints`)
  layers  PROBE...    figure 7: acc@k per layer and relation, with each cell's bootstrap interval in the JSON
                      (`medlama probe --layers 1 2 3 ...`)
  sweep   SWEEP       figure 9 and appendix A.2-A.3: acc@k over steps per swept setting (`medlama sweep`)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from medlama.commands.flags import add_command, add_settings_flags, given_settings
from medlama.core.errors import MedlamaInputError
from medlama.core.settings import settings_from
from medlama.figures.settings import FIGURES, FigureSettings


def register(subparsers) -> None:
    parser = add_command(subparsers, "figure", run, doc=__doc__,
                         help="draw one of the papers' figures (tokens, steps, layers, sweep) from runs' records: "
                              "PNG + JSON")
    parser.add_argument("name", choices=list(FIGURES), metavar="NAME",
                        help="; ".join(f"{name}: {what}" for name, (what, _) in FIGURES.items()).replace("%", "%%"))
    parser.add_argument("inputs", nargs="+", metavar="INPUT",
                        help="; ".join(f"{name}: {inputs}" for name, (_, inputs) in FIGURES.items()))
    add_settings_flags(parser, FigureSettings)


def run(args: argparse.Namespace) -> int:
    # the figure modules load (matplotlib, numpy, the probers) when a figure is drawn, not when the CLI parses
    from medlama.figures.output import check_png

    settings = settings_from(FigureSettings, given_settings(args, FigureSettings))
    out = settings.out or Path(f"figure-{args.name}.png")
    check_png(out, overwrite=settings.overwrite)  # before any work
    single = {"tokens": "a MedLAMA folder or Hub id", "sweep": "a sweep's output folder"}
    if args.name in single and len(args.inputs) != 1:
        raise MedlamaInputError(f"figure {args.name} draws one input ({single[args.name]}); {len(args.inputs)} given")
    png, record = _draw(args.name, args.inputs, out, settings)
    print(f"wrote {png} and {record}")
    return 0


def _draw(name: str, inputs: list[str], out: Path, settings: FigureSettings,
          argv: list[str] | None = None) -> tuple[Path, Path]:
    if name == "tokens":
        # transformers loads with the token figure, not when the CLI parses its flags
        from medlama.figures.tokens import token_figure

        return token_figure(inputs[0], out, tokenizer=settings.tokenizer, overwrite=settings.overwrite, argv=argv)
    if name == "steps":
        # matplotlib loads when a figure is drawn, not when the CLI parses its flags
        from medlama.figures.steps import steps_figure

        return steps_figure([Path(i) for i in inputs], out, k=settings.k, top=settings.top,
                            overwrite=settings.overwrite, argv=argv)
    if name == "layers":
        # numpy and the run reader load when a figure is drawn, not when the CLI parses its flags
        from medlama.figures.layers import layers_figure

        return layers_figure([Path(i) for i in inputs], out, k=settings.k, overwrite=settings.overwrite, argv=argv)
    # matplotlib loads when a figure is drawn, not when the CLI parses its flags
    from medlama.figures.sweep_plot import sweep_figure

    return sweep_figure(Path(inputs[0]), out, overwrite=settings.overwrite, argv=argv)
