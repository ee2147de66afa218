"""matplotlib for the plotting commands (`fit --plot`, `solve --plot`, `ladder --plot`): imported on
first use only (the planner never imports it), with the Agg backend; a missing install or an unwritable
path is an InputError on the ``plot`` field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trilemma.errors import InputError

__all__ = ["pyplot", "save_figure"]

INSTALL = "matplotlib installed (pip install 'trilemma[plot]')"


def pyplot(path: str | Path) -> Any:
    """``matplotlib.pyplot`` on the Agg backend, else an InputError naming the plot ``path``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("plot", str(path), INSTALL) from None
    return plt


def save_figure(fig: Any, path: str | Path, dpi: int = 120) -> Path:
    """Write ``fig`` to ``path`` and close it; an unwritable path is an InputError."""
    import matplotlib.pyplot as plt

    p = Path(path)
    try:
        fig.savefig(p, dpi=dpi)
    except OSError as exc:
        raise InputError("plot", str(path), f"a writable image path ({exc.strerror})") from None
    finally:
        plt.close(fig)
    return p
