"""report.html in a real headless Chromium: no console errors, no network, every image decoded."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest

from harness.report import write_report
from tests.cdp import CHROMIUM, Browser

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"Chromium not found at {CHROMIUM} (apt-get install chromium)"
)

PROBE = """JSON.stringify({
  images: Array.from(document.images).map(i => [i.getAttribute('src'), i.complete, i.naturalWidth]),
  tables: document.querySelectorAll('table').length,
  title: document.title,
})"""


@pytest.fixture(scope="module")
def report(cpu_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("browser") / "gelu" / cpu_run.name
    shutil.copytree(cpu_run, run, symlinks=True)
    write_report(run)
    return run / "report.html"


def test_report_loads_offline_with_every_image_decoded(report, tmp_path):
    browser = Browser(tmp_path / "profile")
    try:
        targets = browser.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        session = browser.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Network", "Log"):
            browser.call(f"{domain}.enable", session)
        browser.events.clear()
        browser.call("Page.navigate", session, url=report.as_uri())
        browser.wait_for("Page.loadEventFired", timeout=20)
        probe = json.loads(
            browser.call("Runtime.evaluate", session, expression=PROBE, returnByValue=True)[
                "result"
            ]["value"]
        )
        shot = browser.call(
            "Page.captureScreenshot", session, format="png", captureBeyondViewport=False
        )
    finally:
        browser.close()
    Path("/tmp/report_screenshot.png").write_bytes(base64.b64decode(shot["data"]))
    (tmp_path / "screenshot.png").write_bytes(base64.b64decode(shot["data"]))

    events = browser.events
    errors = [
        e for e in events
        if (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] == "error")
        or e.get("method") == "Runtime.exceptionThrown"
        or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")
    ]  # fmt: skip
    assert errors == []
    urls = [
        e["params"]["request"]["url"]
        for e in events
        if e.get("method") == "Network.requestWillBeSent"
    ]
    assert urls and all(u.startswith("file://") for u in urls), urls
    failed = [e for e in events if e.get("method") == "Network.loadingFailed"]
    assert failed == []
    assert len(probe["images"]) == 6
    for src, complete, width in probe["images"]:
        assert complete and width > 0, src
    assert probe["tables"] >= 3
