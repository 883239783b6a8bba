// rota dashboard: vanilla JS, no build step. Every page reads the JSON API (/api/...) with
// the session cookie and redraws on a timer. Values from the API are inserted as text
// nodes only (never as HTML), so job arguments and tracebacks cannot inject markup.
"use strict";

const body = document.body;
const PAGE = body.dataset.page;
const POLL = Number(body.dataset.poll || 3000);
const PARAMS = JSON.parse(body.dataset.params || "{}");
const PERMS = new Set(JSON.parse(body.dataset.perms || "[]"));
// The path prefix the dashboard is served under ("" or e.g. "/rota"): every link and API
// call starts with it.
const ROOT = body.dataset.root || "";
const HIDDEN = "<hidden>";
const can = (p) => PERMS.has(p);

// --- helpers -------------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  if (tag === "td" && attrs && /\btrunc\b/.test(attrs.class || "")) {
    // A table cell ignores max-width: clip the text in a block inside it instead.
    const { class: cls, style, ...rest } = attrs;
    return el("td", { ...rest, class: cls.replace(/\btrunc\b/, "").trim() || null, title: rest.title || (typeof children[0] === "string" ? children[0] : null) },
      el("div", { class: "clip " + (cls.includes("mono") ? "mono" : ""), style }, ...children));
  }
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}
const $ = (id) => document.getElementById(id);
const fill = (node, ...children) => {
  node.replaceChildren(...children.flat());
  if (node.tagName === "TBODY") tidy(node);
};
// A column empty in every row says nothing: hide it, so the others (errors, tasks) get
// its room. A cell counts as empty when it holds no text but a dash and no control.
const BLANK = new Set(["", "—", "–", "-"]);
function tidy(tbody) {
  const table = tbody.closest("table");
  const head = table && table.tHead && table.tHead.rows[0];
  if (!head) return;
  const rows = [...tbody.rows].filter((r) => !r.querySelector("td.empty"));
  [...head.cells].forEach((th, i) => {
    const empty = rows.length > 0 && rows.every((r) => {
      const c = r.cells[i];
      return !c || (BLANK.has(c.textContent.trim()) && !c.querySelector("button, input, svg, i, a"));
    });
    th.classList.toggle("gone", empty);
    for (const r of rows) if (r.cells[i]) r.cells[i].classList.toggle("gone", empty);
  });
}

async function api(path, options = {}) {
  const init = { credentials: "same-origin", headers: { "X-Rota-Request": "1" }, ...options };
  if (options.json !== undefined) {
    init.body = JSON.stringify(options.json);
    init.headers["Content-Type"] = "application/json";
  }
  const res = await fetch(ROOT + path, init);
  if (res.status === 401 && PAGE !== "login" && PAGE !== "link") { location.href = ROOT + "/login"; throw new Error("signed out"); }
  if (res.status === 204) return null;
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(data.detail || data.title || res.statusText);
  return data;
}

function flash(message, bad) {
  const f = $("flash");
  f.textContent = message;
  f.className = "flash show" + (bad ? " bad" : "");
  clearTimeout(flash.timer);
  flash.timer = setTimeout(() => { f.className = "flash"; }, 3500);
}

async function act(button, path, okMessage, options = { method: "POST" }) {
  button.disabled = true;
  try {
    const out = await api(path, options);
    flash(okMessage);
    await refresh();
    return out;
  } catch (e) {
    flash(e.message, true);
  } finally {
    button.disabled = false;
  }
}

const badge = (s) => el("span", { class: "badge " + s }, s);
const num = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString());
function ago(iso) {
  if (!iso) return "–";
  const s = (Date.now() - new Date(iso).getTime()) / 1000;
  if (s < 0) return "in " + dur(-s);
  return dur(s) + " ago";
}
function dur(s) {
  if (s === null || s === undefined) return "–";
  if (s < 1) return (s * 1000).toFixed(0) + " ms";
  if (s < 90) return s.toFixed(s < 10 ? 1 : 0) + " s";
  if (s < 5400) return (s / 60).toFixed(0) + " min";
  if (s < 172800) return (s / 3600).toFixed(1) + " h";
  return (s / 86400).toFixed(1) + " d";
}
const when = (iso) => (iso ? el("span", { title: fmt(iso) }, ago(iso)) : "–");
// An instant as "2026-11-29 21:18:19 UTC" (the API sends ISO 8601 with an offset).
function fmt(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  if (isNaN(d)) return iso;
  return d.toISOString().replace("T", " ").slice(0, 19) + " UTC";
}
function span(a, b) {
  if (!a || !b) return "";
  return " (" + dur((new Date(b) - new Date(a)) / 1000) + ")";
}
const jobLink = (id) => el("a", { href: ROOT + "/jobs/" + id }, "#" + id);
function lastError(job) {
  const h = job.history || [];
  for (let i = h.length - 1; i >= 0; i--) {
    if (h[i].error_type) return h[i].error_type + (h[i].message ? ": " + h[i].message : "");
  }
  return "";
}
const pretty = (v) => (v === null || v === undefined ? "—" : JSON.stringify(v, null, 2));
// A job's payload (arguments, results, errors) is sent only to roles with dlq_read.
const NOT_SHOWN = "hidden: your role may not read job payloads (dlq_read)";
const argsText = (args) => (args === HIDDEN ? "hidden" : JSON.stringify(args));
// Redraw only what changed: a redraw would close an open traceback or drop a click.
const drawn = new Map();
// Lists still redraw every 30 s so that "5 s ago" ages; detail pages only on a change.
function unchanged(key, data, ageEvery = 30) {
  const sig = JSON.stringify(data) + (ageEvery ? "|" + Math.floor(Date.now() / (ageEvery * 1000)) : "");
  if (drawn.get(key) === sig) return true;
  drawn.set(key, sig);
  return false;
}
const emptyRow = (cols, text) => el("tr", {}, el("td", { colspan: cols, class: "empty" }, text));

// --- charts (SVG, drawn from the series the API computes from the jobs table) -------------

const NS = "http://www.w3.org/2000/svg";
function svg(tag, attrs) {
  const n = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
  return n;
}
function sum(lists, size) {
  const out = new Array(size).fill(0);
  for (const l of lists) if (l) l.forEach((v, i) => { out[i] += v; });
  return out;
}
function path(values, w, h, max, pad) {
  const step = w / Math.max(1, values.length - 1);
  return values.map((v, i) => (i ? "L" : "M") + (i * step).toFixed(1) + "," +
    (h - pad - (v / max) * (h - 2 * pad)).toFixed(1)).join(" ");
}
function drawChart(node, lines, w, h) {
  node.replaceChildren();
  const max = Math.max(1, ...lines.flatMap((l) => l.values));
  const pad = 6;
  for (let i = 1; i < 4; i++) {
    const y = (h / 4) * i;
    node.append(svg("line", { x1: 0, x2: w, y1: y, y2: y, stroke: "#eef0f4", "stroke-width": 1 }));
  }
  for (const l of lines) {
    if (l.fill) {
      node.append(svg("path", { d: path(l.values, w, h, max, pad) + ` L${w},${h} L0,${h} Z`,
        fill: l.color, opacity: 0.08 }));
    }
    node.append(svg("path", { d: path(l.values, w, h, max, pad), fill: "none", stroke: l.color,
      "stroke-width": l.width || 2, "vector-effect": "non-scaling-stroke", "stroke-linejoin": "round" }));
  }
  return max;
}
function spark(values, color) {
  const node = svg("svg", { class: "spark", width: 120, height: 28, viewBox: "0 0 120 28",
    preserveAspectRatio: "none" });
  drawChart(node, [{ values, color, fill: true, width: 1.5 }], 120, 28);
  node.querySelectorAll("line").forEach((n) => n.remove());
  return node;
}

