"""One torchrun rank of ``trilemma probe --nproc N``: ``python -m trilemma.probe.worker JOB.json``.

Joins the process group (gloo on a CPU, NCCL on GPUs), trains the job, and rank 0 writes the
figures (or the input error that stopped it) to the result path named in the job file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    import torch.distributed as dist

    from trilemma.errors import InputError
    from trilemma.probe.train import Job, run_training

    doc = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    job = Job.from_dict(doc["job"])
    dist.init_process_group("nccl" if job.device == "cuda" else "gloo")
    rank = dist.get_rank()
    out = Path(doc["result"])
    try:
        figures = run_training(job)
    except InputError as exc:
        if rank == 0:
            out.write_text(
                json.dumps(
                    {"error": {"field": exc.field, "value": str(exc.value), "allowed": exc.allowed}}
                )
            )
        return 2
    if rank == 0:
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(figures), encoding="utf-8")
        tmp.replace(out)
    if not figures["interrupted"]:
        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
