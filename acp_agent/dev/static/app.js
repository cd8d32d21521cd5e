// The inspector page: talks to the inspector over a WebSocket, keeps the model, renders on each frame.

import { elicitationForm } from "./forms.js";
import { Model, idKey } from "./model.js";
import { background, chat, h, permissionDialog, sessionsList, urlDialog } from "./view.js";
import { WireLog } from "./wirelog.js";

const $ = (id) => document.getElementById(id);
const model = new Model();
const waiting = new Map();
let socket = null;
let nextRid = 1;
let selected = null;
let showAll = false;
let drawn = { chat: null, dialog: null, stderr: -1, bg: null };
let scheduled = false;

const wirelog = new WireLog(model, $("wire"), $("wire-detail"));

function schedule() {
  if (scheduled) return;
  scheduled = true;
  requestAnimationFrame(() => {
    scheduled = false;
    render();
  });
}

function showError(text) {
  const note = h("div", { class: "error", "data-testid": "error" }, text);
  $("errors").append(note);
  setTimeout(() => note.remove(), 8000);
}

function op(fields) {
  return new Promise((resolve, reject) => {
    const rid = nextRid++;
    waiting.set(rid, (answer) => ("error" in answer ? reject(answer.error) : resolve(answer.result)));
    socket.send(JSON.stringify({ rid, ...fields }));
  });
}

async function request(method, params) {
  try {
    return await op({ op: "request", method, params });
  } catch (error) {
    showError(`${method}: ${error.message ?? JSON.stringify(error)}`);
    throw error;
  }
}

const cwd = () => model.status?.cwd ?? "/";

// The run's secret: read once from the URL's fragment (never sent to a server), then kept in sessionStorage,
// which belongs to this origin, port included (a cookie would reach every server of this host, whatever its port).
const TOKEN_KEY = "acp-inspector-token";

