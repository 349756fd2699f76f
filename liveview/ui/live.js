// tollgate live: polls the admin API's live endpoints once a second and
// draws them. No framework, no other host; the admin token lives in this
// tab's sessionStorage and travels only in the Authorization header.
"use strict";

const TOKEN_KEY = "tollgate-admin-token";
const HISTORY_MS = 10 * 60 * 1000;
const MIN_SPAN_MS = 60 * 1000; // a chart spans what has been seen, at least a minute
const SVG = "http://www.w3.org/2000/svg";

const state = {
  times: [],      // end of each point, Unix ms
  durations: [],  // ms each point covers
  series: new Map(), // "service/category" -> {service, category, allowed[], throttled[], errors[]}
  timer: 0,
  quotas: false, // the gateway serves the Service Quotas admin endpoints
};

const $ = (id) => document.getElementById(id);

function token() { return sessionStorage.getItem(TOKEN_KEY); }

class AuthError extends Error {}

async function get(path) {
  const resp = await fetch(path, { headers: { Authorization: "Bearer " + token() }, cache: "no-store" });
  if (resp.status === 401) throw new AuthError("the admin token was refused");
  if (!resp.ok) {
    let msg = resp.status + " " + resp.statusText;
    try { msg += ": " + (await resp.json()).error; } catch (e) { /* not JSON */ }
    throw new Error(path + ": " + msg);
  }
  return resp.json();
}

function showLogin(message) {
  clearTimeout(state.timer);
  $("live").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  $("status").textContent = "needs the admin token";
  $("token").focus();
}

async function start() {
  $("login").hidden = true;
  $("live").hidden = false;
  state.times = []; state.durations = []; state.series.clear();
  // The admin index says whether this gateway serves the Service Quotas
  // API's endpoints (the requests panel); a refused token shows in poll.
  try {
    const index = await get("/v1/admin/");
    state.quotas = index.endpoints.some((e) => e.path === "GET " + REQUESTS_PATH);
  } catch (e) {
    state.quotas = false;
  }
  poll();
}

async function poll() {
  clearTimeout(state.timer);
  try {
    const since = state.times.length ? state.times[state.times.length - 1] : 0;
    const [dec, hot, store, scaled, usage, reqs] = await Promise.all([
      get("/v1/admin/live/decisions" + (since ? "?since=" + since : "")),
      get("/v1/admin/live/hot?n=10"),
      get("/v1/admin/live/store"),
      get("/v1/admin/live/autoscaled"),
      get("/v1/admin/live/usage?n=20"),
      state.quotas ? getRequests() : null,
    ]);
    merge(dec);
    drawRates();
    drawHot(hot);
    drawUsage(usage);
    drawRequests(reqs);
    drawStore(store);
    drawAutoscaled(scaled);
    const newest = state.times[state.times.length - 1];
    const status = $("status");
    status.textContent = "updated " + clock(Date.now()) + (newest ? " · newest second ends " + clock(newest) : " · no data yet");
    status.dataset.newest = newest || "";
    status.className = "dim";
  } catch (e) {
    if (e instanceof AuthError) {
      sessionStorage.removeItem(TOKEN_KEY);
      showLogin(e.message);
      return;
    }
    $("status").textContent = "update failed: " + e.message;
    $("status").className = "bad";
  }
  state.timer = setTimeout(poll, 1000);
}

function clock(ms) { return new Date(ms).toLocaleTimeString([], { hour12: false }); }

// merge appends the new points and drops those older than 10 minutes.
function merge(dec) {
  const before = state.times.length;
  state.times.push(...dec.times_ms);
  state.durations.push(...dec.durations_ms);
  for (const s of dec.series) {
    const id = s.service + "/" + s.category;
    let mine = state.series.get(id);
    if (!mine) {
      // A series new to the page (a reload added it) had nothing before.
      mine = { service: s.service, category: s.category, allowed: zeros(before), throttled: zeros(before), errors: zeros(before) };
      state.series.set(id, mine);
    }
    mine.allowed.push(...s.allowed);
    mine.throttled.push(...s.throttled);
    mine.errors.push(...s.errors);
  }
  for (const mine of state.series.values()) { // a series the answer lacks
    for (const k of ["allowed", "throttled", "errors"]) {
      while (mine[k].length < state.times.length) mine[k].push(0);
    }
  }
  const newest = state.times[state.times.length - 1];
  let drop = 0;
  while (drop < state.times.length && state.times[drop] <= newest - HISTORY_MS) drop++;
  if (drop) {
    state.times.splice(0, drop);
    state.durations.splice(0, drop);
    for (const mine of state.series.values()) {
      for (const k of ["allowed", "throttled", "errors"]) mine[k].splice(0, drop);
    }
  }
}

