"""The exported plan: the engine's files (text, as written), the same settings as data, the plan's
integers, and notes saying what the user still sets (data, tokenizer) and where the recipe came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from trilemma.export.plan import PlanNumbers

SCHEMA = "trilemma.export/1"


@dataclass(frozen=True)
class ExportDocument:
    """One plan as one engine's config. ``files``: name → text; ``config``: the same settings as
    data (the parsed TOML / JSON / argument list); ``engine_version``: the release or commit whose
    argument names the files use."""

    SCHEMA: ClassVar[str] = SCHEMA

    engine: str
    engine_version: str
    files: dict[str, str]
    config: dict[str, Any]
    numbers: PlanNumbers
    plan: dict[str, Any]  # what was exported: model, hardware, GPUs, precision, and the source verb
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of ``--export`` / ``trilemma export --json``."""
        return {
            "schema": self.SCHEMA,
            "engine": self.engine,
            "engine_version": self.engine_version,
            "plan": self.plan,
            "numbers": self.numbers.to_dict(),
            "config": self.config,
            "files": dict(self.files),
            "notes": list(self.notes),
            "warnings": list(self.warnings),
        }


__all__ = ["SCHEMA", "ExportDocument"]
