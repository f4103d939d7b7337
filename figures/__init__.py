"""The papers' figures drawn from what runs recorded: a PNG and the figure's data as JSON (with provenance) each.

* :mod:`medlama.figures.tokens`: figure 1 (right) of Rewire-then-Probe, MedLAMA's answers by number of tokens,
  with the paper's 2.6% single-token figure reconciled against the dataset card's two counts;
* :mod:`medlama.figures.steps`: figure 4, acc@k over rewiring steps, mean and std over the rewiring corpora,
  micro average and the top relations' panels (``medlama recipe --probe-checkpoints``' record);
* :mod:`medlama.figures.layers`: figure 7, a layer x relation map (``medlama probe --layers``' runs);
* :mod:`medlama.figures.sweep` and :mod:`medlama.figures.sweep_plot`: the sweep driver over learning rate,
  tau, mask ratio and corpus size (figure 9, appendix A.2-A.3), resumable point by point, and its figure.

Every figure goes through :func:`medlama.figures.output.write_figure`. This package reads runs, so it sits at
the workflow layer: it imports probers, trainers and datasets, and nothing below imports it.
"""
