"""trilemma export: llama2-7b as torchtitan llama3 flavor "trilemma" (imported through
[experimental] custom_import before the trainer looks the flavor up; torchtitan v0.2.2 train.py)."""

from torchtitan.models.llama3 import TransformerModelArgs, llama3_args

llama3_args["trilemma"] = TransformerModelArgs(
    dim=4096,
    n_layers=32,
    n_heads=32,
    n_kv_heads=32,
    vocab_size=32000,
    multiple_of=256,
    ffn_dim_multiplier=None,
)
