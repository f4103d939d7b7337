"""The rewire-then-probe recipe (the main job): probe, rewire with Contrastive-Probe, probe again
(:mod:`medlama.recipe.workflow`), and the held-out cloze self-retrieval check (:mod:`medlama.recipe.heldout`)."""
