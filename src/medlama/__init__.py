"""medlama: probe what pre-trained language models know about biomedicine.

The toolkit's parts, one job each:

* ``medlama.datasets``  builders that turn MedLAMA, BioLAMA and context-variance sets into
  Hugging Face dataset folders (``medlama_datasets/`` in the repository);
* ``medlama.loaders``   readers of raw releases and corpora (``loaders/``);
* ``medlama.metrics``   the acc@k and UCM ``evaluate`` modules (``metrics/``);
* ``medlama.trainers``  Contrastive-Probe rewiring (``trainers/``);
* ``medlama.cli``       the ``medlama`` command.
"""

__version__ = "0.1.0"
