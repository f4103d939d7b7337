"""UCM evaluation (context variance, Yao et al.): load the context sets, rank each object pool at every
context step, build the U/C/M records, score them with the UCM metric and report.

Modules, in the order the workflow uses them: :mod:`~medlama.ucm.sets` (the built context sets),
:mod:`~medlama.ucm.rankers` (mask-average and retrieval rankers, their settings, ``make_ranker``),
:mod:`~medlama.ucm.records` (ranks per input and the rank-change records), :mod:`~medlama.ucm.scores`
(UCM and acc@k through the metric modules), :mod:`~medlama.ucm.report` (tables, plot, JSON) and
:mod:`~medlama.ucm.evaluation` (``evaluate_model``, ``run_ucm``).
"""

import sys as _sys
import types as _types


class _CallableModule(_types.ModuleType):
    """``medlama.ucm`` is both this package and the Python API's function :func:`medlama.api.ucm`: once the
    package is imported it shadows the lazily exported function, so calling the package does what that function
    does (:func:`medlama.ucm.evaluation.score_sets`; nothing here imports the API above it)."""

    def __call__(self, *args, **kwargs):
        from medlama.ucm.evaluation import score_sets

        return score_sets(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule
