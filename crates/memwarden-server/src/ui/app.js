// memwarden's lineage page: a read-only view over the JSON API, with the caller's own API key.
// Everything the server sends is data: it is only ever put into the page as text
// (textContent, attribute values), never parsed as markup.
"use strict";
(function () {
  const KEY = "memwarden.apiKey";
  const SVG = "http://www.w3.org/2000/svg";
  const ID_RE = /^[0-9a-f]{32}$/;
  const NODES_MAX = 200; // lineage views fetched per graph at most
  const DECISION_PAGES_MAX = 20;
  const BOX_W = 190, BOX_H = 74, GAP_X = 40, GAP_Y = 50, PAD = 24;

  const $ = (id) => document.getElementById(id);

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function sv(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function status(text, state) {
    const s = $("status");
    s.textContent = text;
    s.dataset.state = state;
  }

  function notice(text, kind) {
    const n = $("notice");
    n.textContent = text;
    n.className = "notice" + (kind ? " " + kind : "");
    n.dataset.kind = kind || "error";
    n.hidden = !text;
  }

  class Problem extends Error {
    constructor(path, status, body) {
      super((body && (body.detail || body.title)) || "HTTP " + status);
      this.path = path;
      this.status = status;
      this.body = body || {};
    }
  }

  async function api(path) {
    const key = sessionStorage.getItem(KEY) || "";
    const r = await fetch(path, {
      headers: { Authorization: "Bearer " + key, Accept: "application/json" },
      cache: "no-store",
      credentials: "omit",
      redirect: "error",
    });
    let body = null;
    try {
      body = await r.json();
    } catch (_) {
      body = null;
    }
    if (!r.ok) throw new Problem(path, r.status, body);
    return body;
  }

  // Ids are time-ordered (their first 12 hex digits are a time): the last 8 tell them apart.
  const short = (id) => "…" + String(id).slice(-8);
  const iso = (ms) => (Number.isFinite(ms) ? new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "") : "");

  // ------------------------------------------------------------------------------------------
  // Key

  async function useKey(ev) {
    ev.preventDefault();
    const v = $("key").value.trim();
    if (v) sessionStorage.setItem(KEY, v);
    $("key").value = "";
    await whoami();
  }

  function forgetKey() {
    sessionStorage.removeItem(KEY);
    $("who").textContent = "";
    $("who").dataset.principal = "";
    reset();
    status("Key forgotten.", "idle");
  }

  async function whoami() {
    if (!sessionStorage.getItem(KEY)) {
      status("Enter an API key to begin.", "idle");
      return false;
    }
    try {
      const me = await api("/v1/principals/me");
      const p = me.principal || {};
      $("who").textContent = p.tenant + " / " + p.id + " (" + p.kind + ")";
      $("who").dataset.principal = p.id;
      $("who").dataset.kind = p.kind;
      status("Signed in. Enter a memory id.", "ready");
      return true;
    } catch (e) {
      sessionStorage.removeItem(KEY);
      $("who").textContent = "";
      status("", "idle");
      notice(e.status === 401 ? "The server refused this key (unknown or revoked)." : "Could not check the key: " + e.message, "error");
      return false;
    }
  }

  // ------------------------------------------------------------------------------------------
  // Graph: the memory, its ancestors, its descendants and their other parents.

  function reset() {
    notice("");
    for (const id of ["graph-section", "decisions-section", "log-section"]) $(id).hidden = true;
    clear($("graph"));
    clear($("node-detail"));
    clear($("decisions").tBodies[0]);
    clear($("log-entries").tBodies[0]);
    $("log-verify").textContent = "";
  }

  async function collect(rootView) {
    const views = new Map([[rootView.id, rootView]]);
    const refused = new Map();
    const fetchView = async (id) => {
      if (views.has(id) || refused.has(id) || views.size + refused.size >= NODES_MAX) return null;
      try {
        const v = await api("/v1/memories/" + id + "/lineage");
        views.set(id, v);
        return v;
      } catch (e) {
        refused.set(id, e);
        return null;
      }
    };
    // Ancestors, breadth first.
    let level = rootView.parents.slice();
    while (level.length) {
      const next = [];
      for (const id of level) {
        const v = await fetchView(id);
        if (v) next.push(...v.parents);
      }
      level = next;
    }
    // Descendants, breadth first, and the other parents of each (not walked further).
    level = rootView.children.slice();
    const descendants = [];
    while (level.length) {
      const next = [];
      for (const id of level) {
        const v = await fetchView(id);
        if (v) {
          descendants.push(v);
          next.push(...v.children);
        }
      }
      level = next;
    }
    for (const d of descendants) for (const p of d.parents) await fetchView(p);
    return { views, refused };
  }

  function flagsOf(v) {
    const r = v.record || {};
    const s = r.summary || {};
    const out = [];
    if (r.poisoned) out.push("poisoned");
    else if (s.poisoned) out.push("poisoned-path");
    if (v.affected) out.push("affected");
    if (r.erased) out.push("erased");
    if (r.verified_by && r.verified_by.length) out.push("verified");
    if (r.scope && r.scope.visibility && r.scope.visibility !== "shared" && r.scope.visibility !== "active") out.push(String(r.scope.visibility));
    return out;
  }

  // Deterministic layered layout: a node's layer is one below its lowest parent in the set
  // (parents have smaller graph sequence numbers); nodes in a layer are ordered by sequence.
  function layout(views, refused) {
    const nodes = [...views.values()].sort((a, b) => (a.record.seq || 0) - (b.record.seq || 0));
    const layer = new Map();
    for (const v of nodes) {
      let l = 0;
      for (const p of v.parents) if (layer.has(p)) l = Math.max(l, layer.get(p) + 1);
      layer.set(v.id, l);
    }
    // A source (no parent shown) sits right above its nearest child shown.
    for (const v of [...nodes].reverse()) {
      if (v.parents.some((p) => layer.has(p))) continue;
      const below = v.children.filter((c) => layer.has(c)).map((c) => layer.get(c) - 1);
      if (below.length) layer.set(v.id, Math.min(...below));
    }
    const items = nodes.map((v) => ({ kind: "memory", id: v.id, view: v, layer: layer.get(v.id) }));
    // What the caller may not see: placeholders above (parents) or below (children).
    for (const v of nodes) {
      if (v.parents_hidden > 0) items.push({ kind: "hidden", id: "hidden-parents-" + v.id, of: v.id, dir: "parents", count: v.parents_hidden, layer: layer.get(v.id) - 1 });
      const notShown = v.children_hidden + v.children.filter((c) => !views.has(c) && !refused.has(c)).length;
      if (notShown > 0) items.push({ kind: "hidden", id: "hidden-children-" + v.id, of: v.id, dir: "children", count: notShown, layer: layer.get(v.id) + 1 });
    }
    for (const [id, e] of refused) items.push({ kind: "refused", id: id, error: e, layer: 0 });
    const min = Math.min(...items.map((i) => i.layer));
    const rows = new Map();
    for (const i of items) {
      i.layer -= min;
      if (!rows.has(i.layer)) rows.set(i.layer, []);
      rows.get(i.layer).push(i);
    }
    // Memories first, from the left; what is not shown to the caller in columns of its own at
    // the right, so that no edge between memories runs through a placeholder.
    const cols = Math.max(...[...rows.values()].map((row) => row.filter((i) => i.kind === "memory").length));
    let width = 0;
    for (const [l, row] of rows) {
      const mem = row.filter((i) => i.kind === "memory");
      const rest = row.filter((i) => i.kind !== "memory");
      mem.forEach((i, k) => (i.col = k));
      rest.forEach((i, k) => (i.col = cols + k));
      for (const i of row) {
        i.x = PAD + i.col * (BOX_W + GAP_X);
        i.y = PAD + l * (BOX_H + GAP_Y);
        width = Math.max(width, i.x + BOX_W + PAD);
      }
    }
    const height = PAD * 2 + (Math.max(...rows.keys()) + 1) * (BOX_H + GAP_Y) - GAP_Y;
    return { items, width, height };
  }

  function drawEdge(g, from, to, cls, attrs, label) {
    const x1 = from.x + BOX_W / 2, y1 = from.y + BOX_H, x2 = to.x + BOX_W / 2, y2 = to.y;
    const my = (y1 + y2) / 2;
    const path = sv("path", Object.assign({ class: "edge " + cls, d: `M${x1},${y1} C${x1},${my} ${x2},${my} ${x2},${y2 - 2}`, "marker-end": "url(#arrow)" }, attrs));
    g.appendChild(path);
    if (label) g.appendChild(sv("text", { class: "edge-label", x: (x1 + x2) / 2 + 4, y: my - 2 }, label));
  }

  function drawNode(g, i, rootId) {
    if (i.kind === "memory") {
      const v = i.view;
      const r = v.record;
      const flags = flagsOf(v);
      const cls = ["node", "label-" + r.integrity, v.id === rootId ? "root" : ""].join(" ").trim();
      const n = sv("g", {
        class: cls,
        id: "node-" + v.id,
        "data-memory-id": v.id,
        "data-label": r.integrity,
        "data-writer": r.writer,
        "data-kind": r.kind,
        "data-flags": flags.join(" "),
        "data-parents-hidden": v.parents_hidden,
        "data-children-hidden": v.children_hidden,
        "data-rho": v.path_trust.rho,
        tabindex: 0,
        transform: `translate(${i.x},${i.y})`,
      });
      n.appendChild(sv("title", {}, v.id));
      n.appendChild(sv("rect", { width: BOX_W, height: BOX_H, rx: 6 }));
      n.appendChild(sv("text", { x: 8, y: 16 }, short(v.id) + " · " + r.kind));
      n.appendChild(sv("text", { x: 8, y: 32 }, r.integrity + " · by " + r.writer));
      n.appendChild(sv("text", { x: 8, y: 48 }, "trust ρ " + Number(v.path_trust.rho).toFixed(2)));
      if (flags.length) n.appendChild(sv("text", { class: "flags", x: 8, y: 66 }, flags.join(" ")));
      n.addEventListener("click", () => detail(v));
      n.addEventListener("keydown", (e) => e.key === "Enter" && detail(v));
      g.appendChild(n);
      return;
    }
    const isRefused = i.kind === "refused";
    const n = sv("g", {
      class: "hidden-node" + (isRefused ? " refused" : ""),
      id: isRefused ? "refused-" + i.id : i.id,
      "data-hidden-of": i.of || "",
      "data-direction": i.dir || "",
      "data-count": i.count || 1,
      "data-memory-id": isRefused ? i.id : "",
      transform: `translate(${i.x},${i.y})`,
    });
    n.appendChild(sv("rect", { width: BOX_W, height: BOX_H, rx: 6 }));
    if (isRefused) {
      n.appendChild(sv("text", { x: 8, y: 20 }, short(i.id) + " · " + (i.error.body.code || "refused")));
      n.appendChild(sv("text", { x: 8, y: 38 }, "not shown to you"));
    } else {
      n.appendChild(sv("text", { x: 8, y: 20 }, "+" + i.count + " " + (i.dir === "parents" ? "parent" : "child") + (i.count > 1 ? (i.dir === "parents" ? "s" : "ren") : "")));
      n.appendChild(sv("text", { x: 8, y: 38 }, "not shown to you"));
    }
    g.appendChild(n);
  }

  function draw(graph, rootId) {
    const svg = $("graph");
    clear(svg);
    svg.setAttribute("width", graph.width);
    svg.setAttribute("height", graph.height);
    svg.setAttribute("viewBox", `0 0 ${graph.width} ${graph.height}`);
    const defs = sv("defs");
    const marker = sv("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
    marker.appendChild(sv("path", { d: "M0,0 L10,5 L0,10 z", fill: "#55607a" }));
    defs.appendChild(marker);
    svg.appendChild(defs);
    const edges = sv("g", { id: "edges" });
    const nodes = sv("g", { id: "nodes" });
    svg.appendChild(edges);
    svg.appendChild(nodes);
    const at = new Map(graph.items.map((i) => [i.id, i]));
    for (const i of graph.items) {
      if (i.kind === "memory") {
        for (const p of i.view.record.parents || []) {
          const from = at.get(p.id);
          if (from && from.kind === "memory") drawEdge(edges, from, i, "", { "data-from": p.id, "data-to": i.id, "data-edge-kind": p.kind }, p.kind);
        }
      } else if (i.kind === "hidden") {
        const of = at.get(i.of);
        if (i.dir === "parents") drawEdge(edges, i, of, "to-hidden", { "data-hidden-edge": i.of });
        else drawEdge(edges, of, i, "to-hidden", { "data-hidden-edge": i.of });
      }
    }
    for (const i of graph.items) drawNode(nodes, i, rootId);
  }

  function detail(v) {
    const dl = $("node-detail");
    clear(dl);
    for (const n of document.querySelectorAll("#graph .node.selected")) n.classList.remove("selected");
    const g = $("node-" + v.id);
    if (g) g.classList.add("selected");
    const r = v.record;
    const t = v.path_trust;
    const rows = [
      ["memory", v.id],
      ["kind", r.kind],
      ["label", r.integrity],
      ["writer", r.writer],
      ["created", iso(r.created_ms) + " UTC"],
      ["visibility", r.scope ? r.scope.visibility : ""],
      ["parents", (r.parents || []).map((p) => short(p.id) + " (" + p.kind + ")").join(", ") + (v.parents_hidden ? ` +${v.parents_hidden} not shown` : "")],
      ["children", v.children.map(short).join(", ") + (v.children_hidden ? ` +${v.children_hidden} not shown` : "")],
      ["path trust", `ρ ${t.rho.toFixed(3)} (S ${t.s.toFixed(2)}, I ${t.i.toFixed(2)}, F ${t.f.toFixed(2)}, P ${t.p.toFixed(2)}, V ${t.v.toFixed(2)}, A ${t.a.toFixed(2)})`],
      ["flags", flagsOf(v).join(", ") || "none"],
    ];
    for (const [k, val] of rows) {
      dl.appendChild(el("dt", {}, k));
      dl.appendChild(el("dd", {}, val));
    }
  }

  // ------------------------------------------------------------------------------------------
  // Decisions and the verdict log

  async function decisions(id) {
    const out = [];
    let cursor = null;
    for (let page = 0; page < DECISION_PAGES_MAX; page++) {
      const q = "/v1/memories/" + id + "/decisions?limit=100" + (cursor ? "&cursor=" + encodeURIComponent(cursor) : "");
      const r = await api(q);
      out.push(...r.decisions);
      cursor = r.next_cursor;
      if (!cursor) break;
    }
    return out;
  }

  function why(v) {
    if (!v) return "";
    if (typeof v.cause === "string") return v.cause;
    if (v.cause && v.cause.shredded) return "(erased: its cause was shredded)";
    return "";
  }

  function showDecisions(list) {
    const body = $("decisions").tBodies[0];
    for (const d of list) {
      const tr = el("tr", { "data-log-index": d.log_index, "data-decision": d.decision, "data-actor": d.actor, "data-cited-as": d.cited_as.join(" ") });
      tr.appendChild(el("td", { class: "mono" }, d.log_index));
      tr.appendChild(el("td", {}, iso(d.time_ms)));
      tr.appendChild(el("td", {}, d.actor));
      tr.appendChild(el("td", { class: "mono" }, d.tool));
      tr.appendChild(el("td", {}, d.cited_as.join(", ")));
      tr.appendChild(el("td", { class: "decision-" + d.decision }, d.decision));
      tr.appendChild(el("td", {}, d.layer + " / " + d.rule));
      tr.appendChild(el("td", {}, why(d.verdict)));
      body.appendChild(tr);
    }
    $("decisions-empty").hidden = list.length > 0;
    $("decisions-section").hidden = false;
  }

  const unhex = (h) => new Uint8Array((h.match(/../g) || []).map((b) => parseInt(b, 16)));
  const hex = (b) => [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, "0")).join("");

  async function nodeHash(l, r) {
    const buf = new Uint8Array(1 + l.length + r.length);
    buf[0] = 1;
    buf.set(l, 1);
    buf.set(r, 1 + l.length);
    return new Uint8Array(await crypto.subtle.digest("SHA-256", buf));
  }

  // RFC 9162 §2.1.3.2: verify an inclusion proof of a leaf hash in a tree of `size` leaves.
  async function verifyInclusion(leafHex, index, size, proofHex, rootHex) {
    if (!(window.crypto && crypto.subtle)) return null;
    if (index >= size) return false;
    let fn = index, sn = size - 1;
    let r = unhex(leafHex);
    for (const p of proofHex.map(unhex)) {
      if (sn === 0) return false;
      if (fn % 2 === 1 || fn === sn) {
        r = await nodeHash(p, r);
        if (fn % 2 === 0) {
          while (fn % 2 === 0 && fn !== 0) {
            fn = Math.floor(fn / 2);
            sn = Math.floor(sn / 2);
          }
        }
      } else {
        r = await nodeHash(r, p);
      }
      fn = Math.floor(fn / 2);
      sn = Math.floor(sn / 2);
    }
    return sn === 0 && hex(r) === rootHex;
  }

  async function showLog(list) {
    const v = await api("/v1/audit/verify");
    const p = $("log-verify");
    p.dataset.ok = v.ok;
    p.dataset.entries = v.entries;
    clear(p);
    p.appendChild(el("span", { class: v.ok ? "ok" : "bad" }, v.ok ? "✓ log verifies" : "✗ log does not verify"));
    p.appendChild(document.createTextNode(` — ${v.entries} entries, root ${v.root.slice(0, 8)}…, ${v.checkpoints_checked} signed checkpoints checked` + (v.ok ? "" : `; first bad entry ${v.first_bad_index}: ${v.problem}`)));
    const body = $("log-entries").tBodies[0];
    for (const d of list) {
      const pr = await api("/v1/audit/proof/" + d.log_index);
      const mine = await verifyInclusion(pr.leaf, pr.index, pr.size, pr.proof, pr.root);
      const tr = el("tr", { "data-log-index": pr.index, "data-kind": pr.kind, "data-verified": pr.verified, "data-checked": mine === null ? "unavailable" : mine });
      tr.appendChild(el("td", { class: "mono" }, pr.index));
      tr.appendChild(el("td", {}, pr.kind + (pr.body_withheld ? " (body withheld)" : "")));
      tr.appendChild(el("td", { class: "mono", title: pr.leaf }, pr.leaf.slice(0, 8) + "…"));
      tr.appendChild(el("td", { class: "mono", title: pr.root }, pr.root.slice(0, 8) + "… (" + pr.size + ")"));
      tr.appendChild(el("td", { class: "mono" }, pr.proof.length + " hashes"));
      tr.appendChild(el("td", { class: pr.verified ? "ok" : "bad" }, pr.verified ? "✓ verified" : "✗ not verified"));
      tr.appendChild(el("td", { class: mine ? "ok" : mine === null ? "" : "bad" }, mine === null ? "no WebCrypto here" : mine ? "✓ recomputed root" : "✗ root differs"));
      body.appendChild(tr);
    }
    $("log-section").hidden = false;
  }

  // ------------------------------------------------------------------------------------------
  // Showing a memory

  function refusal(e) {
    const b = e.body || {};
    if (e.status === 403 && b.code === "withheld") {
      const w = b.withheld || {};
      return ["Withheld: this memory is in your scope, but the " + (w.layer || "?") + " layer holds it back (" + (w.rule || b.detail || "") + ").", "withheld"];
    }
    if (e.status === 403) return ["Forbidden: " + (b.detail || "this key may not see it") + ".", "forbidden"];
    if (e.status === 404) return ["Not found: no such memory, or not one you may see.", "not-found"];
    if (e.status === 401) return ["The key was refused (unknown or revoked).", "unauthorized"];
    if (e.status === 409) return ["The lineage layer is off on this server.", "layer-off"];
    return ["The server answered " + e.status + ": " + (b.detail || e.message), "error"];
  }

  async function show(ev) {
    if (ev) ev.preventDefault();
    const id = $("memory-id").value.trim().toLowerCase();
    reset();
    if (!ID_RE.test(id)) {
      notice("A memory id is 32 hex digits.", "error");
      return;
    }
    if (!sessionStorage.getItem(KEY) && !(await whoami())) return;
    history.replaceState(null, "", "#" + id);
    status("Loading " + short(id) + "…", "loading");
    try {
      const root = await api("/v1/memories/" + id + "/lineage");
      const { views, refused } = await collect(root);
      draw(layout(views, refused), id);
      detail(root);
      $("graph-section").hidden = false;
      const ds = await decisions(id);
      showDecisions(ds);
      await showLog(ds);
      status(`Shown: ${views.size} memories, ${ds.length} decisions.`, "done");
    } catch (e) {
      if (!(e instanceof Problem)) {
        status("", "failed");
        notice("The page failed: " + e.message, "error");
        return;
      }
      const [text, kind] = refusal(e);
      notice(text, kind);
      status("Not shown.", "refused");
    }
  }

  document.addEventListener("DOMContentLoaded", async () => {
    $("key-form").addEventListener("submit", useKey);
    $("key-forget").addEventListener("click", forgetKey);
    $("memory-form").addEventListener("submit", show);
    const fromHash = location.hash.slice(1).toLowerCase();
    if (ID_RE.test(fromHash)) $("memory-id").value = fromHash;
    if ((await whoami()) && ID_RE.test(fromHash)) await show(null);
  });
})();
