"""Open a Snakemake HTML report in headless Chromium and check that every figure is listed and shown.

Snakemake's report is a React app whose results live in a ``<script id="results">`` JSON (embedded data URIs);
nothing is drawn until a result is selected. The checker copies the report and appends a probe script that,
once the app has mounted, goes from the main menu to each result's subcategory (so the navigation lists it),
selects each image through the app's own ``setView`` (what clicking its eye button does), waits until that
``<img>`` is loaded and records its natural size; the probe writes its findings as JSON into the DOM, which
``chromium --dump-dom`` prints.

Needs Debian's ``chromium`` package (``apt-get install -y --no-install-recommends chromium``).
"""

from __future__ import annotations

import html as html_module
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

PROBE = """
<script>
(async function probe() {
  const found = {};
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  try {
    for (let i = 0; i < 100 && typeof app === "undefined"; i++) await sleep(50);
    for (const [path, entry] of Object.entries(results)) {
      const category = Object.keys(categories).find((c) =>
        Object.values(categories[c]).some((paths) => paths.includes(path)));
      const subcategory = Object.keys(categories[category]).find((s) => categories[category][s].includes(path));
      app.setView({navbarMode: "menu"});
      await sleep(50);
      app.setView({navbarMode: "subcategory", category: category, subcategory: subcategory});
      await sleep(100);
      const navigation = document.querySelector("#app").innerText;
      const listed = Object.values(entry.labels || {}).concat([entry.name]).some((text) => navigation.includes(text));
      const record = {name: entry.name, mime: entry.mime_type, category, subcategory, listed,
                      caption: (entry.caption || "").replace(/<[^>]*>/g, " ").trim()};
      if (entry.mime_type.startsWith("image/")) {
        app.setView({content: "img", contentPath: entry.data_uri, resultPath: path});
        await sleep(100);
        const img = Array.from(document.querySelectorAll("#app img")).find((i) => i.src === entry.data_uri);
        for (let i = 0; i < 100 && img && !(img.complete && img.naturalWidth > 0); i++) await sleep(50);
        if (img) {
          record.width = img.naturalWidth;
          record.height = img.naturalHeight;
        }
      }
      found[path] = record;
    }
  } catch (error) {
    found.__error__ = String(error);
  }
  const out = document.createElement("pre");
  out.id = "report-probe";
  out.textContent = JSON.stringify(found);
  document.body.appendChild(out);
})();
</script>
"""
PROBE_OUTPUT = re.compile(r'<pre id="report-probe">(.*?)</pre>', re.S)


def chromium_binary() -> str | None:
    """Debian's ``chromium`` (or ``chromium-browser``/``google-chrome``) on PATH; when absent it is installed with apt
    only where host changes are allowed (``PIPELINE_HOST_TESTS=1``, as root on Debian: CI); else None."""

    def find() -> str | None:
        return next(
            (path for name in ("chromium", "chromium-browser", "google-chrome") if (path := shutil.which(name))), None
        )

    allowed = os.environ.get("PIPELINE_HOST_TESTS") == "1" and os.geteuid() == 0
    if find() is None and allowed and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        apt = ["apt-get", "-o", "DPkg::Lock::Timeout=900"]  # waits for another test's apt (parallel workers)
        subprocess.run([*apt, "update", "-qq"], check=True, capture_output=True, env=env, timeout=600)
        subprocess.run(
            [*apt, "install", "-y", "-qq", "--no-install-recommends", "chromium"],
            check=True,
            capture_output=True,
            env=env,
            timeout=900,
        )
    return find()


def render_report(html_path: Path, *, timeout_s: float = 120) -> dict[str, dict]:
    """Each result of the report (by path): name, MIME type, category, whether the navigation lists it, its
    caption text, and for images the decoded width/height in the browser."""
    binary = chromium_binary()
    if binary is None:
        raise FileNotFoundError("chromium: not on PATH; expected Debian's chromium package (apt-get install chromium).")
    html = Path(html_path).read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="report-probe-") as tmp:
        probed = Path(tmp) / "report.html"
        head, body_end, tail = html.rpartition("</body>")
        probed.write_text(head + PROBE + body_end + tail if body_end else html + PROBE, encoding="utf-8")
        # Chromium refuses to start its sandbox as root (CI runs as root in a container), so only there it runs
        # without it; it opens only this local file, written by our own report.
        sandbox = ["--no-sandbox"] if os.geteuid() == 0 else []
        command = [
            binary,
            "--headless",
            *sandbox,
            "--disable-gpu",
            "--disable-dev-shm-usage",
            f"--user-data-dir={Path(tmp) / 'profile'}",
            "--virtual-time-budget=600000",
            "--dump-dom",
            probed.as_uri(),
        ]
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, env={**os.environ, "HOME": tmp}
        )
    match = PROBE_OUTPUT.search(result.stdout)
    if match is None:
        raise AssertionError(
            f"{html_path}: the probe wrote nothing (chromium exit {result.returncode}): {result.stderr[-2000:]}"
        )
    found = json.loads(html_module.unescape(match.group(1)))
    if "__error__" in found:
        raise AssertionError(f"{html_path}: the report's JavaScript failed: {found['__error__']}")
    return found


def assert_report_shows_figures(html_path: Path, expected_paths: Iterable[str]) -> dict[str, dict]:
    """Render ``html_path`` in headless Chromium; assert that every path in ``expected_paths`` (as the workflow
    names it, e.g. ``results/tiny/figures/curves/owt-small.png``) is a result of the report, listed in its
    category's navigation (by its label or file name), with a caption, and, for images, decoded by the browser
    with a non-zero size. Returns the probe's records by path."""
    found = render_report(html_path)
    problems = []
    for path in expected_paths:
        record = found.get(str(path))
        if record is None:
            problems.append(f"{path}: not in the report")
            continue
        if not record["listed"]:
            problems.append(f"{path}: not listed under {record['category']}/{record['subcategory']}")
        if not record["caption"]:
            problems.append(f"{path}: no caption")
        if record["mime"].startswith("image/") and not (record.get("width", 0) > 0 and record.get("height", 0) > 0):
            problems.append(f"{path}: image not shown (no decoded <img> of its data URI)")
    assert not problems, f"{html_path}: " + "; ".join(problems)
    return found
