"""report.html of the 1024-rank synthetic run (scripts/scale_model.sh) opened in headless
Chromium: the DOM it builds has the host x host maps (one cell per host pair) and the host
details. Exits 77 (ctest: skipped) with a message when no Chromium is installed
(apt-get install --no-install-recommends chromium: about 120 MB to download, 410 MB on disk),
1 instead when CS_REQUIRE_BROWSER=1 (.ci/run)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def main():
    browser = next((b for b in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome")
                    if b and shutil.which(b)), None)
    if not browser:
        # CI (.ci/run) installs Chromium and sets CS_REQUIRE_BROWSER=1: a skip there is a failure.
        required = os.environ.get("CS_REQUIRE_BROWSER") == "1"
        print("%s: no Chromium found (chromium, chromium-browser, google-chrome or $CHROMIUM); "
              "install it with apt-get install --no-install-recommends chromium to run this check%s"
              % ("FAILED" if required else "SKIPPED", " (CS_REQUIRE_BROWSER=1)" if required else ""))
        return 1 if required else 77
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        p = subprocess.run([os.path.join(REPO, "scripts", "scale_model.sh"), "--ranks", "1024", "--hosts", "128",
                            "--out", out], capture_output=True, text=True, timeout=280)
        if p.returncode != 0:
            print("scale_model.sh failed:\n" + p.stdout + p.stderr)
            return 1
        page = os.path.join(out, "report.html")
        size = os.path.getsize(page)
        d = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + tmp + "/prof",
                            "--virtual-time-budget=5000", "--dump-dom", "file://" + page],
                           capture_output=True, text=True, timeout=240)
        dom = d.stdout
    fails = []
    if d.returncode != 0 or not dom.strip():
        fails.append("chromium exited %d, %d bytes of DOM:\n%s" % (d.returncode, len(dom), d.stderr[-2000:]))
    maps = len(re.findall(r'<svg class="heatmap hostmap"', dom))
    cells = len(re.findall(r'<rect class="hcell"', dom))
    details = len(re.findall(r'<div class="hostd" id="hd-\d+"', dom))
    if maps != 2:
        fails.append("%d host maps in the DOM (2 expected)" % maps)
    if cells != 2 * 128 * 128:
        fails.append("%d host cells in the DOM (%d expected)" % (cells, 2 * 128 * 128))
    if details != 128:
        fails.append("%d host details in the DOM (128 expected)" % details)
    if "<script" in dom:
        fails.append("a script in the DOM")
    print("%s: report.html %d bytes; DOM %d bytes, %d maps, %d cells, %d host details" % (browser, size, len(dom), maps,
                                                                                      cells, details))
    for f in fails:
        print("FAILED: " + f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
