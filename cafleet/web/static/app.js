// The cafleet WebUI page. No framework, no build step. Every string that comes from the
// database (names, descriptions, bodies, pane captures) is inserted as a text node, never as
// HTML: `el()` turns string children into text nodes and this file never assigns innerHTML.
"use strict";

const REFRESH_MS = 5000;
const state = {
  fleetId: null,
  readOnly: false,
  roster: [],      // GET /api/members
  names: new Map(), // member_id -> name, from the roster and the timeline
  paneMember: null, // member whose capture the pane view shows
  timer: null,
};

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const $ = (id) => document.getElementById(id);

async function api(path, options = {}) {
  const headers = { Accept: "application/json", ...(options.headers || {}) };
  if (options.fleet !== false && state.fleetId !== null) headers["X-Fleet-Id"] = String(state.fleetId);
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method: options.method || "GET",
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    credentials: "same-origin",
  });
  state.readOnly = response.headers.get("X-Cafleet-Read-Only") === "1";
  document.body.classList.toggle("read-only", state.readOnly);
  const type = response.headers.get("Content-Type") || "";
  const data = type.includes("application/json") ? await response.json() : await response.text();
  if (!response.ok) {
    const detail = data && typeof data === "object" && "detail" in data ? data.detail : String(data);
    throw new Error(`${response.status}: ${detail}`);
  }
  return data;
}

function nameOf(id) {
  if (id === null || id === undefined) return "?";
  const name = state.names.get(id);
  return name === undefined ? `member ${id}` : `${name} (${id})`;
}

// Every time on the page is the browser's local time on one 24-hour clock: `14:05:09` today,
// `2026-05-01 14:05:09` another day; the stored ISO string is the element's title.
function clock(value) {
  if (!value) return "-";
  const date = value instanceof Date ? value : new Date(String(value).replace(/(\.\d{3})\d+/, "$1"));
  if (Number.isNaN(date.getTime())) return String(value);
  const pad = (n) => String(n).padStart(2, "0");
  const time = `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
  const day = `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
  const now = new Date();
  const today = `${now.getFullYear()}-${pad(now.getMonth() + 1)}-${pad(now.getDate())}`;
  return day === today ? time : `${day} ${time}`;
}

function idleText(seconds) {
  if (seconds === null || seconds === undefined) return "-";
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
  return `${Math.floor(seconds / 3600)}h`;
}

function setStatus(text, isError) {
  const node = $("status");
  node.textContent = text;
  node.classList.toggle("error", Boolean(isError));
}

// --- fleets ---------------------------------------------------------------------------------

async function loadFleets() {
  const saved = Number(new URLSearchParams(location.hash.slice(1)).get("fleet")) || null;
  const previous = state.fleetId;
  const fleets = await api("/api/fleets", { fleet: false }); // the one route without X-Fleet-Id
  const picker = $("fleet");
  picker.replaceChildren();
  if (fleets.length !== 1) picker.append(el("option", { value: "" }, fleets.length ? "choose a fleet" : "no live fleet"));
  for (const fleet of fleets) {
    const label = `${fleet.name === null ? "(unnamed)" : fleet.name} #${fleet.fleet_id} (${fleet.member_count} members)`;
    picker.append(el("option", { value: fleet.fleet_id }, label));
  }
  const ids = fleets.map((f) => f.fleet_id);
  let chosen = null;
  if (ids.length === 1) chosen = ids[0];
  else if (ids.includes(previous)) chosen = previous;
  else if (ids.includes(saved)) chosen = saved;
  state.fleetId = chosen;
  picker.value = chosen === null ? "" : String(chosen);
}

// --- roster ---------------------------------------------------------------------------------

function usageText(u) {
  if (!u) return "usage -";
  if (u.input === null) return "usage unknown";
  const cost = u.cost_usd === null ? "" : ` · $${u.cost_usd.toFixed(4)}`;
  return `in ${u.input} · out ${u.output} · cache ${u.cache_read + u.cache_write}${cost}`;
}


// docs/worktrees.md §2: "<branch> (clean|dirty[, <n> ahead])".
function worktreeText(w) {
  if (!w.exists) return `${w.branch} (worktree gone)`;
  if (w.error !== null || w.dirty === null) return `${w.branch} (?)`;
  const parts = [w.dirty ? "dirty" : "clean"];
  if (w.ahead) parts.push(`${w.ahead} ahead`);
  else if (w.ahead === null) parts.push("ahead ?");
  if (w.head_branch !== w.branch) parts.push(w.head_branch ? `on ${w.head_branch}` : "detached");
  return `${w.branch} (${parts.join(", ")})`;
}

