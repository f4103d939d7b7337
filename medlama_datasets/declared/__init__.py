"""One module per dataset, each holding its ``DECLARATION`` (:class:`medlama.datasets.registry.Declaration`);
:func:`medlama.datasets.registry.declarations` finds every module here, so none is listed anywhere."""
