"""The dashboard in a real browser: headless Chromium, driven by selenium, loads the page of a
running job and sees its graph and counters appear and change as the job advances."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

import deltaflow as df

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs Chromium and its driver (Debian: apt-get install chromium chromium-driver)",
)

# As root on a machine with no network: no sandbox, nothing fetched in the background.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1280,900",
]


class Counts(df.Pipeline):
    def build(self, words: df.Collection) -> df.Collection:
        return words.map(lambda w: (w, ())).count()


def browser(profile: Path) -> Any:
    """A headless Chromium with a fresh profile directory."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    assert CHROMIUM is not None and CHROMEDRIVER is not None
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))


def wait(driver: Any, condition: Any, what: str, timeout: float = 20.0) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(lambda d: condition(d), message=what)


def texts(driver: Any, selector: str) -> list[str]:
    from selenium.webdriver.common.by import By

    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, selector)]


def edge_records(driver: Any) -> list[str]:
    from selenium.webdriver.common.by import By

    labels = driver.find_elements(By.CSS_SELECTOR, "#graph svg text.edge-label")
    return [e.get_attribute("data-records") for e in labels]


@pytest.mark.parametrize("processes", [1, 2])
async def test_the_page_shows_the_job_and_follows_it(tmp_path: Path, processes: int) -> None:
    """The graph's boxes and edges appear; the time, the records on each edge, records per
    second, the output's frontier, memory and the counters show, and they change as the
    job advances."""
    async with df.open(
        Counts(), workers=2, processes=processes, dashboard=0, checkpoint=tmp_path / "state"
    ) as job:
        url = job.dashboard_url
        assert url is not None
        job.inputs["words"].insert_many(["a", "b", "a"])
        await job.advance_to(1)
        driver = await trio.to_thread.run_sync(browser, tmp_path / "profile")
        try:

            def first_look() -> None:
                driver.get(url)
                wait(driver, lambda d: len(texts(d, "#graph svg g.node")) == 3, "three boxes")
                boxes = texts(driver, "#graph svg g.node")
                assert boxes[0].startswith("input:words") and "count" in boxes[1]
                assert boxes[2].startswith("output:output")
                assert len(texts(driver, "#graph svg path.edge")) == 2
                wait(driver, lambda d: d.find_element("id", "time").text == "1", "time 1")
                wait(driver, lambda d: edge_records(d)[0] == "3", "3 records on the input edge")
                outputs = texts(driver, "#outputs tbody tr")
                assert outputs == ["output {1} 0 0.0 2"], outputs
                counters = texts(driver, "#counters tbody tr")
                assert "arrangements 1" in counters, counters
                memory = texts(driver, "#processes tbody tr")
                assert len(memory) == processes and all(
                    re.search(r"\d [KMG]iB ", m) for m in memory
                ), memory
                assert texts(driver, "#checkpoints tbody tr") == ["- none yet"]

            await trio.to_thread.run_sync(first_look)
            for t in range(2, 5):
                job.inputs["words"].insert_many(["c"] * 10 + ["a"])
                await job.advance_to(t)
            await job.checkpoint()

            def after() -> None:
                wait(driver, lambda d: d.find_element("id", "time").text == "4", "time 4")
                wait(driver, lambda d: edge_records(d)[0] == "36", "36 records on the edge")
                rate = re.compile(r"[1-9][\d,.]*/s")
                wait(
                    driver,
                    lambda d: any(rate.match(s) for s in texts(d, "#graph svg text.edge-label")),
                    "records per second on an edge",
                )
                wait(
                    driver,
                    lambda d: texts(d, "#outputs tbody tr")[0].startswith("output {4} 0"),
                    "the output at 4",
                )
                # (a poll made before the checkpoint was written may have shown all the rest)
                wait(
                    driver,
                    lambda d: texts(d, "#checkpoints tbody tr")[0].startswith("1 4 "),
                    "checkpoint 1 at time 4",
                )
                checkpoints = texts(driver, "#checkpoints tbody tr")
                assert len(checkpoints) == 1
                assert checkpoints[0].endswith(" ok")
                driver.save_screenshot(str(tmp_path / "page.png"))

            await trio.to_thread.run_sync(after)
        finally:
            await trio.to_thread.run_sync(driver.quit)
    png = (tmp_path / "page.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