// A fleet across machines (docs/runtime.md §10.5): each member's host, and whether the loop
// that delivers there is live. Nothing for a fleet on one host.
function hostText(p, panes) {
  const hosts = panes.hosts || [];
  if (hosts.length < 2 || !p.host_id) return null;
  const host = hosts.find((h) => h.host_id === p.host_id);
  const down = host && !host.live;
  return el("span", { "data-testid": "member-host", class: down ? "badge gone" : "" },
    ` · host ${p.host_id}${down ? " (its loop is not running)" : ""}`);
}

function renderRoster(members, activity, panes, worktrees = [], usage = null) {
  const prompts = [];
  const used = new Map((usage || []).map((u) => [u.member_id, u]));
  const act = new Map(activity.map((a) => [a.member_id, a]));
  const tree = new Map(worktrees.map((w) => [w.member_id, w]));
  const pane = new Map(panes.panes.map((p) => [p.member_id, p]));
  const list = $("roster");
  list.replaceChildren();
  for (const member of members) {
    const a = act.get(member.member_id) || { idle: null, unacked: 0 };
    const p = pane.get(member.member_id) || { state: "none", pane_id: null, activity: null };
    const placement = member.placement;
    const item = el(
      "li",
      {
        "data-testid": "member",
        "data-member-id": member.member_id,
        class: member.status === "active" ? "active" : "deregistered",
        title: member.description,
        onclick: () => openPane(member.member_id),
      },
      el("span", { class: "name", "data-testid": "member-name" }, member.name),
      el("span", { class: "badge" }, member.kind),
      member.permissions ? el("span", { class: `badge perm-${member.permissions}`, "data-testid": "member-permissions", title: "permission profile" }, member.permissions) : null,
      a.unacked ? el("span", { class: "badge unacked", "data-testid": "member-unacked" }, `${a.unacked} un-ACKed`) : null,
      el("div", { class: "meta" },
        `#${member.member_id} · `,
        placement ? placement.coding_agent : "no agent",
        " · pane ",
        placement ? (placement.mux_pane_id === null ? "(pending)" : placement.mux_pane_id) : "-",
        " ",
        p.paused && p.state === "alive"
          ? el("span", { class: "badge waiting", "data-testid": "member-pane-state" }, `paused (${p.paused})`)
          : waiting(p)
          ? el("span", { class: "badge waiting", "data-testid": "member-pane-state" }, "waiting (permission)")
          : el("span", { class: `badge ${p.state}`, "data-testid": "member-pane-state", title: paneTitle(p) }, paneText(p)),
        hostText(p, panes),
        ` · idle ${idleText(a.idle)}`,
        a.last_received_at
          ? el("span", { "data-testid": "member-received",
                         title: `its newest receipt, from its agent's hook: ${a.last_received_at}` },
              ` · received ${clock(a.last_received_at)}`)
          : null,
        member.status === "active" ? null : " · deregistered",
        " · ",
        el("span", { class: "usage", "data-testid": "member-usage",
                     title: (used.get(member.member_id) || {}).unknown_reason || "" },
           usageText(used.get(member.member_id))),
        tree.has(member.member_id)
          ? el("div", { class: "meta", "data-testid": "member-worktree", title: tree.get(member.member_id).path },
              `worktree ${worktreeText(tree.get(member.member_id))}`)
          : null,
      ),
    );
    if (waiting(p)) {
      const box = el("div", { class: "prompt", "data-testid": "member-prompt", "data-member-id": member.member_id });
      item.append(box);
      prompts.push(loadPrompt(member.member_id, box));
    }
    list.append(item);
  }
  if (panes.error) list.append(el("li", { class: "meta error" }, `tmux: ${panes.error}`));
  return Promise.all(prompts);
}

// `alive (ready)` as `member list` says it; a live pane whose screen could not be read says so
// rather than a bare `alive` (docs/webui.md).
function paneText(p) {
  if (p.state !== "alive") return p.state;
  return `alive (${p.activity === null || p.activity === undefined ? "state not read" : p.activity})`;
}

