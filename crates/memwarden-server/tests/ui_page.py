"""Drive memwarden's lineage page (/ui) in headless Chromium and report what it rendered.

Called by tests/ui_page.rs with one JSON argument:
  {"base": "http://127.0.0.1:PORT", "chromium": "/usr/bin/chromium",
   "views": [{"name": ..., "key": ..., "memory": ..., "screenshot": path or null}]}
Prints one JSON line: for each view, the page's nodes, edges, hidden placeholders, decisions,
verdict-log rows, notice, every console message and every failed request. The Rust test asserts
on it. Playwright never downloads a browser here: it launches the system Chromium.
"""

import json
import sys
import time

from playwright.sync_api import sync_playwright

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

COLLECT = """() => {
  const data = (sel) => [...document.querySelectorAll(sel)].map((n) => Object.assign({text: n.textContent}, n.dataset));
  return {
    status: document.getElementById("status").dataset.state,
    who: document.getElementById("who").dataset.principal || "",
    notice: document.getElementById("notice").hidden ? null : {text: document.getElementById("notice").textContent, kind: document.getElementById("notice").dataset.kind},
    graph_shown: !document.getElementById("graph-section").hidden,
    nodes: data("#graph .node"),
    hidden: data("#graph .hidden-node"),
    edges: data("#graph path.edge"),
    decisions: data("#decisions tbody tr"),
    log_verify: Object.assign({text: document.getElementById("log-verify").textContent}, document.getElementById("log-verify").dataset),
    log: data("#log-entries tbody tr"),
    body_text: document.body.innerText,
  };
}"""


def run_view(browser, base, view):
    context = browser.new_context(viewport={"width": 1000, "height": 700}, device_scale_factor=1)
    page = context.new_page()
    console, failed, responses = [], [], []
    page.on("console", lambda m: console.append({"type": m.type, "text": m.text}))
    page.on("pageerror", lambda e: console.append({"type": "pageerror", "text": str(e)}))
    page.on("requestfailed", lambda r: failed.append({"url": r.url, "failure": r.failure}))
    page.on("response", lambda r: responses.append({"url": r.url, "status": r.status}))
    first = page.goto(base + "/ui")
    headers = first.headers if first else {}
    page.fill("#key", view["key"])
    page.click("#key-use")
    page.wait_for_selector("#status[data-state=ready]", timeout=20000, state="attached")
    page.fill("#memory-id", view["memory"])
    start = time.monotonic()
    page.click("#memory-show")
    page.wait_for_selector("#status[data-state=done], #status[data-state=refused], #status[data-state=failed]", timeout=30000, state="attached")
    elapsed_ms = round((time.monotonic() - start) * 1000)
    out = page.evaluate(COLLECT)
    if view.get("screenshot"):
        page.screenshot(path=view["screenshot"], full_page=True)
    context.close()
    out.update(elapsed_ms=elapsed_ms, name=view["name"], console=console, failed=failed, responses=responses, csp=headers.get("content-security-policy", ""))
    return out


def main():
    args = json.loads(sys.argv[1])
    report = {"ok": True, "views": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args["chromium"], args=CHROMIUM_ARGS, headless=True)
        try:
            for view in args["views"]:
                report["views"].append(run_view(browser, args["base"], view))
        finally:
            browser.close()
    print(json.dumps(report))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # the Rust test prints it
        print(json.dumps({"ok": False, "error": repr(e)}))
        sys.exit(1)
