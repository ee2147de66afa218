"""The planner's constants as one frozen input: stated defaults (presets/constants.toml) overlaid with
the fitted ones (presets/calibrated.toml). Estimators receive it explicitly (``evaluate(..., consts)``),
so a calibration can try other values without touching any global.

Sections and keys are those of constants.toml; every value is read-only. ``with_values`` returns a
changed copy (what the fit in trilemma.validate.fit does on each trial).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any


class Constants(Mapping[str, Mapping[str, Any]]):
    """Read-only ``{section: {key: value}}``; ``consts["memory"]["fragmentation"]``."""

    __slots__ = ("_sections",)

    def __init__(self, sections: Mapping[str, Mapping[str, Any]]):
        self._sections = MappingProxyType(
            {s: MappingProxyType(dict(v)) for s, v in sections.items()}
        )

    def __getitem__(self, section: str) -> Mapping[str, Any]:
        return self._sections[section]

    def __iter__(self) -> Iterator[str]:
        return iter(self._sections)

    def __len__(self) -> int:
        return len(self._sections)

    def __hash__(self) -> int:
        return id(self)

    def __deepcopy__(self, memo: dict) -> Constants:
        return self  # immutable

    def __reduce__(self) -> tuple[type, tuple[dict[str, dict[str, Any]]]]:
        return Constants, (
            self.to_dict(),
        )  # to other processes (leave-one-source-out runs in parallel)

    def with_values(self, values: Mapping[tuple[str, str], Any]) -> Constants:
        """A copy with ``{(section, key): value}`` changed (sections are created as needed)."""
        out = {s: dict(v) for s, v in self._sections.items()}
        for (sec, key), v in values.items():
            out.setdefault(sec, {})[key] = v
        return Constants(out)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {s: dict(v) for s, v in self._sections.items()}

    def __repr__(self) -> str:
        return f"Constants({self.to_dict()!r})"


__all__ = ["Constants"]
