"""UCM evaluation (context variance, Yao et al.): load the context sets, rank each object pool at every
context step, build the U/C/M records, score them with the UCM metric and report.

Modules, in the order the workflow uses them: :mod:`~medlama.ucm.sets` (the built context sets),
:mod:`~medlama.ucm.rankers` (mask-average and retrieval rankers, their settings, ``make_ranker``),
:mod:`~medlama.ucm.records` (ranks per input and the rank-change records), :mod:`~medlama.ucm.scores`
(UCM and acc@k through the metric modules), :mod:`~medlama.ucm.report` (tables, plot, JSON) and
:mod:`~medlama.ucm.evaluation` (``evaluate_model``, ``run_ucm``).
"""