// --- pages ---------------------------------------------------------------------------------

const pages = {};

pages.overview = async () => {
  const [queues, series, failures, workers, database] = await Promise.all([
    api("/api/queues"),
    api("/api/queues/series?window=3600&bucket=60"),
    api("/api/jobs?state=retryable&state=discarded&limit=6"),
    api("/api/workers"),
    api("/api/database"),
  ]);
  // A transaction holding the xmin horizon: VACUUM cannot clean rota_jobs while it lasts.
  // (Its age redraws the page once a minute, not on every poll.)
  const held = database.horizon_held ? database.holders[0] : null;
  const heldKey = held ? `${held.holder} ${Math.floor(held.age_s / 60)}` : null;
  if (unchanged("overview", [queues, series, failures, workers, heldKey])) return;
  $("horizon").hidden = !held;
  if (held) {
    $("horizon").replaceChildren(
      el("b", {}, "The database is held back: "),
      `${held.kind === "session" ? "session pid" : "prepared transaction"} ${held.holder}` +
        ` (${[held.username, held.application, held.client, held.state].filter(Boolean).join(", ")})` +
        ` has held a snapshot for ${dur(held.age_s)}; while it lasts VACUUM keeps every dead row` +
        " of the jobs table, which grows. End it (docs: operations, long transactions).");
  }
  fill($("failures"), failures.length ? failures.map((j) => el("tr", { "data-job": j.id },
    el("td", { class: "num" }, jobLink(j.id)), el("td", {}, badge(j.state)),
    el("td", { class: "trunc grow", title: `${j.task}\n${lastError(j)}` }, el("div", { class: "clip", style: "max-width:none" }, j.task),
      el("div", { class: "clip", style: "max-width:none;color:var(--bad);font-size:12.5px" }, lastError(j))),
    el("td", { class: "nowrap muted" }, ago(j.finished_at || j.attempted_at))))
    : [emptyRow(4, "No failing jobs.")]);
  const leaders = new Map(workers.leaders.filter((l) => l.live).map((l) => [l.leader, l.name]));
  fill($("workers-mini"), workers.workers.length ? workers.workers.slice(0, 6).map((w) => el("tr", {},
    el("td", { class: "mono trunc" }, w.worker), el("td", {}, leaders.has(w.worker) ? badge("leader") : ""),
    el("td", { class: "num" }, w.running + " running"), el("td", { class: "nowrap muted" }, ago(w.last_heartbeat || w.last_seen))))
    : [emptyRow(4, "No live worker.")]);
  const size = Math.ceil(series.window / series.bucket);
  const all = Object.values(series.series);
  const enq = sum(all.map((k) => k.enqueued), size);
  const done = sum(all.map((k) => k.completed), size);
  const bad = sum(all.map((k) => k.discarded), size);
  const peak = drawChart($("chart"), [
    { values: enq, color: "#2563eb", fill: true },
    { values: done, color: "#16a34a" },
    { values: bad, color: "#dc2626" },
  ], 960, 150);
  const perMin = series.bucket === 60 ? "/ min" : `/ ${series.bucket} s`;
  $("chart-peak").textContent = `peak ${peak} ${perMin}`;
  $("chart-axis").replaceChildren(...["60 min ago", "45", "30", "15", "now"].map((t) => el("span", {}, t)));
  const waiting = queues.reduce((a, q) => a + q.depth, 0);
  const running = queues.reduce((a, q) => a + q.running, 0);
  const doneHour = done.reduce((a, b) => a + b, 0);
  const lastFive = done.slice(-5).reduce((a, b) => a + b, 0) / 5;
  $("c-waiting").textContent = num(waiting);
  $("c-running").textContent = num(running);
  $("c-done").textContent = num(doneHour);
  $("c-rate").textContent = lastFive.toFixed(1) + " / min over the last 5 min";
  // The same count as the queue table's Discarded column, for every role.
  $("c-dead").textContent = num(queues.reduce((a, q) => a + (q.counts.discarded || 0), 0));
  $("q-count").textContent = queues.length + (queues.length === 1 ? " queue" : " queues");
  if (!queues.length) {
    fill($("queues"), emptyRow(10, "No queues yet: enqueue a job to see it here."));
    return;
  }
  fill($("queues"), queues.map((q) => {
    const s = series.series[q.name] || {};
    const qDone = (s.completed || []).slice(-5).reduce((a, b) => a + b, 0) / 5;
    const toggle = can("operate")
      ? el("button", { type: "button", "data-queue": q.name,
          onclick: (e) => act(e.target, `/api/queues/${encodeURIComponent(q.name)}/${q.paused ? "resume" : "pause"}`,
            `queue ${q.name} ${q.paused ? "resumed" : "paused"}`) }, q.paused ? "Resume" : "Pause")
      : "";
    const purge = can("operate") && $("bulk-panel")
      ? el("button", { type: "button", class: "danger", "data-purge": q.name, title: `cancel every waiting job of ${q.name} (dry run first)`,
          onclick: () => bulkOpen({ title: `Purge queue ${q.name}`, verb: "Purge", path: `/api/queues/${encodeURIComponent(q.name)}/purge`,
            selection: {}, what: `waiting jobs of queue ${q.name}` }) }, "Purge")
      : "";
    return el("tr", { "data-queue": q.name },
      el("td", {}, el("a", { href: ROOT + "/jobs?queue=" + encodeURIComponent(q.name) }, el("b", {}, q.name))),
      el("td", {}, q.paused ? badge("paused") : badge("ok")),
      el("td", { class: "num depth" }, num(q.depth)),
      el("td", { class: "num" }, num(q.running)),
      el("td", { class: "num" }, num(q.counts.retryable || 0)),
      el("td", { class: "num" }, num(q.counts.discarded || 0)),
      el("td", { class: "num" }, dur(q.oldest_available_age_s)),
      el("td", { class: "num" }, qDone.toFixed(1)),
      el("td", {}, spark(sum([s.enqueued], size), "#2563eb")),
      el("td", { class: "num nowrap" }, toggle, toggle && purge ? " " : "", purge));
  }));
};

const SEARCH_FIELDS = ["q", "state", "queue", "task", "tenant"];
function searchForm(defaults) {
  const form = $("search");
  const url = new URLSearchParams(location.search);
  for (const name of SEARCH_FIELDS) {
    if (form.elements[name] && url.get(name)) form.elements[name].value = url.get(name);
  }
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const p = new URLSearchParams();
    for (const name of SEARCH_FIELDS) {
      const v = form.elements[name] && form.elements[name].value.trim();
      if (v) p.set(name, v);
    }
    history.replaceState(null, "", location.pathname + (p.toString() ? "?" + p : ""));
    drawn.clear();
    refresh();
  });
  return () => {
    const p = new URLSearchParams(defaults);
    for (const name of SEARCH_FIELDS) {
      const v = form.elements[name] && form.elements[name].value.trim();
      if (v) p.set(name, v);
    }
    const before = new URLSearchParams(location.search).get("before_id");
    if (before) p.set("before_id", before);
    return p;
  };
}

