"""`killpoint report` on a failing run: the index names the failed run; the run shows its evidence, replay
command, attempts and effects (the duplicate stands out), the tail of each worker's log, and an SVG timeline
with labelled lanes and steps; the page loads in headless Chromium without console errors, and its
screenshot is kept (under .killpoint/artifacts/ of the checkout)."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from killpoint import __version__
from killpoint.events import Attempt, Effect, Point
from killpoint.report.html_run import duplicates
from killpoint.report.timeline import placed, service_offset
from tests.helpers import REPO
from tests.helpers.harness import BROKEN_AGENT
from tests.helpers.sandbox import Sandbox

ARTIFACTS = REPO / ".killpoint" / "artifacts"


@pytest.fixture(scope="module")
def chromium() -> str:
    """Debian's chromium (headless), which .ci/run installs; a skip naming the fix where it is absent."""
    for name in ("chromium", "chromium-headless-shell", "chromium-browser"):
        if shutil.which(name):
            return shutil.which(name)  # type: ignore[return-value]
    pytest.skip("no chromium to render the report in: install Debian's chromium (apt-get install chromium), "
                "as .ci/run does")


@pytest.fixture(scope="module")
def failing_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A replay of the broken agent's duplicate email, and its report page."""
    tmp = tmp_path_factory.mktemp("report")
    with Sandbox(tmp / "sandbox") as box:
        done = box.run("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill",
                       "--steps", BROKEN_AGENT, "--out", str(tmp / "runs"), "--quiet")
        assert done.returncode == 1, done.stdout + done.stderr
        run_dir = Path(re.search(r"run directory: (\S+)", done.stdout).group(1))
        out = box.run("report", str(run_dir))
        assert out.returncode == 0, out.stderr
    return run_dir, (run_dir / "report.html").read_text()


def test_the_index_says_which_runs_failed(failing_report: tuple[Path, str]) -> None:
    _, page = failing_report
    row = re.search(r"<tr><td><a href='#crash-points'>crash-points</a></td>.*?</tr>", page)
    assert row and "fail" in row.group(0)
    run_id = re.search(r"href='#failure-(crash-points-\d+)'", row.group(0)).group(1)
    assert f"<summary>{run_id} (failed)</summary>" in page


def test_a_failing_run_shows_evidence_replay_effects_and_log_tails(failing_report: tuple[Path, str]) -> None:
    run_dir, page = failing_report
    section = re.search(r"<section class=failure id='failure-(crash-points-\d+)'>(.*?)</section>", page, re.S)
    assert section, page[:2000]
    run_id, body = section.group(1), section.group(2)
    assert "<b>exactly_once</b>: fail" in body and "extra x1: mailer POST /v1/emails key=" in body
    assert (f"killpoint replay --scenario crash-points --schedule &#x27;email:effect.applied:kill&#x27; "
            f"--steps {BROKEN_AGENT}") in body
    dups = re.findall(r"<tr class=dup><td>\d+</td><td>(\w+)</td>", body)
    assert dups == ["mailer", "mailer"], dups  # the email sent twice stands out; nothing else does
    logs = re.findall(r"<h4>log of (\S+) \(last \d+ lines, (\S+)\)</h4>", body)
    assert [inc for inc, _ in logs] == [f"{run_id}#1", f"{run_id}#2"]
    assert all((run_dir / name).is_file() for _, name in logs)


def test_the_timeline_labels_lanes_steps_and_faults_and_the_legend_has_every_colour(
        failing_report: tuple[Path, str]) -> None:
    _, page = failing_report
    run_id = re.search(r"id='failure-(crash-points-\d+)'", page).group(1)
    svg = re.search(rf"<details open id='run-{run_id}'>.*?(<svg class=timeline.*?</svg>)", page, re.S).group(1)
    texts = re.findall(r"<text [^>]*>([^<]+)</text>", svg)
    assert f"{run_id}#1" in texts and f"{run_id}#2" in texts  # lanes named without hovering
    assert "KILL email:effect.applied" in texts and "email" in texts and "charge" in texts
    legend = page[page.index("<p class=legend>"):]
    legend = legend[:legend.index("</p>")]
    for colour in set(re.findall(r"fill='(#[0-9a-f]+)'", svg)) - {"#f4f4f4"}:
        assert f"fill='{colour}'" in legend, colour


