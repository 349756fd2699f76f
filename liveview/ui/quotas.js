// tollgate live, the quota panels: each bucket's utilisation over the
// last hour, and the Service Quotas increase requests an operator approves
// or denies. Loaded before live.js, whose helpers (cell, fmt, clock,
// token, AuthError, showLogin, poll) these functions call; the admin token
// is the one the operator pasted, sent only in the Authorization header.
"use strict";

// REQUESTS_PATH lists the Service Quotas increase requests, a page at a
// time, filtered on the server.
const REQUESTS_PATH = "/v1/admin/servicequotas/requests";
// PENDING_PAGE is how many waiting requests the panel shows at most;
// DECIDED_SHOWN how many of the last decided ones.
const PENDING_PAGE = 100;
const DECIDED_SHOWN = 8;
const DECIDED_STATUSES = "APPROVED,DENIED,NOT_APPROVED,INVALID_REQUEST,CASE_CLOSED";

// getRequests reads the two pages the panel shows: the newest waiting
// requests and the last decided ones.
async function getRequests() {
  const [pending, decided] = await Promise.all([
    get(REQUESTS_PATH + "?status=PENDING&limit=" + PENDING_PAGE),
    get(REQUESTS_PATH + "?status=" + DECIDED_STATUSES + "&limit=" + DECIDED_SHOWN),
  ]);
  return { served: pending.api_served !== false, pending: pending.requests, more: !!pending.next_token, decided: decided.requests };
}

// post sends an operator's decision; it answers the decoded body and
// whether it was accepted.
async function post(path, body) {
  const resp = await fetch(path, {
    method: "POST", cache: "no-store", body: JSON.stringify(body),
    headers: { Authorization: "Bearer " + token(), "Content-Type": "application/json" },
  });
  if (resp.status === 401) throw new AuthError("the admin token was refused");
  let out = {};
  try { out = await resp.json(); } catch (e) { /* not JSON */ }
  return [resp.ok, out, resp.status];
}

// drawUsage shows how close each bucket ran to its limit over the last
// hour: throttles, then the peak share of its burst in use.
function drawUsage(u) {
  const secs = Math.round(u.window_seconds);
  $("usage-window").textContent = secs >= 3540 ? "last hour" : secs >= 60 ? "last " + Math.round(secs / 60) + " min (since the server started)" : "since the server started";
  const rows = u.buckets.map((b) => {
    const tr = document.createElement("tr");
    tr.dataset.key = b.key;
    accountCell(tr, b);
    cell(tr, b.region);
    cell(tr, b.service);
    cell(tr, b.category, "category");
    // [throttled - error_bound, throttled] holds the true count.
    let thr = b.throttled.toLocaleString("en-US");
    if (b.error_bound > 0) thr = b.error_bound >= b.throttled ? "≤ " + thr : (b.throttled - b.error_bound).toLocaleString("en-US") + "–" + thr;
    cell(tr, thr, "num throttled");
    const pct = Math.round(b.peak * 100);
    cell(tr, b.peak_capacity ? b.peak_used + " / " + b.peak_capacity + " (" + pct + "%)" : "–", "num peak-use");
    const td = cell(tr, "", "bar-cell");
    const bar = document.createElement("span");
    bar.className = "bar";
    const fill = document.createElement("span");
    fill.style.width = Math.min(100, b.throttled > b.error_bound ? 100 : pct) + "%";
    fill.className = b.throttled > b.error_bound ? "full" : pct >= 80 ? "near" : "";
    bar.appendChild(fill);
    td.appendChild(bar);
    cell(tr, b.capacity ? b.capacity + " burst, " + fmt(b.rate_per_second) + "/s" : "–", "num limit");
    return tr;
  });
  $("usage").tBodies[0].replaceChildren(...rows);
  $("usage").hidden = rows.length === 0;
  $("usage-empty").hidden = rows.length > 0;
  $("usage-floor").textContent = u.peak_floor > 0
    ? "Too many buckets to keep them all: one not listed peaked below " + Math.round(u.peak_floor * 100) + "% in every minute."
    : "";
}

// The requests panel keeps a row per pending request across polls, so a
// reason being typed survives the next second.
const pendingRows = new Map(); // request id -> tr

