"""The explorer page's readability and reach in a real browser (Debian's Chromium driven by
Playwright): the frontier's colours, messages that name the page's controls, the inputs generated
from the request schema, and the downloads. One server and one browser for the module; each test
opens its own page. Marked slow."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from browsertools import browser_api, browser_marks, browser_site

sync_api = browser_api()


pytestmark = browser_marks()

WAIT_MS = 20_000
SCREENSHOTS = Path(__file__).resolve().parents[1] / "scripts" / "serve_screenshots.py"
#: two colours are told apart when their RGB distance (0-255 a channel) is at least this
VISIBLY_DIFFERENT = 24


@pytest.fixture(scope="module")
def site() -> Iterator[tuple[object, str]]:
    """(browser, base URL) shared by the module's tests."""
    with browser_site() as s:
        yield s


def _open(site, query: str = ""):
    browser, base = site
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(base + query)
    page.wait_for_selector("body[data-state=ready]", timeout=WAIT_MS)
    return page


def _answered(page, before: str | None, state: str = "ready") -> None:
    """Wait for an answer newer than ``before`` that left the page in ``state``."""
    page.wait_for_function(
        f"document.body.dataset.done !== {before!r} && document.body.dataset.state === {state!r}",
        timeout=WAIT_MS,
    )


def _distinct(colours: list[tuple[int, ...]]) -> int:
    """How many colours remain when those closer than VISIBLY_DIFFERENT to a kept one merge."""
    kept: list[tuple[int, ...]] = []
    for c in colours:
        if all(sum((a - b) ** 2 for a, b in zip(c, k)) ** 0.5 >= VISIBLY_DIFFERENT for k in kept):
            kept.append(c)
    return len(kept)


def test_the_frontier_screenshot_colours_the_points_inside_the_pins_apart(site, tmp_path):
    # the script that regenerates docs/serve.png and docs/serve-frontier.png, into a temporary folder;
    # the frontier shot's pixel at the centre of each marker inside the pins that the plot shows
    image = pytest.importorskip("PIL.Image", reason="Pillow (with matplotlib, the test extra)")
    spec = importlib.util.spec_from_file_location("serve_screenshots", SCREENSHOTS)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    browser, base = site
    shots = script.take(browser, base, tmp_path)
    assert image.open(shots["serve"]).size == (1280, 800)  # the default view, a laptop's window
    frontier = image.open(shots["serve-frontier"]).convert("RGB")
    centres = shots["centres"]
    assert len(centres) > 20  # the points inside the pins that the opening view shows
    colours = [frontier.getpixel((int(x), int(y))) for x, y in centres]
    assert _distinct(colours) >= 5


def test_messages_name_the_page_controls_not_cli_flags(site):
    # the optimum at the edge of both: "widen --params", "raise --max-gpus" in the CLI's words
    page = _open(site, "?max_gpus=512&hi=3B")
    try:
        words = page.inner_text("#warnings")
        assert "widen “Model sizes”" in words and "raise “Most GPUs”" in words
        assert "set “price (More inputs › Price)” for yours" in words and "--" not in words
    finally:
        page.close()


def test_every_control_the_page_maps_is_a_request_field(site):
    page = _open(site)
    try:
        labels = page.evaluate("CONTROL_LABELS")
        schemas = page.evaluate(
            "fetch('/openapi.json').then(r => r.json()).then(o => o.components.schemas)"
        )
        assert set(labels) == {"solve", "estimate"}
        for tab, mapped in labels.items():
            fields = schemas[tab.capitalize() + "Request"]["properties"]
            assert mapped and set(mapped) <= set(fields), tab
    finally:
        page.close()


