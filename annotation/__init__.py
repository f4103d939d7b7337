"""Expert judgement of probe predictions, as the paper's section 5.3 (Figure 8): blind rating sheets and
their scoring (``medlama annotate export`` and ``medlama annotate score``).

* :mod:`~medlama.annotation.sheet`: the sheet (sampled queries, the runs' pooled top-k shown blind), its
  five levels, the seeded stratified sample and the manifest tying it to the runs;
* :mod:`~medlama.annotation.export`: the files raters get (``annotate.html``, ``sheet.csv``, Label Studio tasks
  and labeling config) and the manifest, written atomically;
* :mod:`~medlama.annotation.page`: ``annotate.html``, the self-contained rating page;
* :mod:`~medlama.annotation.label_studio`: the Label Studio tasks, labeling config and exports;
* :mod:`~medlama.annotation.ratings`: one rater's file (the page's JSON, the filled CSV or Label Studio's
  export), checked against the sheet;
* :mod:`~medlama.annotation.scoring`: Figure 8's confusion matrix, acc@k under UMLS and expert answers with
  paired intervals and McNemar's test, and inter-rater agreement;
* :mod:`~medlama.annotation.figure`: the tables and Figure 8's plot;
* :mod:`~medlama.annotation.design`: which queries a sheet holds (``--strategy stratified|uncertainty``) and
  each one's inclusion probability;
* :mod:`~medlama.annotation.estimate`: the whole run's expert acc@k from a rated sheet, by prediction-powered
  inference (``medlama annotate estimate``).
"""

from medlama.annotation.export import ExportSettings, export_sheet
from medlama.annotation.scoring import ScoreSettings, score_sheet

__all__ = ["ExportSettings", "ScoreSettings", "export_sheet", "score_sheet"]