// --- queue purge and bulk cancel: a dry run first (counts per task), then a reason, then
// the action itself, which the server keeps in its audit log (GET /api/audit).
const CANCELLABLE = ["scheduled", "available", "retryable", "running"];
let bulk = null; // what the open panel would do: { title, verb, path, selection, what }
function bulkShow(text, bad) {
  const r = $("bulk-result");
  r.className = "notice" + (bad ? " bad" : "");
  r.textContent = text;
}
const perTask = (out) => Object.entries(out.per_task).map(([t, n]) => `${t} × ${num(n)}`).join(", ");
async function bulkDryRun() {
  const spec = bulk, go = $("bulk-go"), reason = $("bulk-form").elements.reason.value.trim();
  go.disabled = true;
  bulkShow("Counting…");
  try {
    // A dry run changes nothing, but the API asks every call for a reason.
    const out = await api(spec.path, { method: "POST", json: { ...spec.selection, reason: reason || "dry run", dry_run: true } });
    if (bulk !== spec) return;
    const of = out.matched > out.count ? ` (the oldest ${num(out.count)} of ${num(out.matched)} matching)` : "";
    bulkShow(out.count ? `Dry run: would cancel ${num(out.count)} ${spec.what}${of}: ${perTask(out)}. Nothing changed yet. Give a reason, then ${spec.verb.toLowerCase()}.`
      : `Dry run: no ${spec.what}, nothing to cancel.`);
    spec.count = out.count;
    go.textContent = `${spec.verb} ${num(out.count)}`;
    go.disabled = out.count === 0;
  } catch (err) {
    if (bulk === spec) bulkShow(`Dry run failed: ${err.message || "no answer from the server"}`, true);
  }
}
function bulkOpen(spec) {
  const panel = $("bulk-panel");
  if (!panel) return;
  bulk = spec;
  panel.hidden = false;
  $("bulk-title").textContent = spec.title;
  $("bulk-go").textContent = spec.verb;
  if (spec.error) { $("bulk-go").disabled = true; bulkShow(spec.error, true); }
  else bulkDryRun();
  panel.scrollIntoView({ block: "nearest" });
}
async function bulkRun(e) {
  e.preventDefault();
  const spec = bulk, go = $("bulk-go"), form = $("bulk-form");
  if (!spec || spec.error || go.disabled) return;
  const reason = form.elements.reason.value.trim();
  if (!reason) { bulkShow("Give a reason: it is kept in the audit log.", true); form.elements.reason.focus(); return; }
  go.disabled = true;
  try {
    const out = await api(spec.path, { method: "POST", json: { ...spec.selection, reason, dry_run: false } });
    bulkShow(`Cancelled ${num(out.count)} ${spec.what}` + (out.count ? `: ${perTask(out)}` : "") + ` (audit #${out.audit_id}).`);
    flash(`${spec.verb.toLowerCase()}: ${num(out.count)} cancelled`);
    go.textContent = spec.verb;
    form.elements.reason.value = "";
    drawn.clear();
    await refresh();
  } catch (err) {
    bulkShow(`${spec.verb} failed: ${err.message || "no answer from the server"}`, true);
    go.disabled = false;
  }
}
if ($("bulk-panel")) {
  $("bulk-form").addEventListener("submit", bulkRun);
  $("bulk-dry").addEventListener("click", () => { if (bulk && !bulk.error) bulkDryRun(); });
  $("bulk-close").addEventListener("click", () => { bulk = null; $("bulk-panel").hidden = true; });
}

// The Jobs page's filter as a bulk cancel's selection; free text cannot select jobs.
function cancelSpec() {
  const f = $("search").elements;
  const v = (name) => (f[name] ? f[name].value.trim() : "");
  const spec = { title: "Cancel matching jobs", verb: "Cancel", path: "/api/jobs/cancel", selection: {} };
  const parts = [];
  for (const name of ["queue", "task", "tenant"]) if (v(name)) { spec.selection[name] = v(name); parts.push(`${name} ${v(name)}`); }
  const state = v("state");
  if (state) spec.selection.states = [state];
  spec.what = (state ? `${state} ` : "waiting ") + "jobs" + (parts.length ? " of " + parts.join(", ") : "");
  if (v("q")) spec.error = "The free-text search cannot select jobs to cancel: clear it and use the queue, task, tenant and state fields.";
  else if (state && !CANCELLABLE.includes(state)) spec.error = `Jobs that are ${state} are finished: only scheduled, available, retryable or running jobs can be cancelled.`;
  else if (!parts.length) spec.error = "Narrow the filter first (a queue, a task or a tenant): cancelling every job is not offered here.";
  return spec;
}

const selectionText = (s) => Object.entries(s || {}).filter(([, v]) => v !== null && v !== undefined)
  .map(([k, v]) => (k === "ids" ? `${v.length} ids` : `${k} ${Array.isArray(v) ? v.join(",") : v}`)).join(" · ");
async function drawAudit() {
  const node = $("audit");
  if (!node) return;
  const rows = await api("/api/audit?limit=5");
  if (unchanged("audit", rows)) return;
  fill(node, rows.length ? rows.map((r) => el("tr", { "data-audit": r.id }, el("td", { class: "num" }, r.id),
    el("td", { class: "nowrap" }, when(r.created_at)), el("td", {}, r.action), el("td", { class: "trunc" }, r.principal),
    el("td", { class: "trunc" }, r.reason), el("td", { class: "trunc mono grow" }, selectionText(r.selection)),
    el("td", { class: "num" }, num(r.count))))
    : [emptyRow(7, "No purge or bulk cancel yet.")]);
}

let jobQuery = null;
pages.jobs = async () => {
  if (!jobQuery) {
    jobQuery = searchForm({ limit: "100" });
    const cancel = $("cancel-matching");
    // Apply the filter as typed (the list then shows what the cancel selects), then count.
    if (cancel && can("operate")) {
      cancel.addEventListener("click", () => { bulk = null; $("search").requestSubmit(); bulkOpen(cancelSpec()); });
      // A new filter while the panel is open: count what the new one selects.
      $("search").addEventListener("submit", () => { if (bulk && bulk.path === "/api/jobs/cancel") bulkOpen(cancelSpec()); });
    }
  }
  const jobs = await api("/api/jobs?" + jobQuery());
  if (unchanged("jobs", jobs)) return;
  $("subtitle").textContent = jobs.length + (jobs.length === 100 ? "+" : "") + " found";
  const here = new URLSearchParams(location.search);
  const older = new URLSearchParams(here);
  if (jobs.length === 100) older.set("before_id", jobs[jobs.length - 1].id);
  const newest = new URLSearchParams(here);
  newest.delete("before_id");
  fill($("pager"), here.get("before_id") ? el("a", { href: "?" + newest }, "← newest") : "",
    jobs.length === 100 ? el("a", { href: "?" + older }, "older →") : "");
  if (!jobs.length) { fill($("jobs"), emptyRow(9, "No job matches.")); return; }
  fill($("jobs"), jobs.map((j) => el("tr", { "data-job": j.id },
    el("td", { class: "num" }, jobLink(j.id)),
    el("td", { class: "trunc" }, j.task),
    el("td", {}, j.queue),
    el("td", {}, badge(j.state)),
    el("td", { class: "trunc mono" }, j.key || ""),
    el("td", { class: "num" }, `${j.attempt}/${j.max_attempts}`),
    el("td", { class: "trunc mono" }, argsText(j.args)),
    el("td", { class: "nowrap" }, when(j.created_at)),
    el("td", { class: "trunc grow", style: "color:var(--bad)" }, lastError(j)))));
};

