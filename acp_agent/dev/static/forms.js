// Form elicitations: a form built from the requested JSON schema (string, number, integer, boolean,
// enum, multi-select), checked before the answer is sent.

import { h } from "./view.js";

function options(prop) {
  if (Array.isArray(prop.enum)) return prop.enum.map((v, i) => ({ value: v, label: prop.enumNames?.[i] ?? v }));
  const list = prop.oneOf ?? prop.anyOf;
  if (Array.isArray(list)) return list.map((o) => ({ value: o.const, label: o.title ?? o.const }));
  return null;
}

function field(name, prop, required) {
  const label = `${prop.title ?? name}${required ? " *" : ""}`;
  const choices = options(prop);
  let input;
  if (prop.type === "boolean") {
    input = h("input", { type: "checkbox", name, "data-testid": `field-${name}` });
    if (prop.default === true) input.checked = true;
  } else if (prop.type === "array") {
    const items = options(prop.items ?? {}) ?? [];
    input = h("select", { name, multiple: "", "data-testid": `field-${name}` },
      ...items.map((o) => h("option", { value: String(o.value) }, String(o.label))));
  } else if (choices) {
    input = h("select", { name, "data-testid": `field-${name}` }, h("option", { value: "" }, "—"),
      ...choices.map((o) => h("option", { value: String(o.value) }, String(o.label))));
    if (prop.default != null) input.value = String(prop.default);
  } else {
    const type = prop.type === "number" || prop.type === "integer" ? "number"
      : ({ email: "email", uri: "url", date: "date", "date-time": "datetime-local" })[prop.format] ?? "text";
    input = h("input", { type, name, "data-testid": `field-${name}`,
      step: prop.type === "integer" ? "1" : "any" });
    if (prop.default != null) input.value = String(prop.default);
  }
  return h("label", { class: "field" }, h("span", {}, label), input,
    prop.description ? h("small", {}, prop.description) : "",
    h("em", { class: "field-error", "data-testid": "field-error", "data-field": name }));
}

// The content to send, or {errors: {name: text}} when the form does not satisfy the schema.
export function collect(form, schema) {
  const content = {};
  const errors = {};
  const required = new Set(schema.required ?? []);
  for (const [name, prop] of Object.entries(schema.properties ?? {})) {
    const input = form.elements.namedItem(name);
    if (!input) continue;
    if (prop.type === "boolean") {
      content[name] = input.checked;
      continue;
    }
    if (prop.type === "array") {
      const chosen = [...input.selectedOptions].map((o) => o.value);
      if (required.has(name) && !chosen.length) errors[name] = "choose at least one";
      else if (prop.minItems != null && chosen.length < prop.minItems) errors[name] = `at least ${prop.minItems}`;
      else if (prop.maxItems != null && chosen.length > prop.maxItems) errors[name] = `at most ${prop.maxItems}`;
      else if (chosen.length) content[name] = chosen;
      continue;
    }
    const raw = input.value;
    if (raw === "") {
      if (required.has(name)) errors[name] = "required";
      continue;
    }
    if (prop.type === "number" || prop.type === "integer") {
      const value = Number(raw);
      if (!Number.isFinite(value)) errors[name] = "not a number";
      else if (prop.type === "integer" && !Number.isInteger(value)) errors[name] = "not a whole number";
      else if (prop.minimum != null && value < prop.minimum) errors[name] = `at least ${prop.minimum}`;
      else if (prop.maximum != null && value > prop.maximum) errors[name] = `at most ${prop.maximum}`;
      else content[name] = value;
      continue;
    }
    const choices = options(prop);
    if (choices && !choices.some((o) => String(o.value) === raw)) errors[name] = "not one of the choices";
    else if (prop.minLength != null && raw.length < prop.minLength) errors[name] = `at least ${prop.minLength} characters`;
    else if (prop.maxLength != null && raw.length > prop.maxLength) errors[name] = `at most ${prop.maxLength} characters`;
    else if (prop.pattern && !new RegExp(prop.pattern, "u").test(raw)) errors[name] = `must match ${prop.pattern}`;
    else if (prop.format === "email" && !/^[^@\s]+@[^@\s]+$/.test(raw)) errors[name] = "not an email address";
    else content[name] = raw;
  }
  return Object.keys(errors).length ? { errors } : { content };
}

export function elicitationForm(params, answer) {
  const schema = params.requestedSchema ?? { properties: {} };
  const required = new Set(schema.required ?? []);
  const form = h("form", { class: "elicitation", "data-testid": "elicitation-form", novalidate: "" },
    ...Object.entries(schema.properties ?? {}).map(([name, prop]) => field(name, prop, required.has(name))));
  const send = (action) => {
    if (action !== "accept") return answer({ action });
    const found = collect(form, schema);
    for (const el of form.querySelectorAll(".field-error")) el.textContent = found.errors?.[el.dataset.field] ?? "";
    if (!found.errors) answer({ action: "accept", content: found.content });
  };
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    send("accept");
  });
  form.append(h("div", { class: "buttons" },
    h("button", { type: "submit", "data-testid": "elicitation-accept" }, "Accept"),
    h("button", { type: "button", "data-testid": "elicitation-decline", onclick: () => send("decline") }, "Decline"),
    h("button", { type: "button", "data-testid": "elicitation-cancel", onclick: () => send("cancel") }, "Cancel")));
  return form;
}
