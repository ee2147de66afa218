"""The checkpointing an exported run does: the interval the estimate priced, in the engine's steps.

The estimate's goodput model (trilemma.estimate.goodput) prices a run that saves a checkpoint after every
τ seconds of compute, τ Daly's optimum for the write time δ and the cluster's MTBF M (Daly 2006), and that
restarts from the last checkpoint after each failure. An engine counts in optimizer steps, so the exported
interval is N = round(τ / step time), at least 1 and at most the run's steps; the compute between saves is
then N × step, within half a step of τ. Where the engine has asynchronous saves they are switched on: the
model charges each write δ of stopped training, an upper bound that an asynchronous save only lowers.
Each exporter writes N with the engine's own option (Megatron-LM --save-interval, torchtitan
[checkpoint] interval, Hugging Face TrainingArguments save_steps) and a resume from the latest save.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trilemma.units import fmt_duration


@dataclass(frozen=True)
class Checkpointing:
    """The priced checkpointing of one plan: seconds, and the interval in optimizer steps."""

    interval_s: float  # τ: compute between checkpoints the goodput model assumed
    every_steps: int  # N = round(τ / step), in [1, steps]
    step_s: float  # one optimizer step, s
    write_s: float  # δ: one checkpoint write, s
    mtbf_s: float  # M: the job's mean time between interruptions, s
    restart_s: float  # R: a failure to training again, s

    @classmethod
    def of(cls, est: Any, steps: int) -> Checkpointing | None:
        """From an Estimate's failure model (time.reliability) and step time; None when the plan gave its
        goodput (--goodput) instead of the model, which then priced no interval."""
        r = est.time.reliability
        if est.time.goodput_given or not r or not est.time.step_s > 0:
            return None
        tau, step = float(r["checkpoint_interval_s"]), float(est.time.step_s)
        return cls(
            interval_s=tau,
            every_steps=int(min(max(1, round(tau / step)), max(1, steps))),
            step_s=step,
            write_s=float(r["checkpoint_write_s"]),
            mtbf_s=float(r["mtbf_s"]),
            restart_s=float(r["inputs"]["restart_s"]),
        )

    def note(self, how: str) -> str:
        """The exported interval and why, with ``how`` the engine's options that carry it."""
        return (
            f"checkpoint every {self.every_steps} steps ({how}): the estimate's interval "
            f"{fmt_duration(self.interval_s)} of compute (Daly 2006's optimum for a "
            f"{fmt_duration(self.write_s)} write and the job's {fmt_duration(self.mtbf_s)} MTBF) over "
            f"a {fmt_duration(self.step_s)} step; a failure resumes from the latest save after "
            f"~{fmt_duration(self.restart_s)} of restart, as the goodput was priced"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "every_steps": self.every_steps,
            "interval_s": self.interval_s,
            "step_s": self.step_s,
            "write_s": self.write_s,
            "mtbf_s": self.mtbf_s,
            "restart_s": self.restart_s,
        }


def megatron_args(c: Checkpointing | None, fsdp: bool) -> list[tuple[str, Any]]:
    """Megatron-LM's checkpoint options (megatron/training/arguments.py at d98e8a64): the format (Megatron-FSDP
    requires fsdp_dtensor, validate_args; torch_dist otherwise, the distributed format), --save-interval N,
    and --async-save, which with a distributed format needs --use-persistent-ckpt-worker (else validate_args
    switches it off). --save and --load (the resume) are the launch script's."""
    a: list[tuple[str, Any]] = [("--ckpt-format", "fsdp_dtensor" if fsdp else "torch_dist")]
    if c is None:
        return a
    return a + [
        ("--save-interval", c.every_steps),
        ("--async-save", None),
        ("--use-persistent-ckpt-worker", None),
    ]


def torchtitan_section(c: Checkpointing | None) -> dict[str, Any]:
    """torchtitan's [checkpoint] (0.2.2 config/job_config.py Checkpoint): enabled every N steps into
    {dump_folder}/checkpoint, asynchronous (torch.distributed.checkpoint.async_save), full saves to the end
    (last_save_model_only false keeps the final save resumable); load_step -1 resumes from the latest."""
    if c is None:
        return {"enable": False}
    return {
        "enable": True,
        "folder": "checkpoint",
        "interval": c.every_steps,
        "async_mode": "async",
        "last_save_model_only": False,
        "load_step": -1,
    }


def trainer_arguments(c: Checkpointing | None) -> dict[str, Any]:
    """Hugging Face TrainingArguments' saving (save_strategy steps, save_steps N); the script resumes with
    trainer.train(resume_from_checkpoint=...) when output_dir holds a checkpoint. The Trainer saves
    synchronously: it has no asynchronous save."""
    if c is None:
        return {"save_strategy": "no"}
    return {"save_strategy": "steps", "save_steps": c.every_steps}


__all__ = ["Checkpointing", "megatron_args", "torchtitan_section", "trainer_arguments"]