function zeros(n) { return new Array(n).fill(0); }

// span is the time a chart covers: what the points cover (the server's
// history, up to 10 minutes), at least a minute, so that a fresh server's
// first minute fills the chart instead of a sliver at its right end.
function span(times, durations) {
  if (!times.length) return MIN_SPAN_MS;
  const seen = times[times.length - 1] - times[0] + (durations[0] || 1000);
  return Math.min(HISTORY_MS, Math.max(MIN_SPAN_MS, seen));
}

// spanText says how long a span is, the way the page's titles say it.
function spanText(ms) {
  const s = Math.round(ms / 1000);
  if (s === 60) return "last minute";
  if (s < 120) return "last " + s + " s";
  if (s % 60 === 0) return "last " + s / 60 + " minutes";
  return "last " + Math.floor(s / 60) + " min " + s % 60 + " s";
}

// rate is a point's count per second.
function rate(count, ms) { return ms > 0 ? count * 1000 / ms : 0; }

// fmt writes a rate the way every number of the page is written.
function fmt(v) {
  if (v === 0) return "0";
  if (v >= 100 || Number.isInteger(v)) return Math.round(v).toLocaleString("en-US");
  return v.toFixed(1);
}

// accountCell names a bucket's account as tollgate does (the mapped account,
// or the access key) and, on hover, by the 12-digit id AWS answers show.
function accountCell(tr, b) {
  const td = cell(tr, b.account, "account");
  if (b.account_id && b.account_id !== b.account) td.title = "account id " + b.account_id;
  return td;
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function drawRates() {
  const body = $("rates").tBodies[0];
  const rows = [];
  const last = state.times.length - 1;
  const newest = state.times[last];
  const ms = span(state.times, state.durations);
  for (const el of document.querySelectorAll(".rates-span")) el.textContent = spanText(ms);
  let quiet = 0;
  for (const s of state.series.values()) {
    if (!["allowed", "throttled", "errors"].some((k) => s[k].some((c) => c > 0))) {
      quiet++; // no decision in 10 minutes: left out
      continue;
    }
    const tr = document.createElement("tr");
    tr.dataset.series = s.service + "/" + s.category;
    cell(tr, s.service);
    cell(tr, s.category);
    const d = last >= 0 ? state.durations[last] : 0;
    for (const k of ["allowed", "throttled", "errors"]) {
      cell(tr, last >= 0 ? fmt(rate(s[k][last], d)) : "–", "num " + k);
    }
    const td = cell(tr, "", "chart");
    const [svg, peak] = spark(s, newest, ms);
    const label = document.createElement("div");
    label.className = "peak";
    label.textContent = "peak " + fmt(peak) + "/s";
    td.append(label, svg);
    rows.push(tr);
  }
  body.replaceChildren(...rows);
  $("rates").hidden = rows.length === 0;
  $("rates-empty").hidden = rows.length > 0;
  $("rates-note").hidden = $("rates-legend").hidden = rows.length === 0;
  const what = quiet === 1 ? "1 category" : quiet + " categories";
  $("quiet").textContent = quiet && rows.length ? what + " of the config without a decision in the " + spanText(ms) + " are not shown." : "";
}

// chartSVG makes a w × h chart of class cls, stretched to its box, with
// its time axis pad above the bottom.
function chartSVG(cls, w, h, pad) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", cls);
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  svg.setAttribute("preserveAspectRatio", "none");
  const axis = document.createElementNS(SVG, "line");
  axis.setAttribute("class", "axis");
  axis.setAttribute("x1", 0); axis.setAttribute("x2", w);
  axis.setAttribute("y1", h - pad); axis.setAttribute("y2", h - pad);
  svg.appendChild(axis);
  return svg;
}

// spark draws one series over the last span ms: one polyline per result,
// on a time axis ending at the newest point.
function spark(s, newest, spanMs) {
  const w = 600, h = 34, pad = 2, top = 2;
  const svg = chartSVG("spark", w, h, pad);
  let peak = 0;
  const rates = {};
  for (const k of ["allowed", "throttled", "errors"]) {
    rates[k] = s[k].map((c, i) => rate(c, state.durations[i]));
    for (const v of rates[k]) peak = Math.max(peak, v);
  }
  if (peak === 0 || !newest) return [svg, peak];
  for (const k of ["allowed", "throttled", "errors"]) {
    if (!rates[k].some((v) => v > 0)) continue;
    const x = (i) => w - (newest - state.times[i]) / spanMs * w;
    const y = (v) => (h - pad) - v / peak * (h - pad - top);
    polylines(svg, rates[k], x, y, k);
  }
  return [svg, peak];
}

