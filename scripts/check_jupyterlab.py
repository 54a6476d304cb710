"""Check that the explorer widget renders in a real JupyterLab, and save a screenshot.

    .venv/bin/python scripts/check_jupyterlab.py [--out docs/jupyterlab_explorer.png]

Starts JupyterLab on 127.0.0.1 (random token, fresh settings and workspace) over a temporary
copy of notebooks/01_quick_start.ipynb (so nothing is written into the committed notebook),
opens it in headless Chromium driven by playwright-core (npm-installed into build/ on first
use; Chromium is the Debian package at /usr/bin/chromium: ``apt-get install -y chromium``),
runs all cells from the Run menu, waits for the explorer (its controls and figure) and saves a
screenshot. Exit status 0 when the widget rendered; the JSON summary goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NODE_DIR = ROOT / "build" / "jupyterlab-check"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]

DRIVER = r"""
const { chromium } = require('playwright-core');
const [url, shot, chromiumPath, profile, flags] = process.argv.slice(2);
(async () => {
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath, headless: true, args: JSON.parse(flags),
    viewport: { width: 1500, height: 1250 }, deviceScaleFactor: 1 });
  const page = context.pages()[0] || await context.newPage();
  const result = { widget: false };
  try {
    await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 120000 });
    await page.waitForSelector('.jp-Notebook .jp-Cell', { timeout: 120000 });
    await page.waitForSelector('.jp-Notebook-ExecutionIndicator[data-status="idle"], #jp-main-statusbar :text("Idle")',
                               { timeout: 120000 }).catch(() => {});
    await page.waitForTimeout(1500);
    await page.getByRole('menuitem', { name: 'Run', exact: true }).click();
    await page.getByRole('menuitem', { name: /^Run All Cells/ }).click();
    const explorer = page.locator('.profkit-explorer');
    await explorer.waitFor({ state: 'visible', timeout: 240000 });
    await explorer.locator('img').first().waitFor({ state: 'visible', timeout: 120000 });
    await page.waitForTimeout(1500);
    await explorer.scrollIntoViewIfNeeded();
    const box = await explorer.boundingBox();
    await page.evaluate(() => {
      const el = document.querySelector('.profkit-explorer');
      el.closest('.jp-Cell').scrollIntoView({ block: 'start' });
    });
    await page.waitForTimeout(800);
    await page.screenshot({ path: shot });
    result.widget = true;
    result.dropdowns = await explorer.locator('select').count();
    result.sliders = await explorer.locator('.widget-slider, .jupyter-widgets.widget-slider').count();
    result.images = await explorer.locator('img').count();
    result.card = (await explorer.locator('pre').first().innerText()).split('\n')[0];
    result.table_rows = await explorer.locator('table tbody tr').count();
    result.box = box;
    result.figures_in_notebook = await page.locator('.jp-OutputArea-output img').count();
  } catch (err) {
    result.error = String(err);
    await page.screenshot({ path: shot }).catch(() => {});
  }
  console.log(JSON.stringify(result));
  await context.close();
})();
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ensure_playwright() -> Path:
    if not (NODE_DIR / "node_modules" / "playwright-core").is_dir():
        if shutil.which("npm") is None:
            raise SystemExit("npm is needed to install playwright-core (apt-get install -y npm)")
        NODE_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(NODE_DIR),
                        "playwright-core"], check=True)
    return NODE_DIR


def _chromium() -> str:
    for candidate in ("/usr/bin/chromium", shutil.which("chromium") or "", shutil.which("chromium-browser") or ""):
        if candidate and Path(candidate).exists():
            return candidate
    raise SystemExit("Chromium not found: apt-get install -y chromium")


def _wait_for_server(port: int, token: str, proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"JupyterLab exited with status {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"JupyterLab did not answer on port {port} within {timeout:.0f} s")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "jupyterlab_explorer.png"), help="screenshot path")
    parser.add_argument("--notebook", default=str(ROOT / "notebooks" / "01_quick_start.ipynb"))
    args = parser.parse_args(argv)
    node_dir = _ensure_playwright()
    chromium = _chromium()
    work = Path(tempfile.mkdtemp(prefix="profkit-lab-"))
    (work / "notebooks").mkdir()
    shutil.copy(args.notebook, work / "notebooks" / Path(args.notebook).name)
    (work / "data").symlink_to(ROOT / "data")
    (work / "tests").symlink_to(ROOT / "tests")
    settings = work / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false",
                                                                         "checkForUpdates": False}))
    (work / "driver.js").write_text(DRIVER)
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(work / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(work / "workspaces"), "NODE_PATH": str(node_dir / "node_modules")}
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={work}",
               "--LabApp.extension_manager=readonly"]  # no PyPI look-ups from the extension manager
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")  # CI containers run as root
    lab = subprocess.Popen(command,
                           env=env, stdout=subprocess.DEVNULL, stderr=open(work / "lab.log", "w"),
                           start_new_session=True)
    try:
        _wait_for_server(port, token, lab)
        url = f"http://127.0.0.1:{port}/lab/tree/notebooks/{Path(args.notebook).name}?token={token}&reset"
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["node", str(work / "driver.js"), url, str(Path(args.out).resolve()), chromium,
                               str(work / "profile"), json.dumps(CHROMIUM_FLAGS)],
                              env=env, capture_output=True, text=True, timeout=600, cwd=node_dir)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        result = json.loads(lines[-1]) if lines else {"widget": False, "error": done.stderr[-2000:]}
    finally:
        if lab.poll() is None:
            os.killpg(lab.pid, signal.SIGTERM)  # the server and the kernels it started
            try:
                lab.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(lab.pid, signal.SIGKILL)
    result["screenshot"] = args.out
    print(json.dumps(result, indent=2))
    if result.get("widget"):
        shutil.rmtree(work, ignore_errors=True)
        return 0
    print(f"JupyterLab log: {work / 'lab.log'}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
