"""The candidates' token trie of the causal probers: nested ``{token: child}`` over each candidate's token ids
followed by its closing tokens (:func:`candidate_trie`; ``node[END]`` marks where a candidate ends, also
halfway down a longer one's path), walked by ``causal-constrained``'s beam search (:class:`TrieTokens`, its
logits processor and stopping criterion) and by ``causal-likelihood``'s best-first search
(:mod:`medlama.probers.causal.search`)."""

from __future__ import annotations


#: The key of a trie node where a candidate ends (its value: the candidate's token ids).
END = -1


def candidate_trie(sequences: list[tuple[int, ...]], close: tuple[int, ...]) -> dict:
    """Nested ``{token: child}`` over each sequence followed by ``close``; ``node[END]`` marks where one ends.

    A candidate that is a prefix of another ends halfway down the other's path, at its closing tokens.
    """
    root: dict = {}
    for sequence in sequences:
        if not sequence:
            continue
        node = root
        for token in (*sequence, *close):
            node = node.setdefault(token, {})
        node[END] = tuple(sequence)
    return root


def walk(trie: dict, tokens) -> dict | None:
    """The node reached by ``tokens`` (None: off the trie), stopping at the first candidate's end."""
    node = trie
    for token in tokens:
        if END in node:
            return node
        node = node.get(token)
        if node is None:
            return None
    return node


class TrieTokens:
    """Logits processor allowing only the trie's next tokens (a beam off the trie or past an end: ``filler``).

    Beam search hands processors log-softmaxed logits, so ``seen[(query, tokens so far)]`` keeps the model's
    log-probabilities of the allowed next tokens, to score finished candidates without ``output_scores``.
    """

    def __init__(self, tries: list[dict], width: int, filler: int) -> None:
        self.tries, self.width, self.filler = tries, width, filler
        self.seen: dict[tuple[int, tuple[int, ...]], dict[int, float]] = {}

    def __call__(self, input_ids, scores):
        import torch  # torch only once a beam search runs

        per_query = input_ids.shape[0] // len(self.tries)
        rows, cols, keys = [], [], []
        for row, sequence in enumerate(input_ids[:, self.width:].tolist()):
            node = walk(self.tries[row // per_query], sequence)
            allowed = [token for token in node or () if token != END] or [self.filler]
            on_trie = node is not None and END not in node
            keys += [(row // per_query, tuple(sequence)) if on_trie else None] * len(allowed)
            rows += [row] * len(allowed)
            cols += allowed
        at = (torch.tensor(rows, device=scores.device), torch.tensor(cols, device=scores.device))
        out = torch.full_like(scores, float("-inf"))
        out[at] = scores[at]
        for key, token, value in zip(keys, cols, scores[at].tolist()):
            if key is not None:  # a beam's duplicate (same tokens so far) keeps the first beam's values
                self.seen.setdefault(key, {}).setdefault(token, value)
        return out

    def done(self, input_ids, scores=None, **kwargs):
        """Stopping criterion: a beam is finished when it has closed a candidate (or left the trie)."""
        import torch  # torch only when a model runs

        per_query = input_ids.shape[0] // len(self.tries)
        done = [(node := walk(self.tries[row // per_query], sequence[self.width:])) is None or END in node
                for row, sequence in enumerate(input_ids.tolist())]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)
