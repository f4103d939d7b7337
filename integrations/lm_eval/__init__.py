"""MedLAMA as lm-evaluation-harness tasks (``medlama export lm-eval``): ``tasks`` writes them, ``readme`` their
README, and ``task_utils`` is copied beside them as the ``utils.py`` that lm-eval runs."""
