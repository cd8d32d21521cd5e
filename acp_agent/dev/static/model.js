// The page's picture of the agent, rebuilt from the inspector's events (wire messages, stderr, status).
// Everything the page shows is derived here, so a live run and a replayed recording look the same.

const decoder = () => new TextDecoder("utf-8");

export function idKey(id) {
  return JSON.stringify(id);
}

export function textOf(block) {
  if (!block || typeof block !== "object") return "";
  if (block.type === "text") return block.text ?? "";
  if (block.type === "resource_link") return `[${block.name ?? block.uri}]`;
  if (block.type === "image") return "[image]";
  return `[${block.type}]`;
}

function patch(target, update, skip = []) {
  for (const [key, value] of Object.entries(update)) {
    if (skip.includes(key)) continue;
    if (key === "_meta" && value && typeof value === "object" && target._meta && typeof target._meta === "object") {
      const merged = { ...target._meta };
      for (const [k, v] of Object.entries(value)) {
        if (v === null) delete merged[k];
        else merged[k] = v;
      }
      target._meta = merged;
    } else {
      target[key] = value;
    }
  }
  return target;
}

function base64Bytes(data) {
  try {
    const binary = atob(data ?? "");
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return bytes;
  } catch {
    return new Uint8Array();
  }
}

export class SessionView {
  constructor(id) {
    this.id = id;
    this.title = null;
    this.items = []; // chat items in order: {kind, id, text} | {kind: "tool", id} | {kind: "plan", id}
    this.byKey = new Map();
    this.toolCalls = new Map();
    this.terminals = new Map();
    this.children = new Map(); // child session id -> patched subagent_update
    this.plans = new Map();
    this.state = "unknown";
    this.stopReason = null;
    this.usage = null;
    this.context = null;
    this.background = null;
    this.commands = null;
    this.parent = null;
    this.closed = false;
    this.archived = false;
    this.version = 0;
  }

  chatItem(kind, id) {
    const key = `${kind}:${id}`;
    let item = this.byKey.get(key);
    if (!item) {
      item = { kind, id, text: "" };
      this.byKey.set(key, item);
      this.items.push(item);
    }
    return item;
  }

  terminal(id) {
    let term = this.terminals.get(id);
    if (!term) {
      term = { terminalId: id, out: "", decoder: decoder() };
      this.terminals.set(id, term);
    }
    return term;
  }

  apply(u, model) {
    this.version++;
    const kind = u.sessionUpdate;
    const message = { agent_message: "message", agent_thought: "thought", user_message: "user",
      session_message: "note" };
    const base = kind?.replace(/_chunk$/, "");
    if (message[base] && kind.endsWith("_chunk")) {
      this.chatItem(message[base], u.messageId).text += textOf(u.content);
    } else if (message[base]) {
      const item = this.chatItem(message[base], u.messageId);
      if ("content" in u) item.text = (u.content ?? []).map(textOf).join("");
    } else if (kind === "state_update") {
      this.state = u.state;
      if ("background" in u) this.background = Array.isArray(u.background) ? u.background : null;
      if (u.state === "idle" && u.stopReason != null) this.stopReason = u.stopReason;
      if (u.state !== "idle") this.stopReason = null;
      if (u.usage) this.usage = u.usage;
    } else if (kind === "tool_call_update") {
      let call = this.toolCalls.get(u.toolCallId);
      if (!call) {
        call = { toolCallId: u.toolCallId };
        this.toolCalls.set(u.toolCallId, call);
        this.chatItem("tool", u.toolCallId);
      }
      patch(call, u, ["sessionUpdate"]);
    } else if (kind === "tool_call_content_chunk") {
      const call = this.toolCalls.get(u.toolCallId) ?? { toolCallId: u.toolCallId };
      this.toolCalls.set(u.toolCallId, call);
      this.chatItem("tool", u.toolCallId);
      call.content = [...(call.content ?? []), u.content];
    } else if (kind === "terminal_update") {
      const term = this.terminal(u.terminalId);
      patch(term, u, ["sessionUpdate", "output"]);
      if ("output" in u) {
        term.decoder = decoder();
        term.out = u.output ? term.decoder.decode(base64Bytes(u.output.data), { stream: true }) : "";
      }
    } else if (kind === "terminal_output_chunk") {
      const term = this.terminal(u.terminalId);
      term.out += term.decoder.decode(base64Bytes(u.data), { stream: true });
      if (term.out.length > 200000) term.out = term.out.slice(-150000);
    } else if (kind === "subagent_update") {
      const child = this.children.get(u.sessionId) ?? { sessionId: u.sessionId };
      this.children.set(u.sessionId, patch(child, u, ["sessionUpdate"]));
      const view = model.session(u.sessionId);
      view.parent = this.id;
      if (u.state && typeof u.state === "object") view.apply({ sessionUpdate: "state_update", ...u.state }, model);
    } else if (kind === "plan_update") {
      const id = u.plan?.planId ?? "plan";
      this.plans.set(id, u.plan);
      this.chatItem("plan", id);
    } else if (kind === "plan_removed") {
      this.plans.delete(u.planId ?? "plan");
    } else if (kind === "usage_update") {
      this.context = { used: u.used, size: u.size, cost: u.cost ?? null };
    } else if (kind === "session_info_update") {
      if ("title" in u) this.title = u.title;
    } else if (kind === "available_commands_update") {
      this.commands = u.availableCommands ?? null;
    } else if (kind === "notice") {
      const item = this.chatItem("notice", `notice-${this.items.length}`);
      item.text = `${u.severity}: ${u.title ?? ""} ${u.message ?? ""}`.trim();
    }
  }
}

