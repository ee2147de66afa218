"""The explorer page end to end in a real browser (Debian's Chromium driven by Playwright).

One test, in steps: load the page (the default solve: its frontier and plan card), change a pin
(the budget) and wait for the new plan, open the page's link in a second tab (the same plan), click
a frontier point and get that point's plan, make the request infeasible and read what must give,
send a bad value and see it refused naming the field, estimate one plan in the second tab.
A screenshot of the infeasible state is saved (TRILEMMA_SCREENSHOT=docs writes docs/serve-infeasible.png;
scripts/serve_screenshots.py makes docs/serve.png, the default view, and docs/serve-frontier.png). About
10 s; marked slow.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import pytest
from browsertools import browser_api, browser_marks

from trilemma.quality.benchmarks import BENCHMARKS
from trilemma.units import DAY

sync_api = browser_api()

from trilemma.web.testing import CHROMIUM, CHROMIUM_ARGS, running_server  # noqa: E402

pytestmark = browser_marks()

DOCS = Path(__file__).resolve().parents[1] / "docs"
WAIT_MS = 20_000
ROWS = [
    "model",
    "tokens",
    "GPUs",
    "layout",
    "step",
    "throughput",
    "time",
    "GPU-hours",
    "cost",
    "energy",
    "power",
]
ROWS += [
    "loss",
    *(b.label for b in BENCHMARKS.values()),
]  # a row per benchmark score, its band drawn


def _answered(page, before: str, state: str = "ready") -> None:
    """Wait for an answer newer than ``before`` that left the page in ``state``."""
    page.wait_for_function(
        f"document.body.dataset.done !== {before!r} && document.body.dataset.state === {state!r}",
        timeout=WAIT_MS,
    )


def test_the_explorer_in_a_browser(tmp_path):
    with running_server() as base, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))

            # 1. the page loads with the embedded defaults (deadline 30 days, budget $2M: lowest loss)
            page.goto(base)
            page.wait_for_selector("body[data-state=ready]", timeout=WAIT_MS)
            doc = page.evaluate("window.trilemma.solveDoc")
            assert doc["pins"]["deadline_s"] == 30 * DAY and doc["pins"]["budget_usd"] == 2e6
            opt = doc["optimum"]
            assert (
                opt["time"]["total_s"] <= 30 * DAY * 1.01 and opt["cost"]["usd"] <= 2e6 * 1.01
            )  # meets the pins
            # the frontier: one marker per Pareto point the API sent (outside the pins, within them), the
            # optimum's star
            trace = page.locator("#frontier .scatterlayer .trace")
            f = doc["frontier_points"]
            assert trace.nth(0).locator("path.point").count() == f["feasible"].count(False)
            assert trace.nth(1).locator("path.point").count() == f["feasible"].count(True) > 100
            assert trace.nth(2).locator("path.point").count() == 1
            # the card: every corner, the memory bar with one segment per part of the breakdown
            rows = page.locator("#plan-table tr").evaluate_all("rs => rs.map(r => r.dataset.row)")
            assert rows == ROWS
            assert page.locator("#memory-bar .seg").count() == len(opt["memory"]["breakdown"])
            assert page.evaluate("window.trilemma.shown.model.name") == opt["model"]["name"]
            # the runners-up: each chip after the optimum's says what its one lever buys or costs (solve's delta)
            chips = page.locator("#runners .runner").all_inner_texts()
            assert len(chips) == 1 + len(doc["runners_up"]) and "Δ" not in chips[0]
            for chip, up in zip(chips[1:], doc["runners_up"]):
                assert chip.startswith(up["differs_in"]) and "Δ " in chip
                assert ("meets the pins" in chip) == (not up["breaks"])

            # 2. a pin moves: the budget's slider (log10 of dollars) to a tenth; the text follows, and the new
            # plan keeps to it and buys no lower loss
            done = page.evaluate("document.body.dataset.done")
            page.locator("#budget-slider").fill(str(math.log10(200_000)))
            _answered(page, done)
            assert page.input_value("#budget") == "$200k"
            doc2 = page.evaluate("window.trilemma.solveDoc")
            assert doc2["pins"]["budget_usd"] == 200_000
            assert doc2["optimum"]["cost"]["usd"] <= 200_000 * 1.01
            assert doc2["optimum"]["loss"]["mean"] >= opt["loss"]["mean"]
            assert (
                page.evaluate("window.trilemma.shown.model.name")
                == doc2["optimum"]["model"]["name"]
            )
            assert "budget=%24200k" in page.url  # the link holds the inputs
            shared = browser.new_page()
            shared.goto(page.url)
            shared.wait_for_selector("body[data-state=ready]", timeout=WAIT_MS)
            assert (
                shared.evaluate("window.trilemma.solveDoc.optimum") == doc2["optimum"]
            )  # the same plan
            shared.close()

            # 3. a frontier point is clicked: its plan (GPU type, count, tokens) replaces the card
            f = doc2["frontier_points"]
            # the lowest-loss point within the pins that trains in under ten days: away from the optimum's star
            # and the runners-up's diamonds, which sit near the deadline and budget lines
            # within the view the page opens on: a decade around the pins and the optimum
            o2, p2 = doc2["optimum"], doc2["pins"]
            t_lo = min(o2["time"]["total_s"], p2["deadline_s"]) / 10 * 1.5
            usd_lo = min(o2["cost"]["usd"], p2["budget_usd"]) / 10 * 1.5
            fast = [
                i
                for i, ok in enumerate(f["feasible"])
                if ok and t_lo < f["time_s"][i] < 10 * DAY and f["usd"][i] > usd_lo
            ]
            k = min(fast, key=lambda i: f["loss"][i])
            box = trace.nth(1).locator("path.point").nth(sum(f["feasible"][:k])).bounding_box()
            page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.wait_for_function(
                "document.body.dataset.point !== undefined && "
                "document.body.dataset.state === 'ready'",
                timeout=WAIT_MS,
            )
            i = int(page.evaluate("document.body.dataset.point"))
            shown = page.evaluate("window.trilemma.shown")
            cfg = f["configs"][f["config"][i]]
            assert (shown["hardware"]["name"], shown["hardware"]["n_gpus"]) == (
                cfg["gpu"],
                cfg["n_gpus"],
            )
            assert shown["batch"]["tokens"] == pytest.approx(f["tokens"][i], rel=1e-9)
            page.mouse.move(0, 0)  # the hover label off the plot, so the screenshot shows the star
            page.wait_for_function(
                "document.querySelectorAll('#frontier .hoverlayer .hovertext').length === 0",
                timeout=WAIT_MS,
            )

            # 4. infeasible: the lowest cost of loss 1.9 within a day; the page says what must give
            done = page.evaluate("document.body.dataset.done")
            page.check("input[name=minimize][value=cost]")
            page.fill("#deadline", "1d")
            page.fill("#target-loss", "1.9")
            _answered(page, done, "infeasible")
            assert (
                page.locator("#infeasible").is_visible()
                and page.locator("#frontier-box").is_hidden()
            )
            words = page.inner_text("#infeasible-message")
            # in words: the target that cannot be met in the time, the fastest plan that meets it, the best loss in time
            assert (
                words.startswith("loss 1.9 cannot be reached in")
                and "fastest" in words
                and "at best" in words
            )
            shot = tmp_path / "serve-infeasible.png"
            page.screenshot(path=str(shot))
            if os.environ.get("TRILEMMA_SCREENSHOT") == "docs":
                shutil.copyfile(shot, DOCS / "serve-infeasible.png")

            # 5. a bad value: refused with the CLI's line naming the field, and the field marked
            done = page.evaluate("document.body.dataset.done")
            page.fill("#deadline", "soon")
            _answered(page, done, "error")
            assert page.inner_text("#error").startswith("deadline: 'soon' is not allowed")
            assert "bad" in (page.get_attribute("#deadline", "class") or "")

            # 6. the estimate tab: one plan, the GPUs and tokens as typed
            done = page.evaluate("document.body.dataset.done")
            page.click("#tab-estimate")
            _answered(page, done)
            done = page.evaluate("document.body.dataset.done")
            page.fill("#e-gpus", "128")
            _answered(page, done)
            est = page.evaluate("window.trilemma.shown")
            assert (est["model"]["name"], est["hardware"]["n_gpus"], est["batch"]["tokens"]) == (
                "llama2-7b",
                128,
                2e12,
            )
            assert "tab=estimate" in page.url and "n=128" in page.url
            assert errors == []
        finally:
            browser.close()