function paneTitle(p) {
  if (p.state !== "alive") return null;
  return p.activity ? "the agent's state, as the delivery gate reads its screen" : "its screen could not be captured";
}

// --- a member waiting at a prompt (docs/runtime.md §5.12) -------------------------------------

function waiting(p) {
  return p.state === "alive" && p.activity === "awaiting_user";
}

// The question as the pane shows it and one button per choice; a button answers exactly the
// prompt it was drawn for (its prompt_id), so a newer prompt is never answered by an old button.
async function loadPrompt(memberId, box) {
  let shown;
  try {
    shown = await api(`/api/members/${memberId}/prompt`);
  } catch (err) {
    box.replaceChildren(el("p", { class: "error" }, err.message));
    return;
  }
  const prompt = shown.prompt;
  if (prompt === null) { box.replaceChildren(); return; }
  const result = el("p", { "data-testid": "prompt-result" });
  const lines = prompt.readable ? [...prompt.details, prompt.question] : prompt.raw;
  const buttons = el("div", { class: "choices mutating" });
  for (const choice of prompt.choices) {
    buttons.append(el("button", {
      type: "button",
      "data-testid": "prompt-choice",
      "data-choice": choice.number,
      onclick: (event) => { event.stopPropagation(); answerPrompt(memberId, prompt.prompt_id, choice, result); },
    }, `${choice.number}. ${choice.label}`));
  }
  box.replaceChildren(
    el("pre", { "data-testid": "prompt-question", "data-prompt-id": prompt.prompt_id }, lines.join("\n")),
    prompt.readable ? buttons : el("p", { class: "meta" }, "cafleet cannot read this prompt: answer it in the pane."),
    result,
  );
}

async function answerPrompt(memberId, promptId, choice, result) {
  result.classList.remove("error");
  result.textContent = `Answering ${choice.number}. ${choice.label}…`;
  try {
    const done = await api(`/api/members/${memberId}/answer`, {
      method: "POST", body: { choice: String(choice.number), prompt_id: promptId },
    });
    result.textContent = `Answered ${done.choice.number}. ${done.choice.label}.`;
    await refresh();
  } catch (err) {
    result.classList.add("error");
    result.textContent = err.message;
  }
}

// --- timeline -------------------------------------------------------------------------------

function renderTimeline(data) {
  for (const n of data.names) state.names.set(n.member_id, n.name);
  const note = $("limit-note");
  note.hidden = !data.limit_reached;
  note.textContent = data.limit_reached
    ? `Showing the newest ${data.limit} deliveries only: older messages are not shown, and a broadcast cut by the limit counts only its shown recipients.`
    : "";
  const list = $("timeline");
  const atBottom = list.scrollTop + list.clientHeight >= list.scrollHeight - 4;
  list.replaceChildren();
  for (const entry of data.entries) {
    const time = el("time", { datetime: entry.created_at, title: entry.created_at }, clock(entry.created_at));
    if (entry.kind === "broadcast") {
      const recipients = el("ul", { class: "recipients" });
      for (const d of entry.deliveries) {
        recipients.append(el("li", { "data-testid": "recipient", "data-member-id": d.to_member_id },
          nameOf(d.to_member_id), ": ",
          d.ack_at ? el("span", { "data-testid": "ack-time", title: d.ack_at }, `ACKed ${clock(d.ack_at)}`) : "not ACKed"));
      }
      list.append(el("li", { class: "broadcast", "data-testid": "broadcast", "data-origin": entry.origin_message_id },
        el("div", { class: "head" }, time, " ", nameOf(entry.from_member_id), " → @all ",
          el("span", { class: "badge", "data-testid": "recipient-count" }, `${entry.recipients} recipients`),
          el("span", { class: "badge", "data-testid": "ack-count" }, `${entry.acked} ACKed`)),
        el("div", { class: "body", "data-testid": "body" }, entry.text),
        recipients));
    } else {
      const d = entry.deliveries[0];
      list.append(el("li", { class: "unicast", "data-testid": "unicast", "data-message-id": d.message_id },
        el("div", { class: "head" }, time, " ", nameOf(entry.from_member_id), " → ", nameOf(d.to_member_id), " ",
          el("span", { class: "badge", "data-testid": "ack-state", title: d.ack_at || "" }, d.ack_at ? `ACKed ${clock(d.ack_at)}` : "not ACKed")),
        el("div", { class: "body", "data-testid": "body" }, entry.text)));
    }
  }
  if (atBottom) list.scrollTop = list.scrollHeight;
}

