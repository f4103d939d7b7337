"""Pages for people to look through results (a workflow layer over :mod:`medlama.probers`):

* :mod:`~medlama.reports.results_page`: ``medlama report``'s entry point (:func:`write_report`) and settings;
* :mod:`~medlama.reports.page_data`: what the page shows, from ``medlama compare``'s runs and record;
* :mod:`~medlama.reports.page`: the self-contained HTML (its script and style in ``assets/``).
"""

from medlama.reports.results_page import ReportSettings, report_record, write_report

__all__ = ["ReportSettings", "report_record", "write_report"]