// keepRows makes rows the children of tbody. Rows already there in that
// order are left alone; otherwise they are put in order, and the field
// being typed in keeps its focus and cursor: taking a focused element out
// of the document, even to put it straight back, blurs it, and the next
// keys would go nowhere.
function keepRows(tbody, rows) {
  if (tbody.children.length === rows.length && rows.every((tr, i) => tbody.children[i] === tr)) return;
  const active = document.activeElement;
  const typing = rows.some((tr) => tr.contains(active)); // contains(null) is false
  const cursor = typing && typeof active.selectionStart === "number" ? [active.selectionStart, active.selectionEnd] : null;
  tbody.replaceChildren(...rows);
  if (!typing) return;
  active.focus();
  if (cursor) active.setSelectionRange(cursor[0], cursor[1]);
}

// drawRequests lists the requests waiting for an operator (the newest
// PENDING_PAGE), each with a reason field and approve/deny, and the last
// ones decided; null (the
// gateway serves no Service Quotas API: its admin index lacks
// REQUESTS_PATH) hides the panel.
function drawRequests(list) {
  $("requests-section").hidden = list === null;
  if (list === null) return;
  const pending = list.pending;
  const ids = new Set(pending.map((r) => r.id));
  for (const [id, tr] of pendingRows) if (!ids.has(id)) pendingRows.delete(id);
  const rows = pending.map((r) => {
    let tr = pendingRows.get(r.id);
    if (tr) return tr;
    tr = document.createElement("tr");
    tr.dataset.id = r.id;
    cell(tr, clock(r.created));
    cell(tr, r.account, "account");
    cell(tr, r.region);
    cell(tr, (r.quota_name || r.quota) + " (" + r.service + " " + r.quota + ")", "quota");
    cell(tr, fmt(r.current_value) + " → " + fmt(r.desired), "num asked");
    const why = cell(tr, "");
    const input = document.createElement("input");
    input.className = "reason";
    input.placeholder = "reason, kept with the request";
    input.setAttribute("aria-label", "reason for request " + r.id);
    why.appendChild(input);
    const act = cell(tr, "");
    for (const [verb, label] of [["approve", "Approve"], ["deny", "Deny"]]) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = verb;
      b.textContent = label;
      b.addEventListener("click", () => decide(r.id, verb, input.value.trim(), tr));
      act.appendChild(b);
    }
    pendingRows.set(r.id, tr);
    return tr;
  });
  keepRows($("requests").tBodies[0], rows);
  $("requests").hidden = rows.length === 0;
  $("requests-empty").hidden = rows.length > 0;
  $("requests-empty").textContent = list.served
    ? "No request is waiting for an operator."
    : "The Service Quotas API is off: no service of the config answers it, so no tenant can ask for an increase (add `- preset: servicequotas` to services).";
  $("requests-more").hidden = !list.more;
  const decided = list.decided.map((r) => {
    const tr = document.createElement("tr");
    tr.dataset.id = r.id;
    cell(tr, clock(r.updated));
    cell(tr, r.account);
    cell(tr, r.quota_name || r.quota);
    cell(tr, fmt(r.desired), "num");
    cell(tr, r.status, "status " + (r.status === "APPROVED" ? "ok" : "bad"));
    cell(tr, r.reason || "", "reason");
    return tr;
  });
  $("decided").tBodies[0].replaceChildren(...decided);
  $("decided").hidden = $("decided-title").hidden = decided.length === 0;
}

// decide approves or denies one request through the admin endpoint.
async function decide(id, verb, reason, tr) {
  for (const b of tr.querySelectorAll("button")) b.disabled = true;
  const out = $("requests-result");
  try {
    const [ok, body, status] = await post(REQUESTS_PATH + "/" + encodeURIComponent(id) + "/" + verb, { reason });
    if (ok) {
      out.textContent = (verb === "approve" ? "Approved " : "Denied ") + id + ": " + body.status +
        (body.status === "APPROVED" ? ", applied on every node at once" : "");
      out.className = "ok";
    } else {
      out.textContent = verb + " " + id + " failed: " + status + " " + (body.error || "");
      out.className = "bad";
    }
  } catch (e) {
    if (e instanceof AuthError) { sessionStorage.removeItem(TOKEN_KEY); showLogin(e.message); return; }
    out.textContent = verb + " " + id + " failed: " + e.message;
    out.className = "bad";
  }
  pendingRows.delete(id);
  poll();
}

