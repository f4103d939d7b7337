"""medlama: probe what pre-trained language models know about biomedicine.

The toolkit's parts, one job each, bottom floor first (imports run only down this list):

* ``medlama.core``           shared helpers: settings, errors, atomic writes, provenance, models (``core/``);
* ``medlama.loaders``        readers of raw releases and corpora (``loaders/``);
* ``medlama.metrics``        the acc@k and UCM ``evaluate`` modules (``metrics/``);
* ``medlama.dataset_cards``  the dataset cards' templates (``dataset_cards/``);
* ``medlama.datasets``       builders that turn MedLAMA, BioLAMA and context-variance sets into
  Hugging Face dataset folders (``medlama_datasets/``);
* ``medlama.probers``        the probing methods and what scores with a model (``probers/``);
* ``medlama.runs``           one probe run: queries, the run, its result and files (``runs/``);
* ``medlama.trainers``       Contrastive-Probe rewiring and OptiPrompt (``trainers/``);
* ``medlama.analysis``       comparing runs with paired statistics (``analysis/``);
* ``medlama.ucm_eval``       UCM evaluation (``ucm_eval/``);
* ``medlama.integrations``   MTEB, lm-evaluation-harness and the trainer callback (``integrations/``);
* ``medlama.recipe``         rewire -> probe -> report (``recipe/``);
* ``medlama.figures``        the papers' figures (``figures/``);
* ``medlama.reports``        the results page (``reports/``);
* ``medlama.annotation``     expert rating sheets (``annotation/``);
* ``medlama.publishing``     pushes to the Hugging Face Hub (``publishing/``);
* ``medlama.cli``            the ``medlama`` command.

The Python API (:mod:`medlama.api`): ``medlama.probe``, ``medlama.load_medlama``, ``medlama.rewire``,
``medlama.optiprompt`` (learned prompts for mask predict), ``medlama.ucm``, ``medlama.compare``,
``medlama.consistency`` (facts known both ways), ``medlama.frequency`` (acc@k against corpus frequency),
``medlama.report`` (a results page), ``medlama.annotate_export``, ``medlama.annotate_score`` and
``medlama.annotate_estimate`` (expert rating sheets, and the whole run's expert acc@k estimated from one) and
``medlama.mteb_task`` (MedLAMA as an MTEB retrieval task), loaded on first use so that
``import medlama`` stays light.
"""

__version__ = "0.1.0"

_API = ("probe", "load_medlama", "rewire", "optiprompt", "ucm", "compare", "consistency", "frequency", "report",
        "annotate_export", "annotate_score", "annotate_estimate", "mteb_task")
__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        # medlama.api loads on first use, so `import medlama` stays light
        from medlama import api

        return getattr(api, name)
    raise AttributeError(f"module 'medlama' has no attribute {name!r}")
