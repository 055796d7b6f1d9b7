// Tiny DOM helpers: no framework, just element creation and a few conveniences.

/**
 * Create an element: h("button", {class: "x", onclick: fn, "aria-label": "..."}, "text", child).
 * Attributes that are null/undefined/false are left out; `true` sets an empty attribute.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value == null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key === "style") for (const [p, v] of Object.entries(value)) el.style.setProperty(p, v);
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child == null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export const $ = (selector, root = document) => root.querySelector(selector);

/** Replace the children of `el`, keeping keyboard focus on the element with the same data-focus key. */
export function replaceChildren(el, ...children) {
  const active = document.activeElement;
  const key = active && el.contains(active) ? active.dataset.focus : undefined;
  el.replaceChildren(...children.flat(Infinity).filter((c) => c != null && c !== false));
  if (key) {
    const again = el.querySelector(`[data-focus="${CSS.escape(key)}"]`);
    if (again && !again.disabled) again.focus({ preventScroll: true });
  }
}

export function show(el, visible = true) {
  el.hidden = !visible;
}

/** "1:05" for 65 000 ms; "0:09" under a minute. */
export function formatClock(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}
