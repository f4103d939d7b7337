"""``medlama ucm``: score context-variance sets with models; UCM tables 1-3, acc@k, JSON and a plot.

The flags become a :class:`~medlama.ucm_eval.evaluation.UcmRun` for :func:`medlama.ucm_eval.evaluation.run`, the one
UCM run (the Python API's :func:`medlama.ucm` is the other adapter over it)."""

from __future__ import annotations

import argparse
from pathlib import Path

from medlama.commands.flags import add_command, add_settings_flags, given_settings
from medlama.commands.method_flags import method_defaults
from medlama.commands.output import add_output_arguments, human_output, print_results
from medlama.core.batching import BatchSizeFlag
from medlama.runs.outputs import RESULTS_FILE
from medlama.probers.causal.prober import LikelihoodSettings
from medlama.probers.mask_average import MaskAverageSettings
from medlama.probers.mask_predict import MaskPredictSettings
from medlama.core.progress import enabled as progress_enabled
from medlama.core.settings import settings_from
from medlama.ucm_eval.evaluation import FLAGS, UcmModels, UcmRun, UcmSettings
from medlama.ucm_eval.evaluation import run as run_ucm
from medlama.ucm_eval.mask_predict_ranker import PAPER_DECODING
from medlama.ucm_eval.rankers import RankerSettings, RetrievalRankerSettings


def register(subparsers) -> None:
    parser = add_command(subparsers, "ucm", run,
                         help="UCM of models on context-variance sets: rank changes, UCM_k / UCM_m, acc@k with and "
                    "without context")
    parser.add_argument("--sets", required=True, type=Path, help="folder written by medlama build context-variance")
    add_settings_flags(parser, UcmModels)
    add_settings_flags(parser, UcmSettings, title="what to score")
    # the ranker asks no learned prompts, so it has no train overlap to allow
    add_settings_flags(parser, MaskPredictSettings, exclude=("batch_size", "prompts", "allow_train_overlap"),
                       defaults=PAPER_DECODING,
                       title="mask-predict ranker (the paper's: BioLAMA's confidence decoding)",
                       helps={name: (lambda text: "mask-predict: " + text)
                              for name in ("max_masks", "beam_size", "init", "refine", "max_iterations", "rescore")})
    add_settings_flags(parser, MaskAverageSettings, exclude=("batch_size",), title="mask-average ranker",
                       helps={"max_tokens": lambda _: "mask-average: most masks per name, longer names are scored "
                                                      "on their first N tokens; none: the longest name's token count"})
    add_settings_flags(parser, RetrievalRankerSettings, exclude=("batch_size",), title="retrieval ranker")
    # a UCM input is no relation's query: no few-shot examples to draw, and one score per name (no layer sweep)
    add_settings_flags(parser, LikelihoodSettings,
                       exclude=("batch_size", "search", "layers", "few_shot", "few_shot_seed",
                                "few_shot_as_multiturn"),
                       title="causal-likelihood ranker")
    rankers = {"mask-predict": MaskPredictSettings, "mask-average": MaskAverageSettings,
               "retrieval": RetrievalRankerSettings, "causal-likelihood": LikelihoodSettings}
    add_settings_flags(parser, BatchSizeFlag, helps={
        "batch_size": lambda lead: f"{lead}, for every ranker; " + method_defaults("batch_size", rankers)})
    # --limit (first N triples per relation) is a field of UcmSettings, among "what to score".
    add_output_arguments(parser, default_out=Path("out/ucm"), writes="results.json and ucm.png (and records.jsonl)")


def run(args: argparse.Namespace) -> int:
    """Rank every pool entity at the mask of each incremental context input of a set built by `medlama build
    context-variance`, with a masked LM (X-FACTR confidence decoding as BioLAMA decodes, the UCM paper's; or mask average
    over the pool), an encoder (retrieval, as Contrastive-Probe) or a decoder-only causal LM (exact likelihood of
    every pool name), and report the paper's tables 1-3. Writes OUT/results.json and OUT/ucm.png. Without --model,
    the bundled all-MiniLM-L6-v2 encoder."""

    models = settings_from(UcmModels, given_settings(args, UcmModels))
    settings = settings_from(UcmSettings, given_settings(args, UcmSettings))
    batch = given_settings(args, BatchSizeFlag)  # one value for every ranker, each one's default where not given
    ranker_settings = RankerSettings(
        mask_predict=settings_from(MaskPredictSettings, {**given_settings(args, MaskPredictSettings), **batch},
                                   base=PAPER_DECODING),
        mask_average=settings_from(MaskAverageSettings, {**given_settings(args, MaskAverageSettings), **batch}),
        retrieval=settings_from(RetrievalRankerSettings, {**given_settings(args, RetrievalRankerSettings), **batch}),
        causal_likelihood=settings_from(LikelihoodSettings, {**given_settings(args, LikelihoodSettings), **batch}))
    request = UcmRun(sets=args.sets, models=models, settings=settings, rankers=ranker_settings, device=args.device,
                     out=args.out, overwrite=args.overwrite, refuse_finished=True, progress=progress_enabled(),
                     spelling=FLAGS)
    with human_output(args):
        results, written = run_ucm(request)
        for result in results:
            cut = (f" ({result.num_records_truncated:,} more left out: an input over the model's length limit)"
                   if result.num_records_truncated else "")
            print(f"{result.label}: {result.settings.get('method')} ranker, {result.num_sequences:,} sequences, "
                  f"{result.num_records:,} records{cut}, {result.seconds:.1f} s")
        print(f"wrote {', '.join(str(path) for path in written)}")
    if args.json:
        print_results(args.out / RESULTS_FILE)
    return 0
