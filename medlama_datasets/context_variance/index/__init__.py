"""The corpus index of a context-variance build: an entity -> documents index, built once per corpus and reused.

* :mod:`.corpus_index`  :class:`~.corpus_index.CorpusIndex`, the read side (open, check, retrieve) and the layout;
* :mod:`.format`        the on-disk format's constants, postings buckets and entity payload;
* :mod:`.forms`         the surface-form table (``forms.json``);
* :mod:`.pipeline`      the ``datatrove`` pipeline that builds an index from corpus files (local, Slurm, Ray);
* :mod:`.steps`         its stages as ``datatrove`` pipeline steps, and its work folder;
* :mod:`.build`         the in-process writer (:meth:`CorpusIndex.build <.corpus_index.CorpusIndex.build>`),
  whose chunk matching the pipeline reuses.
"""