pages.job = async () => {
  const j = await api("/api/jobs/" + PARAMS.job_id);
  if (unchanged("job", j, 0)) return;
  $("title").replaceChildren(`Job ${j.id} `, badge(j.state));
  $("subtitle").textContent = j.task;
  const facts = [
    ["Task", j.task], ["Queue", el("a", { href: ROOT + "/jobs?queue=" + encodeURIComponent(j.queue) }, j.queue)],
    ["Key", j.key ? el("span", { class: "mono" }, j.key) : "—"], ["Attempt", `${j.attempt} of ${j.max_attempts}`],
    ["Priority", j.priority], ["Created", el("span", {}, fmt(j.created_at), el("span", { class: "muted" }, " · " + ago(j.created_at)))],
    ["Runs at", fmt(j.run_at)], ["Finished", j.finished_at ? el("span", {}, fmt(j.finished_at), el("span", { class: "muted" }, " · " + ago(j.finished_at))) : "—"],
    ["Worker", j.worker ? el("span", { class: "mono" }, j.worker) : "—"],
  ];
  if (j.progress != null) facts.push(["Progress", `${Math.round(j.progress * 100)}% ${j.progress_message || ""}`]);
  if (Object.keys(j.meta || {}).length) facts.push(["Meta", el("span", { class: "mono" }, JSON.stringify(j.meta))]);
  fill($("facts"), facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  $("args").textContent = j.payload_hidden ? NOT_SHOWN : pretty(j.args);
  $("checkpoint").textContent = j.payload_hidden ? NOT_SHOWN : j.checkpoint === null ? "No checkpoint stored." : pretty(j.checkpoint);
  const steps = Object.entries(j.steps || {});
  fill($("steps"),
    j.payload_hidden ? el("p", { class: "muted" }, NOT_SHOWN) : steps.length ? el("dl", { class: "kv" }, steps.flatMap(([k, v]) => [el("dt", { class: "mono" }, k), el("dd", {}, el("pre", { class: "json" }, pretty(v)))]))
      : el("p", { class: "muted" }, "No durable steps recorded."),
    el("h3", { style: "font-size:13px;margin:14px 0 6px" }, "Result"),
    el("pre", { class: "json" }, j.payload_hidden ? NOT_SHOWN : pretty(j.result)));
  $("attempts-count").textContent = j.history.length + (j.history.length === 1 ? " attempt" : " attempts");
  const items = j.history.map((a) => el("li", { class: a.outcome, "data-attempt": a.attempt },
    el("div", { class: "head" }, el("b", {}, "Attempt " + a.attempt), badge(a.outcome),
      el("span", { class: "when" }, fmt(a.started_at) + " → " + (a.finished_at ? fmt(a.finished_at).slice(11) : "…") + span(a.started_at, a.finished_at)),
      el("span", { class: "when" }, a.worker || "")),
    a.error_type ? el("div", { class: "err" }, a.error_type + (a.message ? ": " + a.message : "")) : null,
    a.traceback ? el("details", { class: "tb" }, el("summary", {}, "Traceback"), el("pre", {}, a.traceback)) : null));
  if (j.state === "running") {
    items.push(el("li", { class: "running" }, el("div", { class: "head" }, el("b", {}, "Attempt " + j.attempt),
      badge("running"), el("span", { class: "when" }, "since " + ago(j.attempted_at)), el("span", { class: "when" }, j.worker || ""))));
  }
  fill($("timeline"), items.length ? items : [el("li", {}, el("span", { class: "muted" }, "Not attempted yet."))]);
  const retry = $("retry"), cancel = $("cancel");
  retry.hidden = !can("operate") || j.state === "running" || j.state === "available";
  cancel.hidden = !can("operate") || ["completed", "discarded", "cancelled"].includes(j.state);
  retry.onclick = () => act(retry, `/api/jobs/${j.id}/retry`, `job ${j.id} queued again`);
  cancel.onclick = () => act(cancel, `/api/jobs/${j.id}/cancel`, `job ${j.id} cancelled`);
};

pages.schedules = async () => {
  const list = await api("/api/schedules");
  if (unchanged("schedules", list)) return;
  if (!list.length) { fill($("schedules"), emptyRow(10, "No schedules stored. Declare one with @app.cron and start a worker.")); return; }
  fill($("schedules"), list.map((s) => el("tr", { "data-schedule": s.name },
    el("td", {}, el("a", { href: ROOT + "/schedules/" + encodeURIComponent(s.name) }, el("b", {}, s.name))),
    el("td", {}, el("div", { class: "words" }, s.description || s.schedule), el("div", { class: "mono muted" }, s.schedule)),
    el("td", {}, s.timezone), el("td", { class: "trunc" }, s.task),
    el("td", {}, s.invalid ? badge("discarded") : s.suspended ? badge("suspended") : badge("ok")),
    el("td", { class: "nowrap next" }, s.next_runs_utc[0] ? el("span", { title: s.next_runs[0] }, ago(s.next_runs_utc[0])) : "—"),
    el("td", { class: "nowrap" }, when(lastRun(s))), el("td", { class: "nowrap" }, when(s.last_successful_time)),
    el("td", { class: "num" }, s.active),
    el("td", { class: "num" }, can("operate") ? el("button", { type: "button",
      onclick: (e) => act(e.target, `/api/schedules/${encodeURIComponent(s.name)}/trigger`, `${s.name} triggered`, { method: "POST", json: {} }) }, "Trigger") : ""))));
};

// The latest run of a schedule, whichever way it started: a success is a run too (a
// manual trigger sets no schedule time), so "last run" is never older than "last success".
function lastRun(s, history) {
  const times = [s.last_schedule_time, s.last_successful_time, ...(history || []).map((r) => r.created_at)]
    .filter(Boolean).sort((a, b) => new Date(b) - new Date(a));
  return times[0] || null;
}

pages.schedule = async () => {
  const name = PARAMS.name;
  const s = await api(`/api/schedules/${encodeURIComponent(name)}?limit=50`);
  if (unchanged("schedule", s, 0)) return;
  $("subtitle").textContent = s.task;
  fill($("facts"), [["Runs", el("span", {}, s.description || s.schedule)], ["Cron", el("span", { class: "mono" }, s.schedule)], ["Zone", s.timezone], ["Task", s.task],
    ["Queue", s.queue], ["Arguments", el("span", { class: "mono" }, s.args === HIDDEN ? NOT_SHOWN : JSON.stringify(s.args))],
    ["Concurrency", s.concurrency], ["State", s.suspended ? badge("suspended") : badge("ok")],
    ["Last run", when(lastRun(s, s.history))], ["Last success", when(s.last_successful_time)],
    ["Last missed", when(s.last_missed_time)], ["Last event", s.last_event ? `${s.last_event} · ${ago(s.last_event_at)}` : "—"],
  ].flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  fill($("next"), s.next_runs.length ? s.next_runs.map((t, i) => el("li", {}, el("b", {}, ago(s.next_runs_utc[i])), el("span", { class: "muted" }, " · " + t)))
    : [el("li", { class: "muted" }, s.suspended ? "suspended" : "none")]);
  fill($("runs"), s.history.length ? s.history.map((r) => el("tr", {}, el("td", { class: "mono" }, r.name),
    el("td", {}, r.trigger), el("td", {}, r.scheduled_at), el("td", { class: "num" }, r.job_id ? jobLink(r.job_id) : "—"),
    el("td", {}, r.state ? badge(r.state) : "—"), el("td", {}, when(r.attempted_at)), el("td", {}, when(r.finished_at))))
    : [emptyRow(7, "No runs yet.")]);
  const base = `/api/schedules/${encodeURIComponent(name)}`;
  const op = can("operate");
  $("trigger").hidden = !op; $("suspend").hidden = !op || s.suspended; $("resume").hidden = !op || !s.suspended;
  $("trigger").onclick = (e) => act(e.target, base + "/trigger", "triggered", { method: "POST", json: {} });
  $("suspend").onclick = (e) => act(e.target, base + "/suspend", "suspended");
  $("resume").onclick = (e) => act(e.target, base + "/resume", "resumed");
};

const DL_FIELDS = ["task", "queue", "error_type", "text"];
function deadFilters() {
  const form = $("search");
  const out = {};
  for (const name of DL_FIELDS) {
    const v = form.elements[name].value.trim();
    if (v) out[name] = v;
  }
  return out;
}
let deadBound = false;
let dryRunOf = null; // the selection and reason the last dry run counted
// Dead letters picked by hand (their checkboxes): the replay takes exactly these.
const picked = new Set();
function pickedChanged() {
  dryRunOf = null;
  $("replay-now").disabled = true;
  $("replay-now").textContent = "Replay";
  const n = picked.size;
  $("picked").textContent = n ? `${n} picked by hand: the replay takes exactly these` : "of the dead letters matching the filter above";
  $("unpick").hidden = !n;
}
function bindDeadLetters() {
  deadBound = true;
  const form = $("search");
  const url = new URLSearchParams(location.search);
  for (const name of DL_FIELDS) if (url.get(name)) form.elements[name].value = url.get(name);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    history.replaceState(null, "", location.pathname + "?" + new URLSearchParams(deadFilters()));
    dryRunOf = null;
    $("replay-now").disabled = true;
    refresh();
  });
  if (!can("dlq_read")) return;
  $("replay-panel").hidden = false;
  const replay = $("replay"), result = $("replay-result"), now = $("replay-now");
  const request = (dry) => {
    const chosen = picked.size ? { ids: [...picked].sort((a, b) => a - b) } : deadFilters();
    const body = { ...chosen, reason: replay.elements.reason.value.trim(), dry_run: dry };
    if (!Object.keys(chosen).length) body.all = true;
    const rate = Number(replay.elements.rate.value);
    if (rate > 0) body.rate = rate;
    return body;
  };
  const show = (text, bad) => { result.hidden = false; result.className = "notice" + (bad ? " bad" : ""); result.textContent = text; };
  $("dry-run").addEventListener("click", async (e) => {
    const body = request(true);
    if (!body.reason) { show("Give a reason: it is kept in the audit log.", true); return; }
    e.target.disabled = true;
    try {
      const out = await api("/api/dead-letters/replay", { method: "POST", json: body });
      const tasks = Object.entries(out.per_task).map(([t, n]) => `${t} × ${n}`).join(", ") || "nothing";
      show(`Dry run: would replay ${out.count} of ${out.matched} matching dead letters (${tasks})` +
        (out.rate ? `, paced at ${out.rate}/s over ${dur(out.seconds)}` : ", all at once") + ". Nothing changed yet.");
      dryRunOf = JSON.stringify({ ...body, dry_run: false });
      now.disabled = !can("replay") || out.count === 0;
      now.textContent = `Replay ${out.count}`;
      if (!can("replay")) show(result.textContent + " Your role may not replay.", false);
    } catch (err) { show(err.message, true); } finally { e.target.disabled = false; }
  });
  $("unpick").addEventListener("click", () => { picked.clear(); pickedChanged(); drawn.delete("dead"); refresh(); });
  now.addEventListener("click", async () => {
    const body = request(false);
    if (JSON.stringify(body) !== dryRunOf) { show("The selection changed since the dry run: run it again.", true); now.disabled = true; return; }
    now.disabled = true;
    try {
      const out = await api("/api/dead-letters/replay", { method: "POST", json: body });
      show(`Replayed ${out.count} dead letters (audit #${out.replay_id}).`);
      flash(`replayed ${out.count}`);
      dryRunOf = null;
      now.textContent = "Replay";
      picked.clear();
      pickedChanged();
      await refresh();
    } catch (err) { show(err.message, true); }
  });
}