// --- monitor ----------------------------------------------------------------------------------

function renderMonitor(data) {
  $("monitor-state").textContent = data.runtime === null ? "No monitor loop ever ran for this fleet." : data.live ? "Loop live" : "Loop stopped";
  const fields = $("monitor-fields");
  fields.replaceChildren();
  const rt = data.runtime || {};
  const when = (ts) => (ts ? { text: clock(ts), title: ts } : null);
  for (const [label, value] of [
    ["pid", rt.pid], ["started", when(rt.started_at)], ["last tick", when(rt.last_tick_at)], ["tick", rt.tick_seconds === undefined ? null : `${rt.tick_seconds}s`],
    ["last wake", when(rt.last_wake_at)], ["wake interval", rt.wake_interval_seconds === null || rt.wake_interval_seconds === undefined ? "unset" : `${rt.wake_interval_seconds}s`],
    ["wake requested", when(rt.wake_requested_at)],
  ]) {
    const shown = value !== null && typeof value === "object" ? value : { text: value, title: null };
    fields.append(el("dt", {}, label), el("dd", { "data-testid": `monitor-${label.replace(/ /g, "-")}`, title: shown.title },
      shown.text === null || shown.text === undefined ? "-" : shown.text));
  }
  const input = $("interval");
  if (document.activeElement !== input) input.value = rt.wake_interval_seconds ?? "";
  $("interval-form").hidden = data.runtime === null;
  $("wake").disabled = !data.live;
  const roster = $("wake-roster");
  roster.replaceChildren();
  const rows = [...(data.wake_roster.director ? [data.wake_roster.director] : []), ...data.wake_roster.members];
  for (const e of rows) roster.append(el("li", {}, `${e.name} (${e.member_id}): ${e.unacked} un-ACKed`));
}

// --- pane view ----------------------------------------------------------------------------------

async function refreshPane() {
  if (state.paneMember === null) return;
  const id = state.paneMember;
  $("pane-title").textContent = nameOf(id);
  try {
    $("pane-text").textContent = await api(`/api/members/${id}/capture?lines=60`);
    $("pane-text").classList.remove("error");
  } catch (err) {
    $("pane-text").textContent = err.message;
    $("pane-text").classList.add("error");
  }
}

function openPane(memberId) {
  state.paneMember = memberId;
  $("pane").hidden = false;
  refreshPane();
}

// --- refresh ------------------------------------------------------------------------------------

async function refresh() {
  try {
    await loadFleets();
    if (state.fleetId === null) {
      for (const id of ["roster", "timeline", "board"]) $(id).replaceChildren();
      setStatus("Choose a fleet.");
      return;
    }
    const [members, activity, panes, timeline, monitor, worktrees, usage] = await Promise.all([
      api("/api/members"), api("/api/members/activity"), api("/api/members/panes"),
      api("/api/timeline"), api("/api/monitor"), api("/api/members/worktrees"),
      // Usage is extra: a bad price file must not blank the roster.
      api("/api/members/usage").catch(() => null),
    ]);
    state.roster = members;
    for (const m of members) state.names.set(m.member_id, m.name);
    const prompting = renderRoster(members, activity, panes, worktrees, usage);
    renderTimeline(timeline);
    renderMonitor(monitor);
    await Promise.all([prompting, refreshPane(), refreshBoard()]); // refreshBoard: board.js
    setStatus(`Updated ${clock(new Date())}${state.readOnly ? " · read-only" : ""}`);
  } catch (err) {
    setStatus(err.message, true);
  }
}

function scheduleRefresh() {
  clearTimeout(state.timer);
  state.timer = setTimeout(async () => { await refresh(); scheduleRefresh(); }, REFRESH_MS);
}

// --- composer -------------------------------------------------------------------------------

