"""Publishing to the Hugging Face Hub: built dataset folders (``push-dataset``), rewired models (``push-model``),
probe results (``push-results``: :mod:`.results_push`) and metric modules (``push-metric``). This module
gathers the public API of the modules doing each job:

* :mod:`.upload`: the upload tree and its manifest, the dry run, the local-path check and the upload itself;
* :mod:`.dataset_push`: datasets, their gating and their licences;
* :mod:`.model_push`: models, with public names for local paths;
* :mod:`.metric_push`: metric modules as ``evaluate`` Spaces.

Each command first writes the *upload tree*, the exact files that go to the repository, and then either
uploads it (``HfApi.upload_folder``, one commit) or, with ``dry_run=DIR``, leaves it for inspection:

* ``DIR/<repo name>/`` (datasets, metrics) or ``DIR/files/`` (models): the upload tree. A dataset tree loads
  with ``load_dataset(str(tree), config)``, a metric tree with ``evaluate.load(str(tree))``, a model tree with
  ``SentenceTransformer(str(tree))``, exactly as the repository will for anyone;
* ``DIR/manifest.json``: repository, type, revision, privacy, gating, commit message, and every file with
  its size and SHA-256 (and, for the local record only, the folder it came from).

A dry-run folder is written atomically and records the command that wrote it (``push-dataset``,
``push-model``, ``push-metric``: :data:`medlama.core.atomic.OWNER_NAME` in ``DIR``, beside the tree, so never
uploaded); only that command replaces it, and two dry runs into one ``DIR`` at once are refused. A real
upload whose Hub cannot be reached (or refuses it) is a clear error naming the repository, the step and the
cause, never a traceback, never the token.

Only what medlama wrote goes up: a dataset folder must have been written by a ``medlama build`` command and
a model folder by ``medlama rewire`` (their ownership records), and every file uploaded must have the size
and SHA-256 recorded when it was written (:func:`medlama.core.integrity.check_vouched`): a hand-made card, a file
added by hand or weights cut short are refused, naming the file.

No uploaded file names a local path (:mod:`medlama.publishing.public_names`): the local copy keeps them.
A last check over every text file of the tree (:func:`check_tree_names_no_local_path`, before any upload and
for dry runs) refuses the push when one still names the home folder, the Python environment
(``sys.prefix``, ``sys.base_prefix``), a site-packages folder, or the folder being pushed or its parent.

Datasets: the tree is the folder's ``README.md`` (the card with its ``configs``, its load instructions naming
the repository), ``build_info.json`` and every file a config's ``data_files`` names; nothing else. For
UMLS-derived data (MedLAMA; BioLAMA when it holds the ``umls`` source; context-variance sets built from either:
the card's ``umls`` tag) the card gets gated-access metadata (``gated``, ``extra_gated_prompt`` and
``extra_gated_fields``, a UMLS-licence checkbox; the built folder's own card has them too) and the repository
is set to gated (manual approval by default) before any file is uploaded; such data is only pushed gated or
private. The sources of a context-variance set each record their licence in ``build_info.json`` and the card
(:mod:`medlama.datasets.licences`), and the decision is taken from the folder whatever reader brought the text
in: deny by default, a set is pushed publicly only when every source's licence allows redistribution. Data
quoting MIMIC notes (read as ``mimic``, or JSON Lines / text carrying MIMIC's columns: the ``mimic`` tag) may
not be redistributed under the PhysioNet data use agreement, and a source whose licence was not declared is
``unknown``: either is only pushed private. ``build_info.json`` goes up without local paths: path-like fields
keep only their last part.

Models (:func:`plan_model`): every file of the model folder except hidden files and the ``checkpoints/``
folder; with ``include_checkpoints`` the checkpoint models too (for the performance-over-steps curve),
without their optimizer, scheduler and RNG states. ``rewire_config.json`` goes up with the base model's
public name, corpus file names and a path-free command line; ``README.md`` (and any other file naming one
of those local paths) likewise. A file that would still name a local path stops the push. The card names the
repository it goes to (:func:`medlama.trainers.model_card.card_for_repo`: the usage snippet and the
``model-index`` name; sentence-transformers' training-pair widgets dropped), and each checkpoint's card is
replaced by one saying where it sits in the repository and how to load it.

Metrics: an ``evaluate`` community module is a Space whose script is named after the repository
(``evaluate.load("<user>/<name>")`` fetches ``<name>.py``): the tree is ``<name>.py`` (the module's script,
unchanged, renamed if the repository name differs), its ``README.md`` card (with the load path updated),
``requirements.txt`` and a Gradio ``app.py`` widget (:mod:`medlama.metrics.space_app`: blank optional
columns mean "not given").

The token comes from the ``token`` argument, ``HF_TOKEN`` or the standard ``hf auth login``; it is never
printed or written.
"""

from __future__ import annotations

from medlama.datasets.licences import GATED_FIELDS, GATED_PROMPT, MIMIC_TAG, UMLS_TAG
from medlama.publishing.dataset_push import (
    DATASET_EXTRA_FILES,
    GATE_MODES,
    check_licences_allow,
    is_mimic_derived,
    is_umls_derived,
    mimic_source_names,
    plan_dataset,
    push_dataset,
    source_licences,
)
from medlama.publishing.metric_push import APP_PLACEHOLDER, METRIC_FILES, metric_folder, push_metric, space_app_text
from medlama.publishing.model_push import MODEL_RECORD, MODEL_TREE, plan_model, push_model
from medlama.publishing.results_push import push_results
from medlama.publishing.upload import (
    BINARY_SUFFIXES,
    MANIFEST_NAME,
    check_repo_id,
    check_tree_names_no_local_path,
    local_paths,
)

__all__ = [
    "APP_PLACEHOLDER", "BINARY_SUFFIXES", "DATASET_EXTRA_FILES", "GATED_FIELDS", "GATED_PROMPT", "GATE_MODES",
    "METRIC_FILES", "MIMIC_TAG", "MANIFEST_NAME", "MODEL_RECORD", "MODEL_TREE", "UMLS_TAG", "check_licences_allow",
    "check_repo_id", "check_tree_names_no_local_path", "is_mimic_derived", "is_umls_derived", "local_paths",
    "metric_folder", "mimic_source_names", "plan_dataset", "plan_model", "push_dataset", "push_metric", "push_model",
    "push_results", "source_licences", "space_app_text",
]