pages["dead-letters"] = async () => {
  if (!deadBound) bindDeadLetters();
  if (!can("dlq_read")) { fill($("dead"), emptyRow(8, "Your role may not read dead letters.")); fill($("replays"), []); return; }
  const p = new URLSearchParams({ ...deadFilters(), limit: "200" });
  const [list, replays] = await Promise.all([api("/api/dead-letters?" + p), api("/api/dead-letters/replays?limit=10")]);
  if (unchanged("dead", [list, replays])) return;
  $("dl-count").textContent = list.length + (list.length === 200 ? "+" : "") + " discarded";
  const shown = new Set(list.map((j) => j.id));
  for (const id of [...picked]) if (!shown.has(id)) picked.delete(id);
  const pick = (j) => el("input", { type: "checkbox", "data-pick": j.id, "aria-label": `pick dead letter ${j.id}`, checked: picked.has(j.id),
    onchange: (e) => { if (e.target.checked) picked.add(j.id); else picked.delete(j.id); pickedChanged(); } });
  const dismiss = (e, j) => {
    const reason = prompt(`Dismiss dead letter ${j.id}? It becomes cancelled and stops blocking its partition. Why?`, "dismissed from the dashboard");
    if (!reason) return;
    act(e.target, "/api/dead-letters/dismiss", `job ${j.id} dismissed`, { method: "POST", json: { ids: [j.id], reason } });
  };
  fill($("dead"), list.length ? list.map((j) => el("tr", { "data-job": j.id },
    el("td", {}, pick(j)),
    el("td", { class: "num" }, jobLink(j.id)), el("td", { class: "trunc" }, j.task), el("td", {}, j.queue),
    el("td", { class: "trunc mono" }, j.key || ""), el("td", { class: "num" }, `${j.attempt}/${j.max_attempts}`),
    el("td", { class: "trunc grow", style: "color:var(--bad)" }, lastError(j)), el("td", { class: "nowrap" }, when(j.finished_at)),
    el("td", { class: "num nowrap" }, can("operate") ? [el("button", { type: "button", "data-retry": j.id,
      onclick: (e) => act(e.target, `/api/dead-letters/${j.id}/retry`, `job ${j.id} queued again`) }, "Retry"), " ",
      el("button", { type: "button", class: "danger", "data-dismiss": j.id, onclick: (e) => dismiss(e, j) }, "Dismiss")] : "")))
    : [emptyRow(9, "No dead letters match. Everything either ran or is still trying.")]);
  fill($("replays"), replays.length ? replays.map((r) => el("tr", {}, el("td", { class: "num" }, r.id),
    el("td", { class: "nowrap" }, when(r.created_at)), el("td", { class: "trunc" }, r.principal), el("td", { class: "trunc" }, r.reason),
    el("td", { class: "trunc mono grow" }, JSON.stringify(r.selection)), el("td", { class: "num" }, r.count),
    el("td", { class: "num" }, r.rate ? r.rate + "/s" : "–")))
    : [emptyRow(7, "No replays yet.")]);
};

