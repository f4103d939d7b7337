"""Training: Contrastive-Probe rewiring of encoders for probing, and OptiPrompt's learned prompts.

``config`` (:class:`RewireConfig` and its presets), ``cloze`` (cloze pairs from corpus sentences),
``model`` (the encoder a rewiring trains), ``loss`` (:class:`ClozeInfoNCELoss`), ``devices`` (processes and
precision), ``checkpoints`` (listing, atomic saving, resuming), ``trainer`` (:func:`rewire`), ``model_card``;
``optiprompt`` (a relation's learned prompt).
"""