// polylines draws values as lines, leaving out runs of zeros (so that a
// series idle for minutes draws no line over the axis) but keeping the
// zeros next to a non-zero value, so rises and falls show.
function polylines(svg, values, x, y, cls) {
  let pts = [];
  const flush = () => {
    if (pts.length > 1) {
      const pl = document.createElementNS(SVG, "polyline");
      pl.setAttribute("class", cls);
      pl.setAttribute("points", pts.join(" "));
      svg.appendChild(pl);
    }
    pts = [];
  };
  values.forEach((v, i) => {
    if (v > 0 || values[i - 1] > 0 || values[i + 1] > 0) {
      pts.push(x(i).toFixed(1) + "," + y(v).toFixed(1));
    } else {
      flush();
    }
  });
  flush();
}

function drawHot(hot) {
  // The window is the last minute once the server has run that long.
  const secs = Math.round(hot.window_seconds);
  let when = "", empty = "No request has been throttled yet.";
  if (secs >= 60) {
    when = spanText(secs * 1000);
    empty = "No request was throttled in the " + when + ".";
  } else if (secs > 0) {
    when = "since the server started, " + secs + " s ago";
    empty = "No request was throttled " + when + ".";
  }
  $("hot-window").textContent = when;
  $("hot-empty").textContent = empty;
  const rows = hot.buckets.map((b) => {
    const tr = document.createElement("tr");
    tr.dataset.key = b.key;
    accountCell(tr, b);
    cell(tr, b.region);
    cell(tr, b.service);
    cell(tr, b.category);
    cell(tr, fmt(b.throttles_per_second), "num rate");
    cell(tr, b.tokens === null ? "?" : b.tokens + " / " + b.capacity, "num tokens");
    return tr;
  });
  $("hot").tBodies[0].replaceChildren(...rows);
  $("hot").hidden = rows.length === 0;
  $("hot-empty").hidden = rows.length > 0;
}

function drawStore(st) {
  const items = [["kind", st.kind], ["state", st.state + (st.error ? " (" + st.error + ")" : "")]];
  if (st.buckets !== undefined) items.push(["buckets held", st.buckets.toLocaleString("en-US")]);
  const policies = { local: "decide from this node's own buckets (fail local)", open: "allow (fail open)", closed: "deny (fail closed)" };
  if (st.failure_policy) items.push(["when Redis cannot answer", policies[st.failure_policy] || st.failure_policy]);
  if (st.decisions) {
    items.push(["decided by Redis", st.decisions.redis.toLocaleString("en-US")]);
    items.push(["decided by the deny cache", st.decisions.deny_cache.toLocaleString("en-US")]);
    items.push(["decided by the failure policy", st.decisions.failure_policy.toLocaleString("en-US")]);
  }
  if (st.errors !== undefined) items.push(["failed Redis calls", st.errors.toLocaleString("en-US")]);
  const nodes = [];
  for (const [k, v] of items) {
    const dt = document.createElement("dt"); dt.textContent = k;
    const dd = document.createElement("dd"); dd.textContent = v; dd.dataset.field = k;
    if (k === "state") dd.className = st.state === "ok" ? "ok" : "bad";
    nodes.push(dt, dd);
  }
  $("store").replaceChildren(...nodes);
}

const STATE_CLASSES = { starting: "starting", ready: "ready", draining: "draining", stopping: "stopping" };

// drawAutoscaled shows each autoscaled service: its instances by state and
// recommended count over 10 minutes, its newest numbers, and its last
// scale decisions.
function drawAutoscaled(sc) {
  $("pools-section").hidden = sc.services.length === 0;
  const last = sc.times_ms.length - 1;
  const ms = span(sc.times_ms, sc.durations_ms);
  $("pools-span").textContent = spanText(ms);
  const blocks = sc.services.map((s) => {
    const div = document.createElement("div");
    div.className = "pool";
    div.dataset.service = s.name;
    const h = document.createElement("h3");
    h.textContent = s.name;
    div.appendChild(h);
    const ready = last >= 0 ? s.instances.ready[last] : 0;
    const facts = [
      ["driver", driverText(s.driver)],
      ["recommended", last >= 0 ? String(s.recommended[last]) : "–"],
      ["ready", String(ready)],
      ["pending", last >= 0 ? String(s.pending[last]) : "–"],
      ["429/s", last >= 0 ? fmt(rate(s.rejected[last], sc.durations_ms[last])) : "–"],
    ];
    const p = document.createElement("p");
    p.className = "facts";
    for (const [k, v] of facts) {
      const span = document.createElement("span");
      span.dataset.field = k;
      span.textContent = v;
      p.append(k + " ", span, "  ");
    }
    div.appendChild(p);
    const [chart, peak, idle] = instancesChart(s, sc.times_ms, ms);
    const label = document.createElement("div");
    label.className = "peak";
    label.textContent = idle
      ? "no instance in the " + spanText(ms) + ": the service scales from zero, its first request starts one"
      : "instances by state (peak " + peak + "); dashed: recommended";
    div.append(label, chart);
    if (s.revisions && s.revisions.length > 0) div.append(...revisionsChart(s.revisions, sc.times_ms, ms));
    const table = document.createElement("table");
    table.className = "scales";
    const head = table.createTHead().insertRow();
    for (const t of ["time", "recommended", "driver", "why"]) {
      const th = document.createElement("th"); th.textContent = t; head.appendChild(th);
    }
    const body = table.createTBody();
    for (const d of s.scale_decisions.slice().reverse()) {
      const tr = body.insertRow();
      cell(tr, clock(d.time_ms));
      cell(tr, d.from + " → " + d.to, "num");
      cell(tr, driverText(d.driver));
      cell(tr, d.reason, "why");
    }
    if (s.scale_decisions.length === 0) {
      const tr = body.insertRow();
      cell(tr, "no scale decision yet: the recommended count has not changed since the service started", "dim").colSpan = 4;
    }
    div.appendChild(table);
    return div;
  });
  $("pools").replaceChildren(...blocks);
}

