"""Write a randomly initialised, real-size BERT encoder (and its tokenizer) to a folder, for speed benchmarks.

Speed does not depend on the weights, so a random BERT-base (110M parameters) stands in for PubMedBERT /
BioBERT where no pre-trained checkpoint can be downloaded (CI, an offline GPU machine):

    python benchmarks/make_random_encoder.py OUT                       # BERT-base, the bundled model's vocabulary
    python benchmarks/make_random_encoder.py OUT --size large --tokenizer path/to/tokenizer

The folder loads like a user's checkpoint (``AutoModel.from_pretrained``), so ``medlama probe --model OUT``
and ``medlama rewire --model OUT`` take it as they take a real one. Accuracy figures from it mean nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

SIZES = {"base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
         "large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--size", choices=sorted(SIZES), default="base")
    parser.add_argument("--tokenizer", help="tokenizer folder (default: the bundled all-MiniLM-L6-v2's, BERT's "
                                            "30,522-token uncased vocabulary)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    if args.tokenizer is None:
        from medlama.core.defaults import default_model_path

        args.tokenizer = str(default_model_path())
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    config = BertConfig(vocab_size=len(tokenizer), max_position_embeddings=512, **SIZES[args.size])
    torch.manual_seed(args.seed)
    model = BertForMaskedLM(config)  # with its MLM head, so the masked-LM probers can use it too
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    count = sum(p.numel() for p in model.parameters())
    print(f"{args.out}: random BERT-{args.size}, {count / 1e6:.0f}M parameters, vocabulary {len(tokenizer):,}")


if __name__ == "__main__":
    main()
