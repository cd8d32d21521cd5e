// Rendering the model: the sessions list, the chat, the background tree and the questions.
// Each function builds plain DOM from the model; the page calls them when what they show changed.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value == null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child == null || child === "") continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

const CHAT_LIMIT = 300;

export function sessionsList(model, selected, select) {
  const views = [...model.sessions.values()].filter((v) => !v.parent);
  return views.map((v) => h("li", {
    class: `session ${v.id === selected ? "selected" : ""} ${v.closed ? "closed" : ""}`,
    "data-testid": "session-item", "data-session-id": v.id, onclick: () => select(v.id),
  }, h("span", { class: `dot ${v.state}` }), h("span", { class: "title" }, v.title ?? v.id),
  v.archived ? h("small", {}, " archived") : "", v.closed ? h("small", {}, " closed") : "",
  v.forkedFrom ? h("small", {}, " fork") : ""));
}

function diffView(item) {
  const kind = (line) => (/^(\+\+\+|---) /.test(line) ? "head" : line.startsWith("@@") ? "hunk"
    : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "");
  if (item.patch?.text) return h("pre", { class: "diff", "data-testid": "diff" },
    ...item.patch.text.split("\n").map((line) => h("span", { class: kind(line) }, `${line}\n`)));
  return h("div", { class: "diff" }, ...(item.changes ?? []).map((c) => h("div", {},
    `${c.operation} ${c.path ?? ""}${c.newPath ? ` → ${c.newPath}` : ""}`,
    c.oldText != null || c.newText != null ? h("pre", {},
      ...(c.oldText ?? "").split("\n").filter(Boolean).map((l) => h("span", { class: "del" }, `-${l}\n`)),
      ...(c.newText ?? "").split("\n").filter(Boolean).map((l) => h("span", { class: "add" }, `+${l}\n`))) : "")));
}

function terminalView(view, id) {
  const term = view.terminals.get(id);
  if (!term) return h("div", { class: "terminal" }, `terminal ${id}`);
  const exit = term.exitStatus ? ` exited ${term.exitStatus.exitCode ?? term.exitStatus.signal}` : "";
  return h("div", { class: "terminal", "data-testid": "terminal", "data-terminal-id": id },
    h("div", { class: "cmd" }, `$ ${term.command ?? ""}${exit}`),
    h("pre", { class: "out", "data-testid": "terminal-output" }, term.out.slice(-4000)));
}

function toolContent(view, content) {
  return (content ?? []).map((c) => {
    if (!c) return "";
    if (c.type === "diff") return diffView(c);
    if (c.type === "terminal") return terminalView(view, c.terminalId);
    if (c.type === "content") return h("div", { class: "tool-text" }, c.content?.text ?? `[${c.content?.type}]`);
    return h("div", {}, `[${c.type}]`);
  });
}

function planView(plan) {
  if (!plan) return "";
  if (plan.type === "items") return h("ol", { class: "plan", "data-testid": "plan" },
    ...(plan.entries ?? plan.items ?? []).map((e) => h("li", { class: e.status }, `${e.content ?? ""} (${e.status})`)));
  if (plan.type === "markdown") return h("pre", { class: "plan", "data-testid": "plan" }, plan.markdown ?? plan.text);
  return h("div", { class: "plan", "data-testid": "plan" }, `plan ${plan.type}: ${plan.path ?? plan.uri ?? ""}`);
}

export function chat(view, showAll) {
  if (!view) return [h("p", { class: "empty" }, "No session yet: press New session.")];
  const items = showAll ? view.items : view.items.slice(-CHAT_LIMIT);
  const nodes = items.map((item) => {
    if (item.kind === "message") return h("div", { class: "msg agent", "data-testid": "message" }, item.text);
    if (item.kind === "thought") return h("div", { class: "msg thought", "data-testid": "thought" }, item.text);
    if (item.kind === "user") return h("div", { class: "msg user", "data-testid": "user-message" }, item.text,
      item.traceId ? h("span", { class: "trace", "data-testid": "trace-id", title: "trace id" }, item.traceId) : "");
    if (item.kind === "plan") return planView(view.plans.get(item.id));
    if (item.kind === "tool") {
      const call = view.toolCalls.get(item.id) ?? {};
      return h("div", { class: `tool ${call.status ?? ""}`, "data-testid": "tool-call", "data-status": call.status ?? "" },
        h("div", { class: "tool-head" }, h("b", {}, call.title ?? call.name ?? item.id),
          call.title && call.name ? ` ${call.name}` : "", ` ${call.kind ?? ""} `,
          h("span", { class: "status" }, call.status ?? "")),
        ...toolContent(view, call.content));
    }
    return h("div", { class: `msg ${item.kind}` }, item.text);
  });
  if (items.length < view.items.length) nodes.unshift(h("button", { class: "link", "data-testid": "show-all" },
    `${view.items.length - items.length} earlier items`));
  return nodes;
}

function childState(model, view, id) {
  const child = model.sessions.get(id);
  return child?.state ?? view.children.get(id)?.state?.state ?? "unknown";
}

