"""Bytes per logit element that a compiled Hugging Face-style LM head and loss keeps: a measurement.

    python benchmarks/compiled_loss_bytes.py [--tokens 2048] [--vocab 32768] [--dim 256]

The Hugging Face Trainer's ``torch_compile`` compiles the whole model, whose forward ends as
LlamaForCausalLM's: ``logits = lm_head(h).float()``, the shifted cross entropy, and the fp32 logits returned
beside the loss. This script compiles that head and loss with torch.compile (Inductor) and reports what the
compiled graphs hold per logit element (tokens × vocabulary):

- on a CUDA device: the allocator's peak over a forward and backward, less the inputs, against eager PyTorch's
  (constants.toml ``logits_bytes_per_element``: 12);
- on a CPU: the tensors the forward keeps for the backward (AOTAutograd's partition, as Inductor uses it) and
  whether the backward receives a materialised zero gradient for the unused fp32 logits output.

Read with torch 2.13 on a CPU: the forward keeps the returned fp32 logits buffer (4) with each row's max and
log-sum-exp, the backward gets a zero fp32 tangent for the logits (4) and writes the bf16 gradient (2): 10
(constants.toml ``compiled_logits_bytes_per_element``).
"""

from __future__ import annotations

import argparse


def head_and_loss(head, vocab: int):
    """transformers' LlamaForCausalLM head and loss (v4.44): fp32 logits, shifted cross entropy, logits returned."""
    import torch.nn.functional as F

    def f(h, labels):
        logits = head(h).float()
        shifted = logits[..., :-1, :].contiguous()
        return F.cross_entropy(shifted.view(-1, vocab), labels[..., 1:].reshape(-1)), logits

    return f


def main() -> None:
    import torch

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=2048)
    p.add_argument("--vocab", type=int, default=32768)
    p.add_argument("--dim", type=int, default=256)
    a = p.parse_args()
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    head = torch.nn.Linear(a.dim, a.vocab, bias=False, device=dev, dtype=torch.bfloat16)
    n = a.tokens * a.vocab
    h = torch.randn(1, a.tokens, a.dim, device=dev, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, a.vocab, (1, a.tokens), device=dev)
    for name, fn in (("eager", head_and_loss(head, a.vocab)), ("compiled", None)):
        if fn is None:
            fn = torch.compile(head_and_loss(head, a.vocab))
            fn(h, labels)[0].backward()  # compile outside the measurement
        if cuda:
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            loss, _ = fn(h, labels)
            loss.backward()
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - base
            print(f"{name}: {peak / n:.2f} bytes per logit element at the peak")
    if not cuda:
        cpu_partition(head_and_loss(head, a.vocab), h, labels, n)


def cpu_partition(f, h, labels, n: int) -> None:
    """What the forward keeps for the backward and the backward's tangents, per logit element."""
    import torch
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    def fw(gm, _):
        out = next(x for x in gm.graph.nodes if x.op == "output").args[0]
        kept = [o.meta["val"] for o in out[2:] if hasattr(o, "meta") and "val" in o.meta]
        print(
            f"forward keeps {sum(t.numel() * t.itemsize for t in kept) / n:.2f} bytes per logit element"
        )
        return make_boxed_func(gm)

    def bw(gm, _):
        def run(args):
            zeros = [x for x in args if torch.is_tensor(x) and x.numel() >= n and not x.any()]
            print(f"backward receives {sum(t.numel() * t.itemsize for t in zeros) / n:.2f} bytes per logit "
                  "element of materialised zero gradients")  # fmt: skip
            return gm(*args)

        run._boxed_call = True
        return run

    backend = aot_autograd(
        fw_compiler=fw, bw_compiler=bw, partition_fn=min_cut_rematerialization_partition
    )
    torch.compile(f, backend=backend)(h, labels)[0].backward()


if __name__ == "__main__":
    main()
