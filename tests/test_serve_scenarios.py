"""The seed's scenarios through the page alone, in a real browser (Debian's Chromium driven by
Playwright): each scenario file is loaded with the page's Load control, and the plan the page shows
equals `trilemma solve FILE --json` for the same file; the page's saved TOML gives the CLI the same
plan; the page's link opened in a fresh browser context (no state shared) gets the same plan; and
no request the page makes leaves the server it came from. An estimate set with the Estimate tab's
controls and its grouped inputs is `trilemma estimate ... --json`'s document. Plans pinned to compare
are in the link: opened in a fresh context, it shows the same plans side by side. One server and one
browser for the module. Marked slow."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from browsertools import browser_api, browser_marks, browser_site
from clitools import run

sync_api = browser_api()

from trilemma.request.solve import SolveRequest  # noqa: E402

pytestmark = browser_marks()

SCENARIOS = Path(__file__).resolve().parents[1] / "examples" / "scenarios"
WAIT_MS = 30_000
#: a power pin for the frontier lab, when the request has one: the optimum without it, 16,384
#: B200s, draws about 30 MW (NVIDIA DGX B200 datasheet: ~14.3 kW max for a system of 8 GPUs, about
#: 1.8 kW a GPU), so 20 MW binds
POWER_PIN = "20MW"


@pytest.fixture(scope="module")
def site() -> Iterator[tuple[object, str]]:
    """(browser, base URL) shared by the module's tests."""
    with browser_site() as s:
        yield s


def _scenario(name: str, tmp_path: Path) -> Path:
    """The seed's scenario file; the frontier lab with a power pin where the request has one."""
    path = SCENARIOS / f"{name}.toml"
    keys = {o.key for o in SolveRequest.options().values()}
    text = path.read_text("utf-8")
    if name == "frontier-lab" and "max-power" in keys:
        lines = [ln for ln in text.splitlines() if not ln.replace("_", "-").startswith("max-power")]
        copy = tmp_path / path.name
        copy.write_text("\n".join(lines) + f'\nmax-power = "{POWER_PIN}"\n', "utf-8")
        return copy
    return path


def _ready(page, before: str | None) -> None:
    page.wait_for_function(
        f"document.body.dataset.done !== {before!r} && document.body.dataset.state === 'ready'",
        timeout=WAIT_MS,
    )


def _cli(capsys, path: Path) -> dict:
    code, out, err = run(capsys, "solve", str(path), "--json")
    assert code == 0, err
    return json.loads(out)


def _local(base: str, urls: list[str]) -> list[str]:
    """The requests that went anywhere but the server the page came from."""
    home = urlsplit(base).netloc
    return [
        u for u in urls if urlsplit(u).scheme not in ("data", "blob") and urlsplit(u).netloc != home
    ]


@pytest.mark.parametrize("name", ["frontier-lab", "on-device", "fine-tune-fast-cheap"])
def test_a_seed_scenario_through_the_page_is_the_cli_plan(site, name, tmp_path, capsys):
    browser, base = site
    path = _scenario(name, tmp_path)
    context = browser.new_context(viewport={"width": 1280, "height": 800}, accept_downloads=True)
    urls: list[str] = []
    context.on("request", lambda r: urls.append(r.url))
    errors: list[str] = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(base)
        page.wait_for_selector("body[data-state=ready]", timeout=WAIT_MS)
        done = page.evaluate("document.body.dataset.done")
        page.set_input_files("#scenario-file", str(path))  # the page's Load control
        _ready(page, done)
        doc = page.evaluate("window.trilemma.solveDoc")
        cli = _cli(capsys, path)
        # the same request: the same pins, the same optimum and runners-up, figure for figure
        assert doc["pins"] == cli["pins"]
        assert doc["optimum"] == cli["optimum"]
        assert doc["runners_up"] == cli["runners_up"]
        # what the card prints is the CLI's figures, formatted
        o = cli["optimum"]
        cells = page.locator("#plan-table tr").evaluate_all(
            "rs => Object.fromEntries(rs.map(r => [r.dataset.row, r.cells[1].textContent]))"
        )
        assert cells["time"] == page.evaluate("fmtDuration", o["time"]["total_s"])
        assert cells["cost"] == page.evaluate("fmtUSD", o["cost"]["usd"])
        hw = o["hardware"]
        assert cells["GPUs"].startswith(f"{hw['n_gpus']} × {hw['name']}")
        assert cells["loss"] == (f"{o['loss']['mean']:.3f}" if o["loss"] else "not predicted")
        if o.get("deploy"):  # the phone: its device and decode speed on the card
            assert cells["deploy"].startswith(
                f"{o['deploy']['device']} ({o['deploy']['precision']})"
            )
        if o.get("finetune"):
            assert cells["fine-tune"].startswith(o["finetune"]["method"])

        # the page's saved scenario is the same request for the CLI
        with page.expect_download() as got:
            page.click("#save-scenario")
        saved = tmp_path / "saved.toml"
        saved.write_bytes(Path(got.value.path()).read_bytes())
        assert _cli(capsys, saved)["optimum"] == o

        # the link: the whole request in the URL, opened where nothing of this page is known
        fresh = browser.new_context()
        fresh.on("request", lambda r: urls.append(r.url))
        try:
            other = fresh.new_page()
            other.goto(page.url)
            other.wait_for_selector("body[data-state=ready]", timeout=WAIT_MS)
            assert other.evaluate("window.trilemma.solveDoc.optimum") == o
        finally:
            fresh.close()
        assert _local(base, urls) == [] and len(urls) > 3  # nothing left the server's host
        assert errors == []
    finally:
        context.close()


