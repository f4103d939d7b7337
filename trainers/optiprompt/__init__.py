"""OptiPrompt: ``trainer`` trains one relation's prompt vectors, ``run`` every relation of a BioLAMA folder
(``medlama optiprompt`` and ``medlama.optiprompt``), and ``card`` writes the learned prompts' model card."""