def test_more_inputs_are_built_from_the_request_schema(site):
    page = _open(site)
    try:
        schemas = page.evaluate(
            "fetch('/openapi.json').then(r => r.json()).then(o => o.components.schemas)"
        )
        mapped = page.evaluate("CONTROL_LABELS")
        for tab in ("solve", "estimate"):
            box = page.locator(f"#{tab}-more")
            assert box.evaluate("d => d.open") is False  # collapsed: the default view stays simple
            keys = page.locator(f"#{tab}-form .more-group [data-key]")
            keys = keys.evaluate_all("es => es.map(e => e.dataset.key)")
            fields = schemas[tab.capitalize() + "Request"]["properties"]
            # every field of the request has one control: the main ones, or one in a group
            assert sorted(keys) == sorted(set(fields) - set(mapped[tab]))
            # shown without a click: the model and its data; the rest in groups inside "More inputs"
            shown = page.locator(f"#{tab}-form > .more-group.shown legend").all_inner_texts()
            inside = box.locator(".more-group legend").evaluate_all(
                "es => es.map(e => e.textContent)"
            )
            assert shown == ["Model and data"] and "Deployment" in inside and "Fine-tune" in inside
        done = page.evaluate("document.body.dataset.done")
        page.click("#tab-estimate")
        _answered(page, done)
        page.click("#estimate-more summary")
        done = page.evaluate("document.body.dataset.done")
        page.fill("#more-estimate-pue", "1.5")
        _answered(page, done)
        assert page.evaluate("window.trilemma.shown.cost.pue") == 1.5
        assert "e.pue=1.5" in page.url
        # the server's bound, beside the control it names
        done = page.evaluate("document.body.dataset.done")
        page.fill("#more-estimate-pue", "0.5")
        _answered(page, done, "error")
        assert page.inner_text("#more-estimate-pue-error").startswith("pue: 0.5 is not allowed")
        assert "bad" in (page.get_attribute("#more-estimate-pue", "class") or "")
    finally:
        page.close()


def test_gpu_counts_and_model_sizes_beyond_the_old_lists_can_be_typed(site):
    # the frontier lab's scenario: 32,768 GPUs and models up to 3T
    page = _open(site)
    try:
        done = page.evaluate("document.body.dataset.done")
        page.fill("#max-gpus", "32768")
        page.fill("#params-hi", "3T")
        _answered(page, done)
        req = page.evaluate("window.trilemma.solveReq")
        assert (req["max-gpus"], req["params"]) == ("32768", "50M..3T")
        assert page.evaluate("window.trilemma.solveDoc.optimum.hardware.n_gpus") > 0
    finally:
        page.close()


def test_plan_and_frontier_download_as_the_page_shows_them(site):
    page = _open(site, "?hi=1B&gpu=h100-sxm")
    try:
        with page.expect_download() as got:
            page.click("#download-plan")
        plan = json.loads(Path(got.value.path()).read_text(encoding="utf-8"))
        assert got.value.suggested_filename == "trilemma-plan.json"
        assert plan == page.evaluate("window.trilemma.shown")
        with page.expect_download() as got:
            page.click("#download-frontier")
        rows = list(csv.DictReader(io.StringIO(Path(got.value.path()).read_text("utf-8"))))
        f = page.evaluate("window.trilemma.solveDoc.frontier_points")
        assert len(rows) == len(f["time_s"]) > 0
        for i in (0, len(rows) - 1):
            c = f["configs"][f["config"][i]]
            assert (rows[i]["model"], rows[i]["gpu"], int(rows[i]["n_gpus"])) == (
                c["model"],
                c["gpu"],
                c["n_gpus"],
            )
            assert float(rows[i]["usd"]) == f["usd"][i] and float(rows[i]["loss"]) == f["loss"][i]
            assert rows[i]["feasible"] == str(f["feasible"][i])
        # the optimum as DeepSpeed's files: what /api/export answers for the page's request
        page.select_option("#export-engine", "deepspeed")
        with page.expect_download() as got:
            page.click("#export-plan")
        want = page.evaluate(
            "fetch('/api/export', {method: 'POST', headers: {'Content-Type': 'application/json'},"
            " body: JSON.stringify({to: 'deepspeed', solve: window.trilemma.solveReq})})"
            ".then(r => r.json())"
        )
        assert got.value.suggested_filename == "ds_config.json"
        assert Path(got.value.path()).read_text("utf-8") == want["files"]["ds_config.json"]
    finally:
        page.close()