def test_a_price_table_loads_and_a_bad_scenario_is_refused_naming_its_key(site, tmp_path, capsys):
    browser, base = site
    # a table of prices (GPU = USD per GPU-hour): the page's "price" input, the CLI's plan
    priced = tmp_path / "priced.toml"
    priced.write_text(
        'deadline = "30d"\nbudget = "$1M"\nparams = "1B..7B"\ngpu = ["h100-sxm", "a100-80gb"]\n'
        'price = { "h100-sxm" = 2.0, "a100-80gb" = 1.1 }\n',
        "utf-8",
    )
    bad = tmp_path / "bad.toml"
    bad.write_text('deadline = "30d"\nmax_gpu = 64\n', "utf-8")
    page = browser.new_page()
    try:
        page.goto(base)
        page.wait_for_selector("body[data-state=ready]", timeout=WAIT_MS)
        done = page.evaluate("document.body.dataset.done")
        page.set_input_files("#scenario-file", str(priced))
        _ready(page, done)
        optimum = page.evaluate("window.trilemma.solveDoc.optimum")
        assert optimum == _cli(capsys, priced)["optimum"]
        assert optimum["cost"]["price_usd_per_gpu_hour"] in (2.0, 1.1)
        page.set_input_files("#scenario-file", str(bad))
        page.wait_for_selector("body[data-state=error]", timeout=WAIT_MS)
        assert page.inner_text("#error").startswith("scenario max_gpu: 64 is not allowed")
    finally:
        page.close()


def test_an_estimate_with_more_inputs_is_the_cli_document(site, capsys):
    # the Estimate tab's main controls and inputs of four groups one click away (sequence, stack,
    # power and carbon, reliability): the plan shown is `trilemma estimate ... --json`'s document
    browser, base = site
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        page.goto(base)
        page.wait_for_selector("body[data-state=ready]", timeout=WAIT_MS)
        done = page.evaluate("document.body.dataset.done")
        page.click("#tab-estimate")
        _ready(page, done)
        page.click("#estimate-more summary")
        done = page.evaluate("document.body.dataset.done")
        page.fill("#e-model", "llama3-8b")
        page.select_option("#e-gpu", "h100-sxm")
        page.fill("#e-gpus", "64")
        page.fill("#e-tokens", "1T")
        more = {
            "seq": "8192",
            "stack": "torchtitan",
            "pue": "1.2",
            "region": "eu",
            "failure-rate": "2e-5",
        }
        for key, value in more.items():
            page.fill(f"#more-estimate-{key}", value)
        _ready(page, done)
        shown = page.evaluate("window.trilemma.shown")
        flags = [f"--{k}={v}" for k, v in more.items()]
        code, out, err = run(
            capsys,
            "estimate",
            *("--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "64", "--tokens", "1T"),
            *flags,
            "--json",
        )
        assert code == 0, err
        assert shown == json.loads(out)
        assert "e.seq=8192" in page.url and "e.stack=torchtitan" in page.url  # in the link too
    finally:
        page.close()


def test_the_compared_plans_are_in_the_link(site):
    # the optimum, a runner-up and a frontier point pinned; the link, opened where nothing of this
    # page is known, asks the server for each again and compares the same three plans
    browser, base = site
    page = browser.new_page()
    try:
        page.goto(base + "?gpu=h100-sxm&lo=1B&hi=7B&max_gpus=256")
        page.wait_for_selector("body[data-state=ready]", timeout=WAIT_MS)
        page.click("#pin-plan")
        page.click("#runners .runner >> nth=1")
        page.click("#pin-plan")
        page.evaluate("showPoint(2)")
        page.wait_for_function("document.body.dataset.point === '2'", timeout=WAIT_MS)
        page.click("#pin-plan")
        want = page.evaluate("window.trilemma.compared.map((c) => [c.title, c.plan])")
        assert [t.split(":")[0] for t, _ in want] == ["Optimum", "Runner-up", "Frontier point 2"]
        assert page.url.count("compare=") == 3
        fresh = browser.new_context()
        try:
            other = fresh.new_page()
            other.goto(page.url)
            other.wait_for_function("document.body.dataset.compared === '3'", timeout=WAIT_MS)
            assert other.evaluate("window.trilemma.compared.map((c) => [c.title, c.plan])") == want
            assert other.inner_text("#compare-table") == page.inner_text("#compare-table")
        finally:
            fresh.close()
    finally:
        page.close()
