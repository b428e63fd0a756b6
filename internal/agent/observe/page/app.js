// roam's web view: one server-sent event stream, no build step. Every
// string from the server goes into the page as text, never as markup.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  let token = "";
  const m = /(?:^#|&)token=([A-Za-z0-9_-]+)/.exec(location.hash);
  if (m) {
    token = m[1];
    sessionStorage.setItem("roam-token", token);
    history.replaceState(null, "", location.pathname);
  } else {
    token = sessionStorage.getItem("roam-token") || "";
  }
  let windowS = 300;
  const hist = new Map(); // node id -> [[t, load, memBytes]]
  let latest = [];

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function fmtBytes(b) {
    if (b == null) return "?";
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return b.toFixed(i ? 1 : 0) + " " + u[i];
  }
  function addSample(s) {
    const t = Date.parse(s.at) / 1000;
    for (const n of s.nodes) {
      if (!hist.has(n.id)) hist.set(n.id, []);
      const h = hist.get(n.id);
      h.push([t, n.load, n.mem_free_bytes]);
      while (h.length && h[0][0] < t - windowS) h.shift();
    }
    latest = s.nodes;
  }
  function line(points, cls, max) {
    const p = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
    p.setAttribute("class", cls);
    p.setAttribute("points", points.map(([x, y]) => x.toFixed(1) + "," + (50 - (y / max) * 48).toFixed(1)).join(" "));
    return p;
  }
  function drawNodes() {
    const box = $("nodes");
    box.replaceChildren();
    const now = Date.now() / 1000;
    for (const n of latest) {
      const card = el("div", undefined, "node" + (n.alive ? "" : " dead") + (n.draining ? " draining" : ""));
      card.dataset.node = n.id;
      card.append(el("h3", "node " + n.id + (n.self ? " (this one)" : "")));
      const state = n.alive ? (n.draining ? "draining" : "alive") : "dead";
      card.append(el("div", state + " · capacity " + n.capacity.toFixed(2) + (n.version ? " · " + n.version : "")));
      const load = el("div", "load " + (n.load == null ? "?" : n.load.toFixed(2)) + " · free " + fmtBytes(n.mem_free_bytes), "figures");
      card.append(load);
      const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
      svg.setAttribute("viewBox", "0 0 300 50");
      svg.setAttribute("preserveAspectRatio", "none");
      const h = hist.get(n.id) || [];
      const x = (t) => 300 - (now - t) / windowS * 300;
      const maxLoad = Math.max(1, ...h.map((p) => p[1] || 0));
      const maxMem = Math.max(1, ...h.map((p) => p[2] || 0));
      svg.append(line(h.filter((p) => p[1] != null).map((p) => [x(p[0]), p[1]]), "load", maxLoad));
      svg.append(line(h.filter((p) => p[2] != null).map((p) => [x(p[0]), p[2]]), "mem", maxMem));
      svg.append(el("title", "red: load (max " + maxLoad.toFixed(2) + "), blue: free memory, last " + Math.round(windowS / 60) + " minutes"));
      card.append(svg);
      box.append(card);
    }
  }
  function drawJobs(v) {
    $("pending").textContent = v.pending;
    $("running").textContent = v.total.running || 0;
    const body = $("jobs").tBodies[0];
    body.replaceChildren();
    for (const j of v.jobs) {
      const tr = el("tr");
      tr.dataset.job = j.id;
      tr.dataset.node = j.node;
      for (const [t, c] of [[j.id], [j.user], [j.node], [j.state], [j.migrations], [j.cmd, "cmd"]]) tr.append(el("td", t, c));
      body.append(tr);
    }
    $("nojobs").hidden = v.jobs.length > 0;
    const others = $("others");
    others.replaceChildren();
    const nodes = Object.keys(v.others).sort();
    for (const node of nodes) {
      const parts = Object.entries(v.others[node]).map(([s, n]) => n + " " + s);
      const li = el("li", "node " + node + ": " + parts.join(", "));
      li.dataset.node = node;
      li.dataset.count = Object.values(v.others[node]).reduce((a, b) => a + b, 0);
      others.append(li);
    }
    if (!nodes.length) others.append(el("li", "none"));
  }
  function addEvent(e) {
    const li = el("li", undefined, e.kind);
    li.dataset.kind = e.kind;
    li.dataset.job = e.job || "";
    li.dataset.from = e.from || "";
    li.dataset.to = e.to || "";
    li.dataset.seen = Date.parse(e.seen);
    li.dataset.shown = Date.now();
    const at = new Date(e.at).toLocaleTimeString();
    let what = e.kind + " " + (e.job ? "job " + e.job : "a job of another user");
    if (!e.job && e.kind !== "place" && e.kind.indexOf("migrate") !== 0 && e.kind !== "lost") what = e.kind;
    if (e.from) what += " from node " + e.from;
    if (e.to) what += " to node " + e.to;
    if (e.freeze_ms) what += " (frozen " + e.freeze_ms.toFixed(0) + " ms)";
    if (e.why) what += ": " + e.why;
    li.textContent = at + " " + what;
    const list = $("events");
    list.prepend(li);
    while (list.children.length > 100) list.lastChild.remove();
  }

  const es = new EventSource("events" + (token ? "?token=" + encodeURIComponent(token) : ""));
  es.onopen = () => { $("conn").textContent = "live"; $("conn").className = "on"; };
  es.onerror = () => { $("conn").textContent = "reconnecting"; $("conn").className = "off"; };
  es.addEventListener("hello", (ev) => {
    const h = JSON.parse(ev.data);
    windowS = h.window_s;
    $("scope").textContent = "seen as " + h.scope;
    document.body.dataset.scope = h.scope;
    $("window").textContent = "load (red) and free memory (blue), last " + Math.round(windowS / 60) + " minutes";
    hist.clear();
    for (const s of h.history || []) addSample(s);
    $("events").replaceChildren();
    drawNodes();
  });
  es.addEventListener("nodes", (ev) => { addSample(JSON.parse(ev.data)); drawNodes(); });
  es.addEventListener("jobs", (ev) => drawJobs(JSON.parse(ev.data)));
  es.addEventListener("event", (ev) => addEvent(JSON.parse(ev.data)));
})();
