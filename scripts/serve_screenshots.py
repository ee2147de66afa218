"""Regenerate the screenshots of `trilemma serve` kept under docs/:

    python scripts/serve_screenshots.py            # docs/serve.png, docs/serve-frontier.png

- ``serve.png``: the default view as a new user sees it, a 1280×800 window (the page's opening
  solve: deadline 30 days, budget $2M, lowest loss), the inputs beside the plan;
- ``serve-frontier.png``: the frontier of that solve, the points inside the pins coloured on the
  range of the losses shown.

The server runs in this process on a free localhost port; the browser is Debian's Chromium driven by
Playwright (trilemma.web.testing). tests/test_serve_page.py calls ``take`` and reads the frontier
screenshot's colours.
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VIEWPORT = {"width": 1280, "height": 800}
WAIT_MS = 20_000

#: the centre of each marker inside the pins that the plot area shows, in CSS pixels from the top
#: left of #frontier (markers the axes clip away are left out)
SHOWN_CENTRES = """() => {
  const plot = document.querySelector('#frontier'), box = plot.getBoundingClientRect();
  const area = plot.querySelector('.nsewdrag').getBoundingClientRect();
  const inside = plot.querySelectorAll('.scatterlayer .trace')[1].querySelectorAll('path.point');
  return [...inside].map(p => p.getBoundingClientRect()).map(r => [r.x + r.width / 2, r.y + r.height / 2])
    .filter(([x, y]) => x >= area.left && x <= area.right && y >= area.top && y <= area.bottom)
    .map(([x, y]) => [x - box.left, y - box.top]);
}"""


def take(browser: object, base: str, out: Path) -> dict[str, object]:
    """The screenshots of the page at ``base`` written under ``out``: {"serve": path,
    "serve-frontier": path, "centres": SHOWN_CENTRES of the frontier shot}."""
    page = browser.new_page(viewport=VIEWPORT)  # type: ignore[attr-defined]
    try:
        page.goto(base)
        page.wait_for_selector("body[data-state=ready]", timeout=WAIT_MS)
        page.mouse.move(0, 0)  # no hover label
        out.mkdir(parents=True, exist_ok=True)
        shots: dict[str, object] = {"serve": out / "serve.png"}
        page.screenshot(path=str(shots["serve"]))
        shots["serve-frontier"] = out / "serve-frontier.png"
        page.locator("#frontier").screenshot(path=str(shots["serve-frontier"]))
        shots["centres"] = page.evaluate(SHOWN_CENTRES)
        return shots
    finally:
        page.close()


def main() -> None:
    from playwright.sync_api import sync_playwright

    from trilemma.web.testing import CHROMIUM, CHROMIUM_ARGS, running_server

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="folder (default docs/)")
    args = parser.parse_args()
    with running_server() as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            shots = take(browser, base, args.out)
        finally:
            browser.close()
    for name in ("serve", "serve-frontier"):
        print(shots[name])


if __name__ == "__main__":
    main()