export class Model {
  constructor() {
    this.wire = []; // wire events in order (each with .seq, .dir, .msg, .problems)
    this.bySeq = new Map();
    this.stderr = "";
    this.status = null;
    this.replay = false;
    this.version = 0;
    this.resetRun(0);
  }

  resetRun(run) {
    this.run = run;
    this.sessions = new Map();
    this.sent = new Map(); // id key of the client's requests -> wire event
    this.received = new Map(); // id key of the agent's requests -> wire event
    this.questions = new Map(); // id key -> {kind, msg, seq}
    this.init = null;
    this.authenticated = null;
  }

  session(id) {
    let view = this.sessions.get(id);
    if (!view) {
      view = new SessionView(id);
      this.sessions.set(id, view);
    }
    return view;
  }

  apply(event) {
    this.version++;
    if (event.type === "status") {
      if (event.run !== this.run) this.resetRun(event.run);
      this.status = event;
    } else if (event.type === "stderr") {
      this.stderr += event.text;
      if (this.stderr.length > 300000) this.stderr = this.stderr.slice(-200000);
    } else if (event.type === "problem") {
      const owner = this.bySeq.get(event.at);
      const same = (p) => p.rule === event.problem.rule && p.text === event.problem.text;
      if (owner && !owner.problems.some(same)) owner.problems.push(event.problem);
    } else if (event.type === "wire") {
      if (event.run !== this.run) this.resetRun(event.run);
      this.wire.push(event);
      this.bySeq.set(event.seq, event);
      this.wireMessage(event);
    }
  }

  wireMessage(event) {
    const msg = event.msg;
    if (!msg || typeof msg !== "object" || Array.isArray(msg) || event.unparsed) return;
    const out = event.dir === "out";
    if ("method" in msg) {
      if ("id" in msg) (out ? this.sent : this.received).set(idKey(msg.id), event);
      if (!out) this.agentMessage(msg, event);
      else if (msg.method === "session/resume" && msg.params?.replayFrom) {
        const view = this.session(msg.params.sessionId);
        view.items = [];
        view.byKey.clear();
      }
      return;
    }
    // An answer: pair it with its request.
    const request = (out ? this.received : this.sent).get(idKey(msg.id));
    if (!request) return;
    request.pair = event.seq;
    event.pair = request.seq;
    event.latency = event.t - request.t;
    event.answers = request.msg.method;
    if (out) this.questions.delete(idKey(msg.id));
    else this.answered(request.msg, msg);
  }

  agentMessage(msg, event) {
    const params = msg.params ?? {};
    if (msg.method === "session/update" && params.sessionId) {
      this.session(params.sessionId).apply(params.update ?? {}, this);
    } else if (msg.method === "session/request_permission" || msg.method === "elicitation/create") {
      if ("id" in msg) {
        this.questions.set(idKey(msg.id), {
          kind: msg.method === "elicitation/create" ? "elicitation" : "permission", msg, seq: event.seq });
      }
    } else if (msg.method === "$/cancel_request") {
      this.questions.delete(idKey(params.requestId));
    } else if (msg.method === "elicitation/complete") {
      for (const [key, q] of this.questions) {
        if (q.msg.params?.elicitationId === params.elicitationId) this.questions.delete(key);
      }
    }
  }

  answered(request, answer) {
    const result = answer.result;
    const params = request.params ?? {};
    if (!result) return;
    switch (request.method) {
      case "initialize":
        this.init = result;
        break;
      case "session/new":
      case "session/fork": {
        const view = this.session(result.sessionId);
        if (request.method === "session/fork") view.forkedFrom = params.sessionId;
        view.closed = false;
        break;
      }
      case "session/resume":
      case "session/load":
        this.session(params.sessionId).closed = false;
        break;
      case "session/list":
        for (const info of result.sessions ?? []) {
          const view = this.session(info.sessionId);
          if (info.title != null) view.title = info.title;
          view.listed = true;
          view.archived = Boolean(info.archived);
        }
        break;
      case "session/close":
        this.session(params.sessionId).closed = true;
        break;
      case "session/delete":
        this.sessions.delete(params.sessionId);
        break;
      case "session/archive":
        this.session(params.sessionId).archived = true;
        break;
      case "auth/login":
        this.authenticated = params.methodId ?? true;
        break;
      case "auth/logout":
        this.authenticated = null;
        break;
    }
  }
}
