"""MedLAMA as an MTEB retrieval task: ``task`` (the task class and ``medlama.mteb_task``; needs the ``mteb``
extra), ``data`` (the task's data, shared with the export) and ``export`` (``medlama export mteb``)."""
