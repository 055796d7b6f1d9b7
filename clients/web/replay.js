// A finished game, move by move: the page at /games/{id}. It reads the record from
// GET /api/games/{id}/replay?seat=0|1|all, whose steps carry exactly the `view` a live state
// frame for that seat carried ("all": everything shown), and draws each with the same board
// renderers as a live game (games/*.js). It never sees more than the server sends for the
// chosen seat.

import { $, h, replaceChildren, show } from "./dom.js";
import { rendererFor } from "./games/index.js";

const TERMINATION_WORDS = {
  completed: "",
  turn_cap: "the move cap was reached",
  resignation: "by resignation",
  abandoned: "a player left",
  timeout: "on time",
};

const page = {
  id: decodeURIComponent(location.pathname.replace(/^\/games\//, "").replace(/\/$/, "")),
  seat: seatFrom(new URLSearchParams(location.search).get("seat")),
  record: null, // the replay answer for `seat`
  step: 0,
  texts: [], // per step: what happened, in words
};

function seatFrom(value) {
  return value === "0" || value === "1" ? value : "all";
}

async function load() {
  const url = `/api/games/${encodeURIComponent(page.id)}/replay?seat=${page.seat}`;
  let response;
  try {
    response = await fetch(url, { headers: { Accept: "application/json" } });
  } catch {
    return fail("The server could not be reached. Reload the page to try again.");
  }
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    const said = data && (data.message ?? data.error?.message ?? (typeof data.error === "string" ? data.error : null));
    if (response.status === 404) {
      return fail(`There is no finished game "${page.id}" on this server (it may still be in progress, or its record is gone).${said ? ` (${said})` : ""}`);
    }
    if (response.status === 400) return fail(`"${page.id}" is not a game this server can show: ${said ?? "bad request"}.`);
    return fail(`The server could not send this game (${response.status}${said ? `: ${said}` : ""}).`);
  }
  if (!data || !Array.isArray(data.steps) || data.steps.length === 0) return fail("The server sent this game in a form this page does not understand.");
  const keep = page.record ? page.step : 0;
  page.record = data;
  page.texts = data.steps.map((step) => describeStep(step));
  page.step = Math.min(keep, data.steps.length - 1);
  show($("#replay-error"), false);
  show($("#replay-body"));
  render();
}

function fail(text) {
  $("#replay-error").textContent = text;
  show($("#replay-error"));
  show($("#replay-body"), Boolean(page.record));
  $("#replay-meta").textContent = "";
}

function names() {
  const out = ["Seat 0", "Seat 1"];
  for (const p of page.record?.players ?? []) {
    // the server names a built-in bot "LEVEL (bot)" already (and the lobby shows it so)
    if (p.name) out[p.seat] = p.bot && !p.name.endsWith("(bot)") ? `${p.name} (bot)` : p.name;
  }
  return out;
}

function contextFor(view) {
  const n = names();
  return {
    view,
    legal: null,
    seat: page.seat === "all" ? null : Number(page.seat),
    names: n,
    who: (s) => n[s],
    replay: true,
    busy: true,
    ui: {},
    move: () => {},
    hint: () => true,
    rerender: () => render(),
  };
}

/** What the step's move did, from its events with names; the record's own text otherwise. */
function describeStep(step) {
  const renderer = rendererFor(step.view.game);
  const ctx = contextFor(step.view);
  const parts = (step.view.events ?? [])
    .filter((e) => e.kind !== "game_ended")
    .map((e) => renderer.describe?.(e, ctx))
    .filter(Boolean);
  const text = parts.length ? parts.join("; ") : step.text ?? "";
  if (ctx.names.some((name) => text.startsWith(name))) return text; // as its player wrote it
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function outcomeLine(outcome) {
  if (!outcome) return null;
  const n = names();
  const how = TERMINATION_WORDS[outcome.termination] ?? outcome.termination ?? "";
  const head = outcome.winner == null ? "Draw" : `${n[outcome.winner]} won`;
  const score = Array.isArray(outcome.scores) ? `${n[0]} ${outcome.scores[0]} – ${outcome.scores[1]} ${n[1]}` : "";
  return { head, detail: [score, how && `(${how})`].filter(Boolean).join(" ") };
}

function render() {
  const record = page.record;
  if (!record) return;
  const steps = record.steps;
  const step = steps[page.step];
  const view = step.view;
  const renderer = rendererFor(view.game);
  const n = names();
  const variant = record.options?.variant;
  const title = `${renderer.title ?? record.game}${variant && variant !== "basic" ? ` (${variant})` : ""}`;
  document.title = `${n[0]} vs ${n[1]} · ${title}`;
  $("#replay-title").textContent = `${n[0]} vs ${n[1]}`;
  const result = outcomeLine(record.result ?? steps[steps.length - 1].view.outcome);
  $("#replay-meta").textContent = [title, `${steps.length - 1} moves`, result && `${result.head} ${result.detail}`].filter(Boolean).join(" · ");
  $("#seat-0-name").textContent = n[0];
  $("#seat-1-name").textContent = n[1];
  for (const radio of document.querySelectorAll('input[name="seat"]')) radio.checked = radio.value === page.seat;
  const rules = $("#rules-link");
  rules.href = `/rules-${view.game === "stakko" ? "stakko" : "stacko"}.html${variant && variant !== "basic" ? `#${variant}` : ""}`;
  rules.textContent = `Rules of ${title}`;

  const slider = $("#step-slider");
  slider.max = String(steps.length - 1);
  slider.value = String(page.step);
  $("#step-no").textContent = page.step === 0 ? `Start (of ${steps.length - 1} moves)` : `Move ${page.step} of ${steps.length - 1}`;
  $("#first-btn").disabled = $("#prev-btn").disabled = page.step === 0;
  $("#last-btn").disabled = $("#next-btn").disabled = page.step === steps.length - 1;
  $("#step-text").textContent = page.step === 0 ? "The start of the game." : page.texts[page.step];

  const ctx = contextFor(view);
  const board = $("#board");
  replaceChildren(board, renderer.render(board, ctx));
  const prompt = renderer.prompt({ ...ctx, seat: null });
  $("#turn").replaceChildren(prompt.text, prompt.round ? h("span", { class: "round" }, prompt.round) : "");
  replaceChildren($("#scores"), renderer.scores(ctx));
  const over = outcomeLine(view.outcome);
  show($("#outcome"), Boolean(over));
  if (over) $("#outcome").replaceChildren(h("strong", {}, over.head), " ", over.detail);

  const list = $("#move-list");
  replaceChildren(
    list,
    page.texts.slice(1).map((text, i) =>
      h(
        "li",
        { class: i + 1 === page.step ? "current" : "", dataset: { step: String(i + 1) } },
        h("button", { type: "button", class: "linkish", onclick: () => go(i + 1), "aria-current": i + 1 === page.step ? "step" : null }, text),
      ),
    ),
  );
  list.querySelector("li.current")?.scrollIntoView({ block: "nearest" });
}

function go(step) {
  if (!page.record) return;
  page.step = Math.max(0, Math.min(page.record.steps.length - 1, step));
  render();
}

function wire() {
  $("#first-btn").addEventListener("click", () => go(0));
  $("#prev-btn").addEventListener("click", () => go(page.step - 1));
  $("#next-btn").addEventListener("click", () => go(page.step + 1));
  $("#last-btn").addEventListener("click", () => go(Infinity));
  $("#step-slider").addEventListener("input", (e) => go(Number(e.currentTarget.value)));
  for (const radio of document.querySelectorAll('input[name="seat"]')) {
    radio.addEventListener("change", () => {
      page.seat = seatFrom(radio.value);
      const url = new URL(location.href);
      if (page.seat === "all") url.searchParams.delete("seat");
      else url.searchParams.set("seat", page.seat);
      history.replaceState(null, "", url);
      load();
    });
  }
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || !page.record) return;
    if (e.target.closest?.("input[type=range], input[type=text], select, textarea")) return;
    const to = { ArrowLeft: page.step - 1, ArrowRight: page.step + 1, Home: 0, End: Infinity }[e.key];
    if (to === undefined) return;
    e.preventDefault();
    go(to);
  });
}

wire();
load();
window.stackoReplay = page; // for the browser tests and the curious