pages.workers = async () => {
  const data = await api("/api/workers");
  if (unchanged("workers", data)) return;
  fill($("leaders"), data.leaders.length ? data.leaders.map((l) => el("div", { class: "card" },
    el("div", { class: "label" }, "Leader · " + l.name), el("div", { class: "value mono", style: "font-size:15px;margin-top:6px;overflow-wrap:anywhere" }, l.leader),
    el("div", { class: "hint" }, l.live ? `elected ${ago(l.elected_at)} · lease ${ago(l.expires_at)}` : "lease expired")))
    : [el("div", { class: "card" }, el("div", { class: "label" }, "Leader"), el("div", { class: "hint" }, "No leader elected: no worker is running maintenance."))]);
  fill($("workers"), data.workers.length ? data.workers.map((w) => el("tr", { "data-worker": w.worker },
    el("td", { class: "mono" }, w.worker),
    el("td", {}, w.leader_of.length ? [badge("leader"), el("span", { class: "muted" }, " " + w.leader_of.join(", "))] : "worker"),
    el("td", {}, w.queues.join(", ") || "—"), el("td", { class: "mono" }, (w.capabilities || []).join(", ")),
    el("td", { class: "num" }, w.running),
    el("td", { class: "nowrap" }, w.last_heartbeat ? when(w.last_heartbeat) : el("span", { class: "muted", title: "no heartbeat row: an older worker, or one that stopped" }, "none")),
    el("td", { class: "nowrap" }, when(w.last_seen))))
    : [emptyRow(7, "No live worker: none keeps a heartbeat row, and none started a job in the last 10 minutes.")]);
};

pages.tokens = async () => {
  const form = $("new-token");
  if (!form.dataset.bound) {
    form.dataset.bound = "1";
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const body = { name: form.elements.name.value, role: form.elements.role.value };
      if (form.elements.expires_in.value) body.expires_in = Number(form.elements.expires_in.value);
      const out = await act(form.querySelector("button"), "/api/tokens", "token created", { method: "POST", json: body });
      if (out) { const s = $("secret"); s.hidden = false; s.textContent = `${out.name} (${out.role}): ${out.token} — copy it now, it is not shown again.`; form.reset(); }
    });
  }
  const list = await api("/api/tokens");
  if (unchanged("tokens", list)) return;
  fill($("tokens"), list.length ? list.map((t) => el("tr", { "data-token": t.name }, el("td", { class: "mono" }, t.name), el("td", {}, t.role),
    el("td", {}, when(t.created_at)),
    el("td", { class: t.expired ? "expired" : "" }, t.expires_at ? (t.expired ? el("span", { title: fmt(t.expires_at) }, "expired") : when(t.expires_at)) : "never"),
    el("td", {}, t.last_used_at ? when(t.last_used_at) : "never"),
    el("td", {}, t.revoked_at ? when(t.revoked_at) : "—"),
    el("td", { class: "num" }, t.revoked_at ? "" : el("button", { type: "button", class: "danger",
      onclick: (e) => act(e.target, "/api/tokens/" + encodeURIComponent(t.name), `${t.name} revoked`, { method: "DELETE" }) }, "Revoke"))))
    : [emptyRow(7, "No tokens.")]);
};

// --- batches, workflows, sagas -------------------------------------------------------------

function progress(parts, total) {
  const bar = el("div", { class: "progress" });
  for (const [n, color, label] of parts) {
    if (n > 0) bar.append(el("span", { style: `width:${(100 * n) / Math.max(1, total)}%;background:${color}`, title: `${n} ${label}` }));
  }
  return bar;
}
const refLink = (base, ref, text) => el("a", { href: `${ROOT}${base}/${encodeURIComponent(ref)}` }, text);

pages.batches = async () => {
  const list = await api("/api/batches?limit=100");
  if (unchanged("batches", list)) return;
  fill($("batches"), list.length ? list.map((b) => el("tr", {},
    el("td", { class: "num" }, refLink("/batches", b.id, "#" + b.id)), el("td", {}, b.name ? refLink("/batches", b.name, b.name) : "—"),
    el("td", { class: "trunc" }, b.task), el("td", {}, badge(b.state), backoff(b, true)),
    el("td", { style: "min-width:180px" }, progress([[b.succeeded, "#16a34a", "succeeded"], [b.active, "#7c3aed", "active"]], b.completions),
      el("div", { class: "muted", style: "font-size:12px" }, `${b.succeeded} / ${b.completions}`)),
    el("td", { class: "num" }, b.active), el("td", { class: "num" }, b.failed),
    el("td", { class: "nowrap" }, when(b.start_time)), el("td", { class: "nowrap" }, when(b.finished_at))))
    : [emptyRow(9, "No batches yet: start one with app.batch(...).")]);
};

// A batch waiting out its back-off after a failure says when it starts jobs again.
function backoff(b, short) {
  if (!b.backoff_until || new Date(b.backoff_until) <= Date.now()) return null;
  const text = short ? `next run ${ago(b.backoff_until)}` : `backing off after ${b.failed} failed attempt${b.failed === 1 ? "" : "s"}: next run ${ago(b.backoff_until)}`;
  return el("div", { class: "muted backoff", style: "font-size:12px", title: fmt(b.backoff_until) }, text);
}

