// The task board and a task's page (docs/webui.md), loaded after app.js and refreshed with it.
// It uses app.js's helpers (el, $, api, state, nameOf, clock, idleText); as there, every string
// from the database is inserted as text, never HTML.
"use strict";

const TASK_STATES = ["waiting", "ready", "in_progress", "blocked", "done", "merged", "cancelled"];
const board = { taskId: null, diffOf: null }; // the task whose page is open; its diff shown

function costText(task) {
  if (task.cost_usd === null) return "cost ?"; // unknown: its reason is the title
  return `$${task.cost_usd.toFixed(4)}`;
}

function renderBoard(tasks) {
  const columns = new Map(TASK_STATES.map((s) => [s, el("div", { class: "column", "data-testid": "column", "data-state": s },
    el("h3", {}, s.replace("_", " ")))]));
  for (const task of tasks) {
    const column = columns.get(task.state);
    if (!column) continue;
    column.append(el("div", {
      class: "card",
      "data-testid": "task-card",
      "data-task-id": task.task_id,
      title: task.body,
      onclick: () => openTask(task.task_id),
    },
      el("div", { class: "name" }, `#${task.task_id} `, task.title),
      el("div", { class: "meta" },
        el("span", { "data-testid": "task-assignee" }, task.assignee_member_id === null ? "unassigned" : nameOf(task.assignee_member_id)),
        " · ",
        el("span", { "data-testid": "task-age", title: task.created_at }, `age ${idleText(Math.floor(task.age_seconds))}`),
        " · ",
        el("span", { "data-testid": "task-cost", title: task.cost_unknown_reason || "" }, costText(task)),
        task.after.length ? ` · after ${task.after.map((t) => `#${t}`).join(", ")}` : null)));
  }
  $("board").replaceChildren(...columns.values());
}

// The members a task can be given to: the fleet's active members (not the Director or monitor).
function assigneeOptions(select, withNobody) {
  const chosen = select.value;
  select.replaceChildren();
  if (withNobody) select.append(el("option", { value: "" }, "unassigned"));
  for (const m of state.roster) {
    if (m.kind === "member" && m.status === "active") select.append(el("option", { value: m.member_id }, `${m.name} (${m.member_id})`));
  }
  if ([...select.options].some((o) => o.value === chosen)) select.value = chosen;
}

async function refreshBoard() {
  if (state.fleetId === null) {
    $("board").replaceChildren();
    return;
  }
  assigneeOptions($("task-assignee"), true);
  assigneeOptions($("task-assign-to"), false);
  renderBoard(await api("/api/tasks"));
  renderQueue(await api("/api/merges"));
  await refreshTask();
}

function renderQueue(entries) {
  $("merge-queue").replaceChildren(...entries.map((e) => el("li", {
    "data-testid": "queue-entry", "data-task-id": e.task_id, onclick: () => openTask(e.task_id),
  }, `#${e.task_id} ${e.title} · ${e.git_branch} · ${nameOf(e.assignee_member_id)}`, e.merging ? " · merging now" : "")));
}

// A patch as lines, each coloured by its kind; text only, never HTML.
function diffLines(text) {
  return text.split("\n").map((line) => {
    let kind = "";
    if (line.startsWith("diff --git") || line.startsWith("+++ ") || line.startsWith("--- ")) kind = "file";
    else if (line.startsWith("@@")) kind = "hunk";
    else if (line.startsWith("+")) kind = "add";
    else if (line.startsWith("-")) kind = "del";
    return el("div", { class: kind }, line || " ");
  });
}

async function refreshReview(t) {
  const shown = (t.state === "done" || t.state === "merged") && t.git_head !== null;
  $("task-review").hidden = !shown;
  $("task-merge").hidden = t.state !== "done";
  $("task-reject").hidden = t.state !== "done";
  $("task-reject-text").hidden = t.state !== "done";
  if (!shown || board.diffOf === `${t.task_id}:${t.git_head}`) return;
  try {
    const diff = await api(`/api/tasks/${t.task_id}/diff`);
    board.diffOf = `${t.task_id}:${t.git_head}`;
    $("task-diff-files").replaceChildren(...diff.files.map((f) => el("li", { "data-testid": "diff-file" },
      `${f.path} +${f.added ?? "?"} -${f.deleted ?? "?"}`)));
    $("task-diff").replaceChildren(...diffLines(diff.diff));
  } catch (err) {
    $("task-diff").replaceChildren(el("div", { class: "error" }, err.message));
  }
}

// --- a task's page ------------------------------------------------------------------------------

function secondsText(spent) {
  return Object.entries(spent).map(([s, v]) => `${s} ${idleText(Math.round(v))}`).join(", ") || "-";
}

async function refreshTask() {
  if (board.taskId === null) return;
  let page;
  try {
    page = await api(`/api/tasks/${board.taskId}`);
  } catch (err) {
    $("task-fields").replaceChildren(el("dd", { class: "error" }, err.message));
    return;
  }
  const t = page.task;
  $("task-view-title").textContent = `#${t.task_id} ${t.title}`;
  const fields = $("task-fields");
  fields.replaceChildren();
  for (const [label, value, title] of [
    ["state", t.state, t.state_since],
    ["assignee", t.assignee_member_id === null ? "unassigned" : nameOf(t.assignee_member_id), null],
    ["after", t.after.map((a) => `#${a}`).join(", ") || "-", null],
    ["created", clock(t.created_at), t.created_at],
    ["time in state", secondsText(page.seconds_in_state), null],
    ["cost", costText(t), t.cost_unknown_reason],
    ["reason", t.reason, null],
    ["result", t.result, null],
  ]) {
    if (value === null || value === undefined) continue;
    fields.append(el("dt", {}, label), el("dd", { "data-testid": `task-field-${label.replace(/ /g, "-")}`, title }, value));
  }
  $("task-view-body").textContent = t.body;
  const open = ["waiting", "ready", "in_progress", "blocked"].includes(t.state);
  $("task-cancel").hidden = !open;
  $("task-assign").hidden = !open;
  $("task-assign-to").hidden = !open;
  $("task-reopen").hidden = !["done", "cancelled", "blocked"].includes(t.state);
  await refreshReview(t);
  const thread = $("task-thread");
  thread.replaceChildren();
  for (const m of page.thread) {
    thread.append(el("li", { "data-testid": "thread-message", "data-message-id": m.message_id },
      el("div", { class: "head" },
        el("time", { datetime: m.created_at, title: m.created_at }, clock(m.created_at)),
        ` ${nameOf(m.from_member_id)} → ${nameOf(m.to_member_id)}`,
        m.reply_to_message_id ? ` (reply to ${m.reply_to_message_id})` : ""),
      el("div", { class: "body", "data-testid": "body" }, m.text)));
  }
}

function openTask(taskId) {
  board.taskId = taskId;
  board.diffOf = null;
  $("task-view").hidden = false;
  $("task-action-result").textContent = "";
  refreshTask();
}

// One change of the open task (assign, reopen, cancel, merge, reject), then the board again.
async function changeTask(verb, body) {
  const out = $("task-action-result");
  try {
    const done = await api(`/api/tasks/${board.taskId}/${verb}`, { method: "POST", body });
    out.classList.remove("error");
    out.textContent = [`Task ${done.task.task_id} is ${done.task.state}.`, ...done.warnings].join(" ");
    await refreshBoard();
  } catch (err) {
    out.classList.add("error");
    out.textContent = err.message;
  }
}

async function onCreateTask(event) {
  event.preventDefault();
  const out = $("task-result");
  const after = $("task-after").value.split(/[\s,]+/).filter(Boolean).map((x) => Number(x.replace(/^#/, "")));
  if (after.some((x) => !Number.isInteger(x) || x < 1)) {
    out.classList.add("error");
    out.textContent = "After: task ids, such as 3, 5.";
    return;
  }
  const assignee = $("task-assignee").value;
  try {
    const made = await api("/api/tasks", { method: "POST", body: {
      title: $("task-title").value, body: $("task-body").value,
      assignee_member_id: assignee === "" ? null : Number(assignee), after,
    } });
    out.classList.remove("error");
    out.textContent = [`Created task ${made.task.task_id} (${made.task.state}).`, ...made.warnings].join(" ");
    for (const id of ["task-title", "task-body", "task-after"]) $(id).value = "";
    await refreshBoard();
  } catch (err) {
    out.classList.add("error");
    out.textContent = err.message;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("task-form").addEventListener("submit", onCreateTask);
  $("task-close").addEventListener("click", () => { board.taskId = null; $("task-view").hidden = true; });
  $("task-assign").addEventListener("click", () => changeTask("assign", { member_id: Number($("task-assign-to").value) }));
  $("task-reopen").addEventListener("click", () => changeTask("reopen"));
  $("task-cancel").addEventListener("click", () => changeTask("cancel"));
  $("task-merge").addEventListener("click", () => changeTask("merge", {}));
  $("task-reject").addEventListener("click", () => changeTask("reject", { text: $("task-reject-text").value }));
  $("fleet").addEventListener("change", () => { board.taskId = null; $("task-view").hidden = true; });
});