// The background list of one session, children as a tree; `stop(method, params)` sends a cancel.
export function background(model, view, stop, depth = 0) {
  if (!view) return [];
  if (view.background == null) return depth ? [] : [h("p", { class: "empty" }, "not reported")];
  if (!view.background.length && !depth) return [h("p", { class: "empty" }, "nothing in the background")];
  return view.background.map((item) => {
    let what;
    let cancel = null;
    let nested = [];
    if (item.type === "terminal") {
      const term = view.terminals.get(item.terminalId) ?? {};
      what = [h("b", {}, "terminal "), term.command ?? item.terminalId,
        term.exitStatus ? ` (exited ${term.exitStatus.exitCode ?? term.exitStatus.signal})` : " (running)",
        h("pre", { class: "out" }, (term.out ?? "").slice(-600))];
      if (term.capabilities?.cancel) cancel = ["terminal/cancel", { sessionId: view.id, terminalId: item.terminalId }];
    } else if (item.type === "tool_call") {
      const call = view.toolCalls.get(item.toolCallId) ?? {};
      what = [h("b", {}, "tool call "), call.title ?? call.name ?? item.toolCallId, " ",
        h("span", { class: `status ${call.status}`, "data-testid": "item-status" }, call.status ?? "")];
      if (call.capabilities?.cancel) cancel = ["tool_call/cancel", { sessionId: view.id, toolCallId: item.toolCallId }];
    } else if (item.type === "subagent") {
      const child = view.children.get(item.sessionId) ?? {};
      const state = childState(model, view, item.sessionId);
      what = [h("b", {}, "subagent "), item.sessionId, " ", h("span", { class: `status ${state}`,
        "data-testid": "item-status" }, state)];
      const childView = model.sessions.get(item.sessionId);
      if (child.capabilities?.cancel) cancel = ["session/cancel", { sessionId: item.sessionId }];
      if (childView) nested = background(model, childView, stop, depth + 1);
      const last = childView?.items.filter((i) => i.kind === "message").at(-1);
      if (last) what.push(h("div", { class: "child-msg" }, last.text.slice(-300)));
    } else {
      what = [h("b", {}, item.type)];
    }
    return h("li", { class: `bg ${item.type}`, "data-testid": "background-item", "data-type": item.type },
      ...what,
      cancel ? h("button", { class: "stop", "data-testid": "stop", onclick: () => stop(...cancel) }, "Stop") : "",
      nested.length ? h("ul", { class: "tree" }, ...nested) : "");
  });
}

// What the permission is for, in words: the tool call's title (`toolCall` is the client's stored tool call,
// already patched with the subject), or the command and its directory; the raw JSON for any other subject.
function permissionSubject(subject, toolCall) {
  if (!subject) return "";
  if (subject.type === "tool_call") {
    const call = { ...(toolCall ?? {}), ...(subject.toolCall ?? {}) };
    const about = [call.kind, call.status].filter(Boolean).join(", ");
    return h("p", { class: "subject", "data-testid": "permission-subject" }, h("b", {}, "Tool call: "),
      call.title ?? call.toolCallId ?? "?", about ? ` (${about})` : "");
  }
  if (subject.type === "command") {
    return h("p", { class: "subject", "data-testid": "permission-subject" }, h("b", {}, "Command: "),
      h("code", {}, subject.command ?? ""), subject.cwd ? ` in ${subject.cwd}` : "");
  }
  return h("pre", { class: "subject", "data-testid": "permission-subject" }, JSON.stringify(subject, null, 1));
}

export function permissionDialog(msg, answer, toolCall = null) {
  const p = msg.params ?? {};
  return h("div", { class: "dialog", "data-testid": "permission-dialog" },
    h("h3", {}, p.title ?? "Permission"),
    p.description ? h("p", { class: "description" }, p.description) : "",
    permissionSubject(p.subject, toolCall),
    h("div", { class: "buttons" }, ...(p.options ?? []).map((o) => h("button", {
      "data-testid": "permission-option", "data-kind": o.kind, "data-option-id": o.optionId,
      class: o.kind?.startsWith("allow") ? "allow" : "reject",
      onclick: () => answer({ outcome: { outcome: "selected", optionId: o.optionId } }),
    }, o.name)), h("button", { "data-testid": "permission-cancel",
      onclick: () => answer({ outcome: { outcome: "cancelled" } }) }, "Dismiss")));
}

export function urlDialog(msg, answer) {
  const p = msg.params ?? {};
  return h("div", { class: "dialog", "data-testid": "url-elicitation" },
    h("h3", {}, p.message ?? "Open this page"),
    h("a", { href: p.url, target: "_blank", rel: "noopener noreferrer", "data-testid": "elicitation-url" }, p.url),
    h("div", { class: "buttons" },
      h("button", { "data-testid": "elicitation-done", onclick: () => answer({ action: "accept" }) }, "Done"),
      h("button", { onclick: () => answer({ action: "decline" }) }, "Decline")));
}
