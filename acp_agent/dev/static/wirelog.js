// The wire log: every message both ways, virtualized (only the rows in view exist in the page),
// with filters, request <-> answer pairing, problems on the message that caused them, and the raw JSON.

import { h } from "./view.js";

const ROW = 22;
const EXTRA = 8;

function kindOf(msg) {
  if (!msg || typeof msg !== "object" || Array.isArray(msg)) return "invalid";
  if ("method" in msg) return "id" in msg ? "request" : "notification";
  if ("error" in msg) return "error";
  return "result";
}

function summary(event) {
  const msg = event.msg;
  if (event.unparsed) return String(msg["<unparsed>"]).slice(0, 160);
  if (!msg || typeof msg !== "object") return JSON.stringify(msg).slice(0, 160);
  if (msg.method === "session/update") {
    const u = msg.params?.update ?? {};
    const state = typeof u.state === "object" && u.state ? u.state.state : u.state;
    const extra = [u.sessionUpdate === "subagent_update" ? u.sessionId : null, state, u.status,
      u.toolCallId ?? u.terminalId ?? u.messageId].filter((x) => x != null).join(" ");
    return `${u.sessionUpdate ?? "?"} ${extra}`;
  }
  if ("error" in msg) return `${msg.error?.code} ${msg.error?.message ?? ""}`.slice(0, 160);
  return "";
}

export class WireLog {
  constructor(model, container, detail, onChange) {
    this.model = model;
    this.box = container;
    this.detail = detail;
    this.onChange = onChange;
    this.filter = { dir: "all", text: "", problems: false, updates: true };
    this.rows = [];
    this.follow = true;
    this.selected = null;
    this.spacer = h("div", { class: "spacer" });
    this.viewport = h("div", { class: "rows" });
    this.box.replaceChildren(this.spacer, this.viewport);
    this.indexed = 0;
    this.box.addEventListener("scroll", () => {
      this.follow = this.box.scrollTop + this.box.clientHeight >= this.box.scrollHeight - ROW * 2;
      this.paint();
    });
  }

  matches(event) {
    const f = this.filter;
    if (f.dir !== "all" && event.dir !== f.dir) return false;
    if (f.problems && !event.problems.length && !event.unparsed) return false;
    if (!f.updates && event.msg?.method === "session/update") return false;
    if (f.text) {
      const method = event.msg?.method ?? event.answers ?? "";
      if (!method.includes(f.text) && !JSON.stringify(event.msg).includes(f.text)) return false;
    }
    return true;
  }

  setFilter(change) {
    Object.assign(this.filter, change);
    this.rows = [];
    this.indexed = 0;
    this.update();
  }

  update() {
    const wire = this.model.wire;
    if (this.indexed > wire.length) {
      this.rows = [];
      this.indexed = 0;
    }
    for (; this.indexed < wire.length; this.indexed++) {
      if (this.matches(wire[this.indexed])) this.rows.push(wire[this.indexed]);
    }
    if (this.filter.problems) this.rows = this.model.wire.filter((e) => this.matches(e)); // problems arrive late
    this.spacer.style.height = `${this.rows.length * ROW}px`;
    if (this.follow) this.box.scrollTop = this.box.scrollHeight;
    this.paint();
  }

  paint() {
    const first = Math.max(0, Math.floor(this.box.scrollTop / ROW) - EXTRA);
    const last = Math.min(this.rows.length, Math.ceil((this.box.scrollTop + this.box.clientHeight) / ROW) + EXTRA);
    const t0 = this.model.wire[0]?.t ?? 0;
    const nodes = [];
    for (let i = first; i < last; i++) {
      const e = this.rows[i];
      const msg = e.msg ?? {};
      const kind = e.unparsed ? "not JSON" : kindOf(msg);
      const method = msg.method ?? (e.answers ? `↳ ${e.answers}` : "");
      const id = msg && typeof msg === "object" && "id" in msg ? `#${JSON.stringify(msg.id)}` : "";
      const problems = e.problems.map((p) => h("span", {
        class: `violation ${p.level === "SHOULD" ? "should" : "must"}`, "data-testid": "violation",
        "data-rule": p.rule, title: `${p.rule} [${p.level}] ${p.statement ?? ""}: ${p.text}`,
      }, p.rule));
      const row = h("div", {
        class: `wire-row ${e.dir} ${e.unparsed ? "unparsed" : ""} ${e.problems.length ? "bad" : ""} ${
          this.selected === e.seq ? "selected" : ""}`,
        "data-testid": "wire-entry", "data-seq": e.seq, "data-method": msg.method ?? e.answers ?? "",
        "data-dir": e.dir,
      },
      h("span", { class: "t" }, (e.t - t0).toFixed(3)),
      h("span", { class: "dir" }, e.dir === "out" ? "→" : "←"),
      h("span", { class: `kind ${kind.replace(" ", "-")}` }, kind),
      h("span", { class: "method" }, method),
      h("span", { class: "id" }, id),
      e.latency != null ? h("span", { class: "latency", "data-testid": "latency" },
        `+${Math.round(e.latency * 1000)} ms`) : "",
      h("span", { class: "sum" }, summary(e)),
      ...problems);
      row.style.top = `${i * ROW}px`; // CSSOM, not a style attribute: the page's CSP allows no inline styles
      row.addEventListener("click", () => this.select(e.seq));
      nodes.push(row);
    }
    this.viewport.replaceChildren(...nodes);
  }

  select(seq) {
    this.selected = seq;
    const e = this.model.bySeq.get(seq);
    if (!e) return;
    const pair = e.pair != null ? h("button", { class: "link", "data-testid": "wire-pair",
      onclick: () => this.reveal(e.pair) }, `${e.dir === "out" ? "answer" : "request"}: #${e.pair}`) : "";
    this.detail.replaceChildren(
      h("div", { class: "detail-head" }, `message ${seq} ${e.dir === "out" ? "client → agent" : "agent → client"} `,
        pair),
      ...e.problems.map((p) => h("div", { class: `problem ${p.level === "SHOULD" ? "should" : "must"}`,
        "data-testid": "problem" }, h("b", {}, `${p.rule} [${p.level}] `), p.statement ? `${p.statement}: ` : "",
      p.text)),
      e.unparsed ? h("div", { class: "problem must" }, "the agent wrote a line that is not JSON on stdout") : "",
      h("pre", { class: "raw", "data-testid": "wire-raw" }, JSON.stringify(e.msg, null, 2)));
    this.paint();
    this.onChange?.();
  }

  reveal(seq) {
    let index = this.rows.findIndex((e) => e.seq === seq);
    if (index < 0) {
      this.setFilter({ dir: "all", text: "", problems: false, updates: true });
      index = this.rows.findIndex((e) => e.seq === seq);
    }
    this.follow = false;
    this.box.scrollTop = Math.max(0, index * ROW - this.box.clientHeight / 2);
    this.select(seq);
  }
}
