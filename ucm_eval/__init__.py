"""UCM evaluation (context variance, Yao et al.): load the context sets, rank each object pool at every
context step, build the U/C/M records, score them with the UCM metric and report.

Modules, in the order the workflow uses them: :mod:`~medlama.ucm_eval.sets` (the built context sets),
:mod:`~medlama.ucm_eval.context_ranker` (the ranker interface), :mod:`~medlama.ucm_eval.rankers` (the
mask-average, retrieval and causal-likelihood rankers, their settings, ``make_ranker``),
:mod:`~medlama.ucm_eval.records` (ranks per input and the rank-change records), :mod:`~medlama.ucm_eval.scores`
(UCM and acc@k through the metric modules), :mod:`~medlama.ucm_eval.report` (tables, plot, JSON) and
:mod:`~medlama.ucm_eval.evaluation` (``run``, the one UCM run behind ``medlama ucm`` and the Python API's
``medlama.ucm``, which this package is not named after so that the two never shadow each other).
"""