function runToken() {
  const fromUrl = new URLSearchParams(location.hash.slice(1)).get("token");
  if (fromUrl) {
    sessionStorage.setItem(TOKEN_KEY, fromUrl);
    history.replaceState(null, "", location.pathname); // out of the address bar and the history
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

let turnedAway = false;

function turnAway(text) {
  turnedAway = true;
  document.body.replaceChildren(h("p", { class: "refused", "data-testid": "refused" }, text));
}

function connect() {
  const token = runToken();
  if (!token) {
    turnAway("open the URL that `acp-agent dev` printed (it carries this run's token)");
    return;
  }
  socket = new WebSocket(`ws://${location.host}/ws`);
  socket.onopen = () => socket.send(JSON.stringify({ type: "auth", token }));
  socket.onmessage = (e) => {
    const m = JSON.parse(e.data);
    if (m.type === "refused") {
      sessionStorage.removeItem(TOKEN_KEY);
      turnAway("wrong token: open the URL that `acp-agent dev` printed");
      return;
    }
    if (m.type === "hello") {
      model.replay = m.replay;
      model.telemetry = Boolean(m.telemetry);
      document.body.classList.toggle("replay", m.replay);
      for (const event of m.events) model.apply(event);
    } else if (m.type === "events") {
      for (const event of m.events) model.apply(event);
    } else if (m.type === "result") {
      waiting.get(m.rid)?.(m);
      waiting.delete(m.rid);
      return;
    }
    schedule();
  };
  socket.onclose = () => {
    if (turnedAway) return;
    $("agent-status").textContent = "inspector stopped";
    document.body.classList.add("offline");
  };
}

function selectedView() {
  if (selected && !model.sessions.has(selected)) selected = null;
  if (!selected) {
    const first = [...model.sessions.values()].find((v) => !v.parent && !v.closed);
    selected = first?.id ?? null;
  }
  return selected ? model.sessions.get(selected) : null;
}

function renderHeader() {
  const s = model.status;
  $("agent").textContent = s?.agent ?? (model.replay ? "replay" : "");
  let text = s ? s.state : "connecting…";
  if (s?.state === "exited") {
    text = s.error ? `failed: ${s.error}` : s.returncode == null ? "disconnected" : `exited (status ${s.returncode})`;
  }
  if (model.replay) text = "replay (no agent)";
  $("agent-status").textContent = text;
  $("agent-status").className = model.replay ? "replay" : s?.state ?? "";
  const banner = $("banner");
  if (s?.state === "exited" && !model.replay) {
    banner.hidden = false;
    banner.replaceChildren(h("b", {}, `The agent ${text}.`), " ",
      h("button", { "data-testid": "banner-restart", onclick: () => op({ op: "restart" }) }, "Restart"),
      s.stderrTail ? h("pre", { "data-testid": "stderr-tail" }, s.stderrTail) : "");
  } else {
    banner.hidden = true;
  }
  const caps = s?.capabilities ?? {};
  for (const box of document.querySelectorAll("[data-cap]")) {
    if (box.dataset.touched) continue;
    const [group, name] = box.dataset.cap.split(".");
    box.checked = Boolean(caps[group]?.[name]);
  }
  const methods = model.init?.authMethods ?? [];
  $("login").replaceChildren(...(methods.length ? [
    h("span", {}, model.authenticated ? `logged in (${model.authenticated})` : "not logged in"),
    ...methods.map((m) => h("button", { "data-testid": "login-method", "data-method-id": m.methodId,
      title: m.description ?? "", onclick: () => request("auth/login", { methodId: m.methodId }) },
    `${m.name ?? m.methodId}`)),
    model.authenticated ? h("button", { "data-testid": "logout", onclick: () => request("auth/logout", {}) },
      "Log out") : "",
  ] : []));
}

// A Stop button: terminal/cancel and tool_call/cancel are requests, session/cancel (a child) a notification.
function stopItem(method, params) {
  if (method === "session/cancel") op({ op: "notify", method, params }).catch((e) => showError(e.message));
  else request(method, params).catch(() => {});
}

function renderSession(view) {
  $("sessions").replaceChildren(...sessionsList(model, selected, (id) => {
    selected = id;
    drawn.chat = null;
    schedule();
  }));
  // Once the agent is gone its last reported state (say idle, end_turn) no longer holds.
  const gone = !model.replay && model.status?.state === "exited";
  $("state").textContent = !view ? "-" : gone ? "agent exited" : view.state;
  $("state").className = !view ? "" : gone ? "exited" : view.state;
  $("stop-reason").textContent = !gone && view?.stopReason ? `stop: ${view.stopReason}` : "";
  const usage = view?.usage;
  const context = view?.context;
  $("usage").textContent = [usage ? `tokens ${usage.totalTokens} (in ${usage.inputTokens}, out ${usage.outputTokens})`
    : "", context ? `context ${context.used}/${context.size}` : ""].filter(Boolean).join(" · ");
  $("session-id").textContent = view?.id ?? "";
  const key = view ? `${view.id}:${view.version}:${showAll}` : "none";
  if (drawn.chat !== key) {
    const box = $("chat");
    const atEnd = box.scrollTop + box.clientHeight >= box.scrollHeight - 40;
    box.replaceChildren(...chat(view, showAll));
    if (atEnd) box.scrollTop = box.scrollHeight;
    drawn.chat = key;
  }
  const bgKey = `${view?.id}:${model.version}`;
  if (drawn.bg !== bgKey) {
    $("background").replaceChildren(...background(model, view, stopItem));
    drawn.bg = bgKey;
  }
}

function renderDialogs() {
  const [key, question] = [...model.questions.entries()][0] ?? [];
  if (drawn.dialog === (key ?? null)) return;
  drawn.dialog = key ?? null;
  if (!question) return $("dialogs").replaceChildren();
  const answer = (result) => {
    op({ op: "answer", id: question.msg.id, result }).catch((e) => showError(e.message));
  };
  let body;
  if (question.kind === "permission") {
    const p = question.msg.params ?? {};
    const callId = p.subject?.type === "tool_call" ? p.subject.toolCall?.toolCallId : null;
    body = permissionDialog(question.msg, answer, model.sessions.get(p.sessionId)?.toolCalls.get(callId));
  }
  else if (question.msg.params?.mode === "url") body = urlDialog(question.msg, answer);
  else body = h("div", { class: "dialog" }, h("h3", {}, question.msg.params?.message ?? "Question"),
    elicitationForm(question.msg.params ?? {}, answer));
  const more = model.questions.size > 1 ? h("small", {}, `${model.questions.size - 1} more waiting`) : "";
  $("dialogs").replaceChildren(h("div", { class: "overlay" }, body, more));
}

function render() {
  renderHeader();
  renderSession(selectedView());
  renderDialogs();
  wirelog.update();
  $("wire-count").textContent = `${wirelog.rows.length} / ${model.wire.length}`;
  if (drawn.stderr !== model.stderr.length) {
    const pane = $("stderr");
    pane.textContent = model.stderr.slice(-50000);
    pane.scrollTop = pane.scrollHeight;
    drawn.stderr = model.stderr.length;
  }
}

// -- controls ------------------------------------------------------------------------------------

async function newSession() {
  const result = await request("session/new", { cwd: cwd() });
  selected = result.sessionId;
  drawn.chat = null;
  schedule();
  return result.sessionId;
}

$("new-session").addEventListener("click", () => newSession().catch(() => {}));
$("list-sessions").addEventListener("click", () => request("session/list", {}).catch(() => {}));
$("restart").addEventListener("click", () => op({ op: "restart" }).catch((e) => showError(e.message)));
$("apply-caps").addEventListener("click", () => {
  const caps = {};
  for (const box of document.querySelectorAll("[data-cap]")) {
    if (!box.checked) continue;
    const [group, name] = box.dataset.cap.split(".");
    caps[group] = { ...(caps[group] ?? {}), [name]: {} };
  }
  op({ op: "restart", capabilities: caps }).catch((e) => showError(e.message));
});
for (const box of document.querySelectorAll("[data-cap]")) box.addEventListener("change", () => {
  box.dataset.touched = "1";
});

$("session-actions").addEventListener("click", (e) => {
  const action = e.target?.dataset?.action;
  if (!action || !selected) return;
  const sessionId = selected;
  const calls = {
    resume: ["session/resume", { sessionId, cwd: cwd(), replayFrom: { type: "start" } }],
    fork: ["session/fork", { sessionId, cwd: cwd() }],
    close: ["session/close", { sessionId }],
    archive: ["session/archive", { sessionId }],
    delete: ["session/delete", { sessionId }],
  };
  const [method, params] = calls[action];
  request(method, params).then((result) => {
    if (action === "fork" && result?.sessionId) selected = result.sessionId;
    drawn.chat = null;
    schedule();
  }).catch(() => {});
});

$("prompt-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const text = $("prompt").value;
  if (!text.trim()) return;
  $("prompt").value = "";
  const sessionId = selected && !model.sessions.get(selected)?.closed ? selected : await newSession();
  const params = { sessionId, prompt: [{ type: "text", text }] };
  const traceId = model.telemetry ? hex(16) : null;  // the turn's trace: ours is its parent (W3C traceparent)
  if (traceId) params._meta = { traceparent: `00-${traceId}-${hex(8)}-01` };
  request("session/prompt", params).then((result) => {
    const view = model.sessions.get(sessionId);
    if (traceId && result?.messageId && view) view.chatItem("user", result.messageId).traceId = traceId;
    schedule();
  }).catch(() => {});
});

function hex(bytes) {
  return Array.from(crypto.getRandomValues(new Uint8Array(bytes)), (b) => b.toString(16).padStart(2, "0")).join("");
}
$("prompt").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) {
    e.preventDefault();
    $("prompt-form").requestSubmit();
  }
});
$("cancel").addEventListener("click", () => {
  if (selected) op({ op: "notify", method: "session/cancel", params: { sessionId: selected } });
});
$("chat").addEventListener("click", (e) => {
  if (e.target?.dataset?.testid === "show-all") {
    showAll = true;
    schedule();
  }
});

function composed() {
  try {
    return [$("composer-method").value.trim(), JSON.parse($("composer-params").value || "{}")];
  } catch (error) {
    showError(`params: ${error.message}`);
    return null;
  }
}
$("composer-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const message = composed();
  if (message) request(...message).catch(() => {});
});
$("composer-notify").addEventListener("click", () => {
  const message = composed();
  if (message) op({ op: "notify", method: message[0], params: message[1] }).catch((e) => showError(e.message));
});

$("filter-dir").addEventListener("change", (e) => wirelog.setFilter({ dir: e.target.value }));
$("filter-text").addEventListener("input", (e) => wirelog.setFilter({ text: e.target.value }));
$("filter-problems").addEventListener("change", (e) => wirelog.setFilter({ problems: e.target.checked }));
$("filter-updates").addEventListener("change", (e) => wirelog.setFilter({ updates: e.target.checked }));

window.acpInspector = { model, wirelog, idKey }; // for tests and the console
connect();