pages.batch = async () => {
  const b = await api("/api/batches/" + encodeURIComponent(PARAMS.ref));
  if (unchanged("batch", b, 0)) return;
  $("title").replaceChildren(`Batch ${b.name || "#" + b.id} `, badge(b.state));
  $("subtitle").textContent = b.task;
  fill($("progress"), Array.from(progress([[b.succeeded, "#16a34a", "succeeded"], [b.active, "#7c3aed", "active"]], b.completions).childNodes));
  $("progress-text").textContent = `${b.succeeded} of ${b.completions} succeeded · ${b.active} active · ${b.failed} failed attempts` + (b.message ? ` · ${b.reason}: ${b.message}` : "");
  fill($("backoff"), backoff(b, false));
  fill($("facts"), [["Mode", b.mode], ["Queue", b.queue], ["Parallelism", b.parallelism], ["Created", fmt(b.created_at)],
    ["Started", fmt(b.start_time)], ["Completed", fmt(b.completion_time)], ["Condition", b.condition || "—"],
  ].flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  fill($("indexes"), [["Completed", el("span", { class: "mono" }, b.completed_indexes || "—")], ["Failed", el("span", { class: "mono" }, b.failed_indexes || "—")],
    ["Spec", el("pre", { class: "json" }, pretty(Object.fromEntries(Object.entries(b.spec).filter(([, v]) => v !== null && !(Array.isArray(v) && !v.length)))))]].flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  $("jobs-count").textContent = b.jobs.length + " jobs";
  const jobs = b.jobs.slice().reverse();
  fill($("jobs"), jobs.length ? jobs.map((j) => el("tr", {}, el("td", { class: "num" }, jobLink(j.id)),
    el("td", { class: "num" }, j.meta && j.meta.batch && j.meta.batch.index !== undefined ? j.meta.batch.index : "—"), el("td", {}, badge(j.state)),
    el("td", { class: "num" }, `${j.attempt}/${j.max_attempts}`), el("td", { class: "trunc mono" }, argsText(j.args)),
    el("td", { class: "trunc grow", style: "color:var(--bad)" }, lastError(j)), el("td", { class: "nowrap" }, when(j.finished_at))))
    : [emptyRow(7, "No jobs started yet.")]);
  const op = can("operate") && !b.condition;
  const base = "/api/batches/" + b.id;
  $("suspend").hidden = !op || b.suspended; $("resume").hidden = !op || !b.suspended; $("cancel").hidden = !op;
  $("suspend").onclick = (e) => act(e.target, base + "/suspend", "suspended");
  $("resume").onclick = (e) => act(e.target, base + "/resume", "resumed");
  $("cancel").onclick = (e) => act(e.target, base + "/cancel", "cancelled");
};

const STEP_COLORS = { pending: "#94a3b8", running: "#7c3aed", completed: "#16a34a", failed: "#dc2626", skipped: "#cbd5e1", cancelled: "#cbd5e1" };

pages.workflows = async () => {
  const list = await api("/api/workflows?limit=100");
  if (unchanged("workflows", list)) return;
  fill($("workflows"), list.length ? list.map((w) => el("tr", {},
    el("td", { class: "num" }, refLink("/workflows", w.id, "#" + w.id)), el("td", {}, el("b", {}, w.name)),
    el("td", { class: "mono trunc" }, w.key || "—"), el("td", {}, badge(w.state)),
    el("td", {}, el("span", { class: "dots" }, w.steps.map((st) => el("i", { title: `${st.name}: ${st.state}`, style: `background:${STEP_COLORS[st.state] || "#94a3b8"}` })))),
    el("td", { class: "nowrap" }, when(w.created_at)), el("td", { class: "nowrap" }, when(w.finished_at))))
    : [emptyRow(7, "No workflow runs yet.")]);
};

// A DAG drawn in columns: a step's column is the length of the longest path to it.
function drawDag(node, steps) {
  node.replaceChildren();
  const depth = {};
  const byName = Object.fromEntries(steps.map((s) => [s.name, s]));
  const level = (name, seen = new Set()) => {
    if (depth[name] !== undefined) return depth[name];
    if (seen.has(name)) return 0;
    seen.add(name);
    const after = (byName[name] && byName[name].after) || [];
    depth[name] = after.length ? 1 + Math.max(...after.map((a) => level(a, seen))) : 0;
    return depth[name];
  };
  steps.forEach((s) => level(s.name));
  const columns = [];
  for (const s of steps) (columns[depth[s.name]] = columns[depth[s.name]] || []).push(s);
  const W = 170, H = 48, GX = 70, GY = 22, pad = 10;
  const pos = {};
  columns.forEach((col, c) => col.forEach((s, r) => { pos[s.name] = { x: pad + c * (W + GX), y: pad + r * (H + GY) }; }));
  const width = pad * 2 + columns.length * (W + GX) - GX;
  const rows = Math.max(...columns.map((c) => c.length));
  const long = steps.some((s) => (s.after || []).some((a) => depth[s.name] - depth[a] > 1));
  const bottom = pad + rows * (H + GY) - GY;
  const height = bottom + pad + (long ? 34 : 0);
  node.setAttribute("viewBox", `0 0 ${width} ${height}`);
  node.setAttribute("width", width);
  node.setAttribute("height", height);
  const defs = svg("defs", {});
  const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" });
  marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#94a3b8" }));
  defs.append(marker);
  node.append(defs);
  for (const s of steps) {
    for (const a of s.after || []) {
      if (!pos[a]) continue;
      let d;
      if (depth[s.name] - depth[a] > 1) {
        // Skips a column: pass under the boxes in between instead of through them.
        const x1 = pos[a].x + W * 0.7, y1 = pos[a].y + H, x2 = pos[s.name].x + W * 0.3, y2 = pos[s.name].y + H + 2;
        const low = bottom + 28;
        d = `M${x1},${y1} C${x1},${low} ${x2},${low} ${x2},${y2}`;
      } else {
        const x1 = pos[a].x + W, y1 = pos[a].y + H / 2, x2 = pos[s.name].x - 2, y2 = pos[s.name].y + H / 2;
        const mx = (x1 + x2) / 2;
        d = `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`;
      }
      node.append(svg("path", { d, fill: "none", stroke: "#94a3b8", "stroke-width": 1.5, "marker-end": "url(#arrow)" }));
    }
  }
  for (const s of steps) {
    const p = pos[s.name];
    const g = svg("g", { class: "node", "data-step": s.name, "data-state": s.state });
    const color = STEP_COLORS[s.state] || "#94a3b8";
    g.append(svg("rect", { x: p.x, y: p.y, width: W, height: H, rx: 8, fill: "#fff", stroke: color, "stroke-width": 2 }));
    g.append(svg("rect", { x: p.x, y: p.y, width: 6, height: H, rx: 3, fill: color }));
    const name = svg("text", { x: p.x + 16, y: p.y + 20, "font-size": 13, "font-weight": 600, fill: "#1c2430" });
    name.textContent = s.name.length > 20 ? s.name.slice(0, 19) + "…" : s.name;
    const sub = svg("text", { x: p.x + 16, y: p.y + 37, "font-size": 11.5, fill: color });
    const c = s.counts || {};
    const total = s.total === null || s.total === undefined ? "" : ` · ${c.completed || 0}/${s.total}`;
    sub.textContent = s.state + total;
    const title = svg("title", {});
    title.textContent = `${s.name} (${s.task}): ${s.state}` + (s.error ? `\n${s.error}` : "");
    g.append(name, sub, title);
    node.append(g);
  }
}

pages.workflow = async () => {
  const w = await api("/api/workflows/" + encodeURIComponent(PARAMS.ref));
  if (unchanged("workflow", w, 0)) return;
  $("title").replaceChildren(`Workflow ${w.name} `, badge(w.state));
  $("subtitle").textContent = (w.key ? `key ${w.key} · ` : "") + `#${w.id}`;
  $("wf-error").hidden = !w.error;
  $("wf-error").textContent = w.error || "";
  drawDag($("graph"), w.steps);
  fill($("steps"), w.steps.map((st) => el("tr", { "data-step": st.name },
    // The step's task under its name: one column less, so the row fits a laptop screen.
    el("td", { title: `${st.name} (${st.task})` }, el("div", { class: "clip", style: "max-width:220px" }, el("b", {}, st.name)),
      el("div", { class: "clip muted", style: "max-width:220px;font-size:12.5px" }, st.task)),
    el("td", {}, badge(st.state)),
    el("td", { class: "trunc", style: "max-width:160px" }, (st.after || []).join(", ") || "—"),
    // The first jobs, then how many more: spaces between them let the cell wrap.
    el("td", { class: "jobs" }, (st.jobs || []).filter((j) => j.job_id).slice(0, 4).flatMap((j) => [jobLink(j.job_id), " "]),
      (st.jobs || []).length > 4 ? el("span", { class: "muted" }, `+${st.jobs.length - 4}`) : ""),
    el("td", { class: "trunc mono grow", style: st.error ? "color:var(--bad)" : "" }, st.error || (st.result === null || st.result === undefined ? "" : JSON.stringify(st.result))),
    el("td", { class: "nowrap" }, when(st.finished_at)),
    el("td", { class: "num" }, can("operate") && st.state === "failed" ? el("button", { type: "button",
      "data-retry-step": st.name, onclick: (e) => act(e.target, `/api/workflows/${w.id}/steps/${encodeURIComponent(st.name)}/retry`, `${st.name} retried`) }, "Retry step") : ""))));
  $("cancel").hidden = !can("operate") || w.state !== "running";
  $("cancel").onclick = (e) => act(e.target, `/api/workflows/${w.id}/cancel`, "workflow cancelled");
};

function sagaSteps(s) {
  const state = Object.fromEntries(s.steps.map((n) => [n, "pending"]));
  for (const h of s.history) {
    if (!h.step || !(h.step in state)) continue;
    if (h.event === "step_completed") state[h.step] = "completed";
    else if (h.event === "step_failed") state[h.step] = "failed";
    else if (h.event === "compensation_completed") state[h.step] = "compensated";
    else if (h.event === "compensation_failed") state[h.step] = "failed";
  }
  if (s.step && s.step in state && !["completed", "compensated", "failed"].includes(s.status)) {
    state[s.step] = s.status === "compensating" ? "compensating" : "running";
  }
  return state;
}

pages.sagas = async () => {
  const list = await api("/api/sagas?limit=100");
  if (unchanged("sagas", list)) return;
  fill($("sagas"), list.length ? list.map((s) => {
    const st = sagaSteps(s);
    const done = Object.values(st).filter((v) => v === "completed").length;
    return el("tr", {}, el("td", { class: "mono" }, refLink("/sagas", s.key, s.key)), el("td", {}, s.saga), el("td", {}, badge(s.status)),
      el("td", {}, s.step || "—"),
      el("td", {}, el("span", { class: "dots" }, s.steps.map((n) => el("i", { title: `${n}: ${st[n]}`, class: "s-" + st[n] }))), el("span", { class: "muted", style: "margin-left:8px;font-size:12px" }, `${done}/${s.steps.length}`)),
      el("td", { class: "trunc grow", style: "color:var(--bad)" }, s.error || ""), el("td", { class: "nowrap" }, when(s.updated_at)));
  }) : [emptyRow(7, "No sagas yet.")]);
};

pages.saga = async () => {
  const s = await api("/api/sagas/" + encodeURIComponent(PARAMS.key));
  if (unchanged("saga", s, 0)) return;
  $("title").replaceChildren(`Saga ${s.key} `, badge(s.status));
  $("subtitle").textContent = s.saga;
  $("saga-error").hidden = !s.error;
  $("saga-error").textContent = s.error || "";
  const st = sagaSteps(s);
  // Each step links to the jobs that ran it (and its compensation), newest last.
  const jobsOf = {};
  for (const h of s.history) if (h.step && h.job_id) (jobsOf[h.step] = jobsOf[h.step] || []).includes(h.job_id) || jobsOf[h.step].push(h.job_id);
  if (s.step && s.job_id) (jobsOf[s.step] = jobsOf[s.step] || []).includes(s.job_id) || jobsOf[s.step].push(s.job_id);
  fill($("stepper"), s.steps.map((n, i) => el("li", { class: "s-" + st[n], "data-step": n },
    el("span", { class: "dot" }, String(i + 1)), el("div", {}, el("b", {}, n), el("div", { class: "muted" }, st[n]),
      (jobsOf[n] || []).length ? el("div", { class: "jobs" }, (jobsOf[n] || []).slice(-3).map((id) => el("span", { style: "margin-right:6px" }, jobLink(id)))) : null))));
  $("data").textContent = s.data === HIDDEN ? NOT_SHOWN : pretty(s.data);
  fill($("history"), s.history.length ? s.history.slice().reverse().map((h) => el("li", { class: /failed/.test(h.event || "") ? "failed" : /compensation_completed|aborted/.test(h.event || "") ? "compensated" : /completed/.test(h.event || "") ? "completed" : "" },
    el("div", { class: "head" }, el("b", {}, h.event || h.status || "started"), h.step ? el("span", { class: "mono" }, h.step) : null, h.job_id ? jobLink(h.job_id) : null, el("span", { class: "when" }, h.at ? fmt(h.at) : "")),
    h.error ? el("div", { class: "err" }, h.error) : null))
    : [el("li", {}, "Started.")]);
  const op = can("operate");
  $("retry").hidden = !op || ["completed", "compensated"].includes(s.status);
  $("abort").hidden = !op || s.status !== "running";
  $("retry").onclick = (e) => act(e.target, `/api/sagas/${encodeURIComponent(s.key)}/retry`, "retried");
  $("abort").onclick = (e) => act(e.target, `/api/sagas/${encodeURIComponent(s.key)}/abort`, "aborted: compensating", { method: "POST", json: {} });
};

// The overview and the jobs page list the latest purges and bulk cancels too.
for (const name of ["overview", "jobs"]) {
  const page = pages[name];
  pages[name] = async () => { await Promise.all([page(), drawAudit()]); };
}

// --- login, navigation counters and the refresh loop --------------------------------------

// Where to go after signing in: a path of this dashboard only (never another site).
function safeNext(next) {
  const home = ROOT + "/";
  if (!next || !next.startsWith(ROOT + "/") || next.startsWith("//") || next.includes("\\")) return home;
  const path = next.split("?")[0];
  return path === ROOT + "/login" || path.startsWith(ROOT + "/login/") ? home : next;
}

if (PAGE === "login") {
  $("login").addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      await api("/api/session", { method: "POST", json: { token: e.target.elements.token.value } });
      location.href = safeNext(body.dataset.next);
    } catch (err) {
      const box = $("login-error"); box.hidden = false; box.textContent = err.message;
    }
  });
}