// driverText names the autoscaler's driver; "none" (no metric drove the
// count: no load yet, or a bound) is a dash.
function driverText(d) { return d && d !== "none" ? d : "–"; }

// instancesChart draws a service's instances by state and its
// recommended count (dashed) over the last spanMs, and says whether
// there was nothing to draw.
function instancesChart(s, times, spanMs) {
  const w = 600, h = 80, pad = 2, top = 2;
  const svg = chartSVG("spark instances", w, h, pad);
  const newest = times[times.length - 1];
  let peak = 0;
  for (const v of s.recommended) peak = Math.max(peak, v);
  for (const k of Object.keys(s.instances)) for (const v of s.instances[k]) peak = Math.max(peak, v);
  if (!newest || peak === 0) return [svg, peak, true];
  const line = (values, cls) => polylines(svg, values,
    (i) => w - (newest - times[i]) / spanMs * w,
    (v) => (h - pad) - v / peak * (h - pad - top), cls);
  for (const k of Object.keys(s.instances)) {
    if (s.instances[k].some((v) => v > 0)) line(s.instances[k], STATE_CLASSES[k] || "other");
  }
  line(s.recommended, "recommended");
  return [svg, peak, false];
}

// REVISION_COLORS are the revisions' lines, by the revision's place in
// the service's list (at most 10 revisions, as the pool keeps).
const REVISION_COLORS = ["#3182ce", "#2f855a", "#b7791f", "#805ad5", "#c53030", "#319795", "#d53f8c", "#718096", "#dd6b20", "#1d2329"];

// revisionText names a revision as its legend does: name, share of
// traffic and tags ("hello-00002 10 % canary").
function revisionText(r) { return [r.name, r.percent + " %", ...(r.tags || [])].join(" "); }

// revisionsChart draws a service's instances per revision over the last
// spanMs, a line each, and a legend naming each with its percent and
// tags; it returns the label, the chart and the legend.
function revisionsChart(revs, times, spanMs) {
  const w = 600, h = 60, pad = 2, top = 2;
  const svg = chartSVG("spark instances revisions", w, h, pad);
  let peak = 0;
  for (const r of revs) for (const v of r.instances) peak = Math.max(peak, v);
  const newest = times[times.length - 1];
  const legend = document.createElement("p");
  legend.className = "legend revisions";
  revs.forEach((r, i) => {
    const color = REVISION_COLORS[i % REVISION_COLORS.length];
    if (newest && peak > 0) {
      const before = svg.childNodes.length;
      polylines(svg, r.instances, (j) => w - (newest - times[j]) / spanMs * w,
        (v) => (h - pad) - v / peak * (h - pad - top), "revision");
      for (const pl of [...svg.childNodes].slice(before)) {
        pl.style.stroke = color;
        pl.dataset.revision = r.name;
      }
    }
    const key = document.createElement("span");
    key.className = "key";
    key.style.background = color;
    const name = document.createElement("span");
    name.className = "revision";
    name.dataset.revision = r.name;
    name.textContent = revisionText(r);
    legend.append(key, " ", name, " ");
  });
  const label = document.createElement("div");
  label.className = "peak";
  label.textContent = "instances by revision (peak " + peak + "), with each revision's share of traffic and tags";
  return [label, svg, legend];
}

document.addEventListener("DOMContentLoaded", () => {
  $("login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
    $("token").value = "";
    start();
  });
  if (token()) start(); else showLogin();
});