// `@all text` broadcasts; `@name text` sends to the active member with that name (the longest
// name that matches, so names with spaces work; the exact spelling first, then any letter case);
// `@<id> text` names a member by id. An unknown name gets the nearest active names.
function parseComposed(raw) {
  const text = raw.replace(/^\s+/, "");
  if (!text.startsWith("@")) return { error: "Start with @name or @all." };
  const rest = text.slice(1);
  const split = (len) => ({ ok: len === rest.length || /\s/.test(rest[len]), body: rest.slice(len).replace(/^\s+/, "") });
  if (rest.toLowerCase().startsWith("all") && split(3).ok) return { to: "*", text: split(3).body };
  const active = state.roster.filter((m) => m.status === "active").sort((a, b) => b.name.length - a.name.length);
  for (const fold of [(x) => x, (x) => x.toLowerCase()]) {
    const member = active.find((m) => fold(rest).startsWith(fold(m.name)) && split(m.name.length).ok);
    if (!member) continue;
    const same = active.filter((m) => fold(m.name) === fold(member.name));
    if (same.length > 1) return { error: `Several members are named ${member.name}; use @<id>.` };
    return { to: member.member_id, text: split(member.name.length).body };
  }
  const byId = /^(\d+)(\s|$)/.exec(rest);
  if (byId) return { to: Number(byId[1]), text: rest.slice(byId[1].length).replace(/^\s+/, "") };
  const byRoster = state.roster.filter((m) => m.status === "active").map((m) => m.name);
  return { error: unknownName(rest.split(/\s/, 1)[0], byRoster) };
}

function unknownName(word, names) {
  const typed = word.toLowerCase();
  const near = [...new Set(names)].filter((name) => {
    const n = name.toLowerCase();
    return n.startsWith(typed) || distance(n, typed) <= Math.max(1, Math.floor(n.length / 3));
  });
  const listed = (list) => list.map((n) => `@${n}`).join(", ");
  if (near.length) return `No active member is named ${word}. Did you mean ${listed(near)}?`;
  return `No active member is named ${word}; the active members are ${listed(names)}.`;
}

// How many one-letter edits (insert, delete, change, swap two neighbours) turn a into b.
function distance(a, b) {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.length][b.length];
}

async function onCompose(event) {
  event.preventDefault();
  const result = $("compose-result");
  const parsed = parseComposed($("compose-text").value);
  result.classList.toggle("error", Boolean(parsed.error));
  if (parsed.error) { result.textContent = parsed.error; return; }
  if (!parsed.text.trim()) { result.classList.add("error"); result.textContent = "The message is empty."; return; }
  try {
    const sent = await api("/api/messages/send", { method: "POST", body: { to_member_id: parsed.to, text: parsed.text } });
    const what = sent.kind === "broadcast" ? `Broadcast to ${sent.recipients} recipients, ${sent.notified} notified.` : `Sent message ${sent.message.message_id}${sent.notified ? ", notified." : "."}`;
    result.textContent = [what, ...sent.warnings].join(" ");
    $("compose-text").value = "";
    await refresh();
  } catch (err) {
    result.classList.add("error");
    result.textContent = err.message;
  }
}

// --- monitor controls ---------------------------------------------------------------------------

async function onInterval(event) {
  event.preventDefault();
  const out = $("monitor-result");
  try {
    const seconds = Number($("interval").value);
    const data = await api("/api/monitor", { method: "PATCH", body: { wake_interval_seconds: seconds } });
    renderMonitor(data);
    out.classList.remove("error");
    out.textContent = `Wake interval set to ${seconds}s.`;
  } catch (err) {
    out.classList.add("error");
    out.textContent = err.message;
  }
}

async function onWake() {
  const out = $("monitor-result");
  try {
    const data = await api("/api/monitor/wake", { method: "POST" });
    out.classList.remove("error");
    out.textContent = `Wake requested at ${clock(data.wake_requested_at)}.`;
    renderMonitor(await api("/api/monitor"));
  } catch (err) {
    out.classList.add("error");
    out.textContent = err.message;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("fleet").addEventListener("change", (event) => {
    const id = Number(event.target.value) || null;
    location.hash = id === null ? "" : `fleet=${id}`;
    state.fleetId = id;
    state.paneMember = null;
    $("pane").hidden = true;
    refresh();
  });
  $("composer").addEventListener("submit", onCompose);
  $("interval-form").addEventListener("submit", onInterval);
  $("wake").addEventListener("click", onWake);
  $("pane-close").addEventListener("click", () => { state.paneMember = null; $("pane").hidden = true; });
  $("monitor-toggle").addEventListener("click", () => {
    const pop = $("monitor");
    pop.hidden = !pop.hidden;
    $("monitor-toggle").setAttribute("aria-expanded", String(!pop.hidden));
  });
  refresh().then(scheduleRefresh);
});