if (PAGE === "link") {
  const go = $("link-continue");
  if (go) go.addEventListener("click", async () => {
    go.disabled = true;
    try {
      await api("/api/session/link", { method: "POST", json: { code: go.dataset.code } });
      location.href = ROOT + "/";
    } catch (err) {
      const box = $("link-error"); box.hidden = false; box.textContent = err.message; go.disabled = false;
    }
  });
}

async function navCounts() {
  if (!can("dlq_read")) return;
  const link = document.querySelector('[data-nav="/dead-letters"] .count');
  if (!link) return;
  const dead = await api("/api/dead-letters?limit=500");
  link.hidden = !dead.length;
  link.textContent = dead.length >= 500 ? "500+" : dead.length;
}

async function refresh() {
  const live = $("live");
  try {
    await Promise.all([pages[PAGE](), navCounts()]);
    live.className = "live";
    live.textContent = "live";
    body.dataset.ready = "1";
  } catch (e) {
    live.className = "live stale";
    live.textContent = "retrying";
    console.warn(e);
  }
}

if (pages[PAGE]) {
  const out = $("logout");
  if (out) out.addEventListener("click", async () => { await api("/api/session", { method: "DELETE" }); location.href = ROOT + "/login"; });
  refresh();
  setInterval(() => { if (!document.hidden) refresh(); }, POLL);
}