def test_step_waterfall_triangle_and_three_plans_side_by_side(site):
    page = _open(site)
    try:
        doc = page.evaluate("window.trilemma.solveDoc")
        t = doc["optimum"]["time"]
        page.wait_for_function(
            "(document.getElementById('waterfall').data || []).length === 1", timeout=WAIT_MS
        )
        bars = page.evaluate(
            "(() => { const d = document.getElementById('waterfall').data[0];"
            " return { y: d.y, measure: d.measure }; })()"
        )
        step_at = bars["measure"].index("total")
        # the parts of a step sum to the step's time; with what goodput loses, to the wall time per step
        assert sum(bars["y"][:step_at]) == pytest.approx(t["step_s"], rel=1e-9)
        relative = [y for y, m in zip(bars["y"], bars["measure"]) if m == "relative"]
        assert sum(relative) == pytest.approx(t["total_s"] / t["steps"], rel=1e-9)
        cells = page.locator("#plan-table tr").evaluate_all(
            "rs => Object.fromEntries(rs.map(r => [r.dataset.row, r.cells[1].textContent]))"
        )
        assert cells["throughput"] == page.evaluate("fmtNum", t["tokens_per_s"]) + " tokens/s"
        # the time's 80% band drawn: the point where its logarithm sits between low and high
        at = float(page.get_attribute("#plan-table tr[data-row=time] .bandbar", "data-at"))
        lo, v, hi = (math.log(t[k]) for k in ("total_s_low", "total_s", "total_s_high"))
        assert at == pytest.approx((v - lo) / (hi - lo), rel=1e-9) and 0 < at < 1

        # the triangle: one closed line per plan, each corner scaled over the plans from 0.1 to 1
        page.wait_for_function(
            "(document.getElementById('triangle-plot').data || []).length > 1", timeout=WAIT_MS
        )
        radar = page.evaluate("document.getElementById('triangle-plot').data.map(d => d.r)")
        plans = [doc["optimum"], *doc["runners_up"]]
        assert len(radar) == len(plans)
        for c, get in enumerate(
            (
                lambda p: p["time"]["total_s"],
                lambda p: p["cost"]["usd"],
                lambda p: p["loss"]["mean"],
            )
        ):
            vs = [get(p) for p in plans]
            lo, hi = min(vs), max(vs)
            for r, v in zip(radar, vs):
                assert r[c] == pytest.approx(0.1 + 0.9 * (v - lo) / (hi - lo), rel=1e-9)
        # the optimum and the runners-up that change the GPU type and the model size, pinned
        ups = {u["differs_in"]: u for u in doc["runners_up"]}
        page.click("#pin-plan")
        for lever in ("GPU type", "model size"):
            i = 1 + list(ups).index(lever)
            page.locator("#runners .runner").nth(i).click()
            page.click("#pin-plan")
        assert page.is_disabled("#pin-plan")  # three at most
        rows = page.locator("#compare-table tbody tr")
        assert page.locator("#compare-table thead th").count() == 1 + 3
        differs = rows.evaluate_all(
            "rs => Object.fromEntries(rs.map(r => [r.dataset.row,"
            " [...r.cells].slice(1).map(c => c.classList.contains('differs'))]))"
        )
        o = doc["optimum"]
        plans = [o, ups["GPU type"], ups["model size"]]
        assert differs["GPUs"] == [p["hardware"]["name"] != o["hardware"]["name"] for p in plans]
        assert differs["model"] == [p["model"]["name"] != o["model"]["name"] for p in plans]
        assert differs["GPUs"][1] and differs["model"][2] and not differs["model"][1]
        page.locator("#compare-table thead button").first.click()  # unpin the first
        assert page.locator("#compare-table thead th").count() == 1 + 2
        assert page.is_enabled("#pin-plan")
    finally:
        page.close()


def test_a_phone_sized_window_and_a_screen_reader_reach_every_control(site):
    browser, base = site
    page = browser.new_page(viewport={"width": 390, "height": 844})  # an iPhone 15's CSS pixels
    try:
        page.goto(base)
        page.wait_for_selector("body[data-state=ready]", timeout=WAIT_MS)
        # nothing runs off the side: no sideways scrolling
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        # every control has a name a screen reader reads: its label, an aria-label or its text
        unnamed = page.evaluate(
            "[...document.querySelectorAll('input, select, button')].filter(e =>"
            " !(e.labels && e.labels.length) && !e.getAttribute('aria-label')"
            " && !e.textContent.trim()).map(e => e.id)"
        )
        assert unnamed == []
        # the keyboard reaches the inputs: Tab from the top lands on controls of the page
        focused = []
        for _ in range(8):
            page.keyboard.press("Tab")
            focused.append(page.evaluate("document.activeElement.tagName"))
        assert {"INPUT", "BUTTON"} <= set(focused)
    finally:
        page.close()