def test_the_page_loads_in_headless_chromium_without_console_errors(failing_report: tuple[Path, str], chromium: str,
                                                                   tmp_path: Path) -> None:
    run_dir, _ = failing_report
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report.png"
    shot.unlink(missing_ok=True)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
             f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,2400"]
    url = (run_dir / "report.html").as_uri()
    dom = subprocess.run([chromium, *flags, "--enable-logging=stderr", "--v=0", "--dump-dom", url],
                         capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<section class=\"failure\"" in dom.stdout or "class=\"failure\"" in dom.stdout, dom.stdout[:500]
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert console == [], console
    pic = subprocess.run([chromium, *flags, f"--screenshot={shot}", url], capture_output=True, text=True, timeout=180)
    assert pic.returncode == 0 and shot.is_file() and shot.stat().st_size > 10_000, pic.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


class Page(HTMLParser):
    """The elements of a report page, as (tag, attributes) in document order, and each element's text."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.texts: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        self.texts.append(data)

    def having(self, tag: str, **attrs: str) -> list[dict[str, str]]:
        return [a for t, a in self.elements if t == tag and all(a.get(k.rstrip("_")) == v for k, v in attrs.items())]


def test_the_page_has_metadata_effects_on_the_timeline_an_axis_and_links_to_it(
        failing_report: tuple[Path, str]) -> None:
    """Parsed with html.parser (no browser needed): the elements the report promises are there."""
    _, page = failing_report
    parsed = Page(page)
    assert parsed.having("table", class_="meta")
    meta = re.search(r"<table class=meta>(.*?)</table>", page, re.S).group(1)
    for key, value in (("steps", BROKEN_AGENT), ("seed", "none"), ("command", "replay"), ("killpoint", __version__)):
        assert f"<tr><th>{key}</th><td class=d>{value}</td></tr>" in meta, (key, meta)
    run_id = re.search(r"id='failure-(crash-points-\d+)'", page).group(1)
    assert parsed.having("a", class_="to-timeline", href=f"#run-{run_id}")  # the failure links to its timeline
    assert parsed.having("details", id=f"run-{run_id}", open="")
    svg = re.search(rf"<details open id='run-{run_id}'>.*?(<svg class=timeline.*?</svg>)", page, re.S).group(1)
    ticks = Page(svg)
    assert len(ticks.having("rect", class_="ev effect")) == 3  # the charge and the email twice
    assert len(ticks.having("rect", class_="ev attempt")) >= 3
    assert "services" in ticks.texts and "mailer twice" in ticks.texts and "ledger" in ticks.texts
    assert ticks.having("g", class_="axis") and "seconds" in ticks.texts and "0" in ticks.texts
    # on the history's clock: the first mail before the first incarnation was killed, the second after it
    titles = [(what.strip(), float(t)) for what, t in re.findall(r"<title>([^<@]*)@ ([\d.]+)s</title>", svg)]
    mails = [t for what, t in titles if what.startswith("effect mailer")]
    ends = [t for what, t in titles if what.startswith("inc.end")]
    assert len(mails) == 2 and mails[0] <= ends[0] <= mails[1], titles


def test_same_payload_under_another_key_is_marked_a_duplicate() -> None:
    effects = [{"service": "ledger", "key": "a", "payload": {"n": 1}}, {"service": "ledger", "key": "b", "payload": {"n": 1}},
               {"service": "ledger", "key": "c", "payload": {"n": 2}}, {"service": "mailer", "key": None, "payload": {"n": 1}},
               {"service": "mailer", "key": None, "payload": {"n": 1}}, {"service": "webhook", "key": "k", "payload": 1},
               {"service": "webhook", "key": "k", "payload": 2}]
    assert duplicates(effects) == {0: "same payload, another key", 1: "same payload, another key",
                                   3: "same payload, no key", 4: "same payload, no key", 5: "same key", 6: "same key"}


def test_the_services_lane_is_placed_on_the_history_clock() -> None:
    evs = [Point(i=0, t=1.0, run_id="r", inc="r#1", step="email", point="effect.received"),
           Point(i=1, t=1.5, run_id="r", inc="r#1", step="email", point="effect.applied"),
           Attempt(i=2, t=9.0, run_id="r", record={"service": "mailer", "t": 101.0}),
           Effect(i=3, t=9.0, run_id="r", record={"service": "mailer", "t": 101.5, "key": None})]
    assert service_offset(evs) == 100.0
    assert [(t, lane) for t, e, lane in placed(evs) if lane == "services"] == [(1.0, "services"), (1.5, "services")]
    assert service_offset(evs[2:]) is None and all(lane != "services" for _, _, lane in placed(evs[2:]))


def test_chromium_draws_the_effects_the_axis_and_the_metadata(failing_report: tuple[Path, str], chromium: str,
                                                              tmp_path: Path) -> None:
    """What a browser builds of the page (its DOM after parsing, SVG included) has the new parts."""
    run_dir, page = failing_report
    run_id = re.search(r"id='failure-(crash-points-\d+)'", page).group(1)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([chromium, *flags, "--dump-dom", (run_dir / "report.html").as_uri()],
                         capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    parsed = Page(dom.stdout)
    assert parsed.having("table", class_="meta") and parsed.having("g", class_="axis")
    assert len(parsed.having("rect", class_="ev effect")) >= 3 and parsed.having("rect", class_="ev attempt")
    link = parsed.having("a", class_="to-timeline")
    assert link and link[0]["href"] == f"#run-{run_id}" and parsed.having("details", id=f"run-{run_id}")
