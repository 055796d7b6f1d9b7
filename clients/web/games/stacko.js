// Stacko: two towers of numbered bricks, the open brick, the draw stack and the discard pile.
//
// A renderer is an object { title, render(root, ctx), key(key, ctx), prompt(ctx), scores(ctx),
// describe(event, ctx), help(), roundEnd(result, ctx) } (the last three optional).
// ctx (built by app.js for every frame, and by replay.js for every step of a finished game):
//   view     the state frame's view (view.game === "stacko"; see protocol/games/stacko.py)
//   legal    the receiver's legal moves, or null when it is not its turn
//   seat     the receiver's seat, null for a spectator
//   names    ["name of seat 0", "name of seat 1"]
//   who(s)   how texts name seat s: "You" for the receiver, else the name
//   replay   true on a finished game's page: names everywhere, never "You", nothing to click
//   busy     a move of ours is on its way: nothing is clickable
//   ui       this room's renderer scratch state (kept across frames, reset by a new game)
//   move(m)  send a move ({action, slot?}); the app adds room and ply
//   hint(t)  show a short hint (a key that does nothing right now)
//   rerender() draw again (after a change of ui state)

import { h } from "../dom.js";

const EYE = "M1 8s2.5-5 7-5 7 5 7 5-2.5 5-7 5-7-5-7-5z";

function eyeIcon(label) {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("class", "eye");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", label);
  const title = document.createElementNS("http://www.w3.org/2000/svg", "title");
  title.textContent = label;
  const outline = document.createElementNS("http://www.w3.org/2000/svg", "path");
  outline.setAttribute("d", EYE);
  const pupil = document.createElementNS("http://www.w3.org/2000/svg", "circle");
  pupil.setAttribute("cx", "8");
  pupil.setAttribute("cy", "8");
  pupil.setAttribute("r", "2.3");
  svg.append(title, outline, pupil);
  return svg;
}

/** Every brick is in a tower, the discard pile, the draw stack or someone's hand. */
function brickCount(v) {
  return v.towers[0].length + v.towers[1].length + v.discard.length + v.stack + (v.holding ? 1 : 0);
}

/** Width of a brick in % of the tower: 1 is the narrowest, the largest number the widest. */
function widthOf(brick, total) {
  return `${(28 + (72 * (brick - 1)) / Math.max(1, total - 1)).toFixed(1)}%`;
}

/** Length of the strictly decreasing run from the bottom; null while a brick in it is hidden. */
export function runLength(tower) {
  if (tower.length === 0 || tower[0] == null) return null;
  let n = 1;
  for (let i = 1; i < tower.length; i++) {
    if (tower[i] == null) return null;
    if (tower[i] >= tower[i - 1]) break;
    n++;
  }
  return n;
}

function brickFace(brick, total, { seen, seenLabel, extraClass = "" } = {}) {
  if (brick == null) {
    return h("span", { class: `brick unknown ${extraClass}`, "aria-label": "hidden brick" }, "?");
  }
  const shade = total > 1 ? (brick - 1) / (total - 1) : 0.5;
  return h(
    "span",
    {
      class: `brick ${extraClass}`,
      dataset: { brick: String(brick) },
      style: { "--w": widthOf(brick, total), "--shade": shade.toFixed(3) },
    },
    h("span", { class: "num" }, String(brick)),
    seen ? eyeIcon(seenLabel) : null,
  );
}

function legalSets(legal) {
  const take = new Set();
  const place = new Set();
  let draw = false;
  let pass = false;
  for (const m of legal ?? []) {
    if (m.action === "take") take.add(m.slot);
    else if (m.action === "place") place.add(m.slot);
    else if (m.action === "draw") draw = true;
    else if (m.action === "pass") pass = true;
  }
  return { take, place, draw, pass };
}

/** Which of the receiver's slots are click targets now, and what a click there does. */
function targets(ctx) {
  const { view: v, ui } = ctx;
  const l = legalSets(ctx.legal);
  if (ctx.busy) return { action: null, slots: new Set(), l };
  if (v.phase === "drawn" && l.place.size) return { action: "place", slots: l.place, l };
  if (v.phase === "turn" && ui.selected === "open" && l.take.size) {
    return { action: "take", slots: l.take, l };
  }
  return { action: null, slots: new Set(), l };
}

function towerView(ctx, seat, total, t) {
  const v = ctx.view;
  const mine = ctx.seat === seat;
  const tower = v.towers[seat];
  const seen = v.seen[seat];
  const run = runLength(tower);
  const name = ctx.names[seat];
  const plain = ctx.seat == null || name === "Opponent" || name.endsWith(")");
  const who = ctx.replay ? name : mine ? "You" : plain ? name : `${name} (opponent)`;
  const seenLabel = mine ? "your opponent can see this brick" : "placed this round: everyone sees it";
  const slots = [];
  for (let i = tower.length - 1; i >= 0; i--) {
    const clickable = mine && t.slots.has(i);
    const face = brickFace(tower[i], total, {
      seen: seen[i],
      seenLabel,
      extraClass: run != null && i < run ? "in-run" : "",
    });
    let label = `slot ${i}: ${tower[i] == null ? "hidden brick" : `brick ${tower[i]}`}`;
    if (seen[i]) label += mine ? ", seen by your opponent" : ", visible";
    const body = clickable
      ? h(
          "button",
          {
            type: "button",
            class: "slot-btn",
            dataset: { focus: `slot-${i}` },
            "aria-label": `${t.action === "take" ? "Take the open brick into" : "Place your drawn brick in"} ${label}`,
            onclick: () => ctx.move({ action: t.action, slot: i }),
          },
          face,
        )
      : h("div", { class: "slot-body", "aria-label": label, role: "img" }, face);
    slots.push(
      h(
        "li",
        { class: `slot${clickable ? " target" : ""}`, dataset: { slot: String(i) } },
        h("span", { class: "slot-no", "aria-hidden": "true" }, String(i)),
        body,
      ),
    );
  }
  const score = run != null ? `run ${run} · ${run === tower.length ? 50 : 5 * run} pts` : "";
  return h(
    "section",
    {
      class: `tower-box${mine ? " mine" : ""}${v.to_move === seat && v.phase !== "over" ? " to-move" : ""}`,
      dataset: { seat: String(seat), tower: mine ? "me" : ctx.seat == null ? `seat${seat}` : "opponent" },
      "aria-label": `${who}: tower`,
    },
    h("h3", { class: "tower-title" }, h("span", { class: "name", title: who }, who), h("span", { class: "run" }, score)),
    h("ol", { class: "tower" }, slots),
  );
}

function pilesView(ctx, total, t) {
  const v = ctx.view;
  const { ui } = ctx;
  const open = v.discard.length ? v.discard[v.discard.length - 1] : null;
  const myTurn = ctx.seat != null && v.to_move === ctx.seat && v.phase !== "over";
  const canTake = !ctx.busy && v.phase === "turn" && t.l.take.size > 0;
  const openBtn = h(
    "button",
    {
      type: "button",
      class: `pile open-brick${ui.selected === "open" ? " selected" : ""}`,
      id: "open-brick",
      dataset: { focus: "open" },
      disabled: !canTake,
      "aria-pressed": canTake ? String(ui.selected === "open") : null,
      "aria-label": open == null ? "no open brick" : `Open brick ${open}${canTake ? ": take it (o)" : ""}`,
      onclick: () => {
        ui.selected = ui.selected === "open" ? null : "open";
        ctx.rerender();
      },
    },
    h("span", { class: "pile-label" }, "Open brick"),
    open == null ? h("span", { class: "brick empty" }, "–") : brickFace(open, total),
  );
  const drawBtn = h(
    "button",
    {
      type: "button",
      class: "pile draw-stack",
      id: "draw-stack",
      dataset: { focus: "draw" },
      disabled: ctx.busy || !t.l.draw,
      "aria-label": `Draw a brick (d); ${v.stack} in the draw stack`,
      onclick: () => ctx.move({ action: "draw" }),
    },
    h("span", { class: "pile-label" }, "Draw stack"),
    h("span", { class: "brick unknown stack-face" }, "???"),
    h("span", { class: "count" }, `${v.stack} left`),
  );
  const parts = [openBtn, drawBtn];
  if (v.drawn != null) {
    parts.push(
      h(
        "div",
        { class: "pile drawn", id: "drawn-brick", "aria-label": `${ctx.seat == null || ctx.replay ? ctx.names[v.to_move] : "You"} drew brick ${v.drawn}` },
        h("span", { class: "pile-label" }, ctx.seat == null || ctx.replay ? `${ctx.names[v.to_move]} drew` : "You drew"),
        brickFace(v.drawn, total),
        ctx.seat == null || ctx.replay ? null : h(
          "button",
          {
            type: "button",
            id: "pass-btn",
            dataset: { focus: "pass" },
            disabled: ctx.busy || !t.l.pass,
            onclick: () => ctx.move({ action: "pass" }),
          },
          "Pass (p)",
        ),
      ),
    );
  } else if (v.holding && !myTurn) {
    const who = ctx.seat == null ? ctx.names[v.to_move] : "Opponent";
    parts.push(
      h(
        "div",
        { class: "pile drawn", "aria-label": `${who} holds a drawn brick` },
        h("span", { class: "pile-label" }, `${who} drew`),
        brickFace(null, total),
      ),
    );
  }
  const pile = [...v.discard].reverse();
  const discard = h(
    "details",
    {
      class: "discard",
      open: ui.discardOpen || null,
      ontoggle: (e) => {
        ui.discardOpen = e.currentTarget.open;
      },
    },
    h("summary", {}, `Discard pile (${v.discard.length})`),
    h(
      "ol",
      { class: "discard-list", "aria-label": "discard pile, top first" },
      pile.map((b) => h("li", {}, brickFace(b, total))),
    ),
  );
  parts.push(discard);
  return h("section", { class: "piles", "aria-label": "open brick and draw stack" }, parts);
}

/** What one event says, with the players' names ("Bob took the open 17 into slot 3"). */
function describe(e, ctx) {
  const who = (s) => ctx.who(s);
  switch (e.kind) {
    case "drew":
      return e.brick != null ? `${who(e.seat)} drew ${e.brick}` : `${who(e.seat)} drew a brick`;
    case "took":
      return `${who(e.seat)} took the open ${e.brick} into slot ${e.slot}, discarding ${e.removed}`;
    case "placed":
      return `${who(e.seat)} drew and placed ${e.brick} in slot ${e.slot}, discarding ${e.removed}`;
    case "passed":
      return `${who(e.seat)} drew and passed ${e.brick}`;
    case "reshuffled":
      return `the discard pile was shuffled into a new draw stack of ${e.stack}`;
    case "round_ended":
      return `round ${e.round} over: ${e.finisher == null ? "the turn cap was reached" : `${who(e.finisher)} finished the tower`} (${ctx.names[0]} ${e.scores[0]}, ${ctx.names[1]} ${e.scores[1]})`;
    default:
      return null;
  }
}

const HELP = [
  h("kbd", {}, "o"), " select the open brick, then a slot number ", h("kbd", {}, "0"), "–", h("kbd", {}, "9"),
  "; ", h("kbd", {}, "d"), " draw; after drawing a slot number places the brick, ", h("kbd", {}, "p"),
  " passes; ", h("kbd", {}, "Esc"), " cancels. Towers taller than 10: type two digits quickly.",
];

export const stacko = {
  title: "Stacko",

  describe,

  /** The keyboard help under the board (nodes: cloned by the caller). */
  help() {
    return HELP.map((n) => (typeof n === "string" ? n : n.cloneNode(true)));
  },

  /** Both towers of a finished round side by side, bottom first at the bottom. */
  roundEnd(result, ctx) {
    const total = ctx.view ? brickCount(ctx.view) : Math.max(...result.towers.flat());
    const order = ctx.seat == null ? [0, 1] : [ctx.seat, 1 - ctx.seat];
    return h(
      "div",
      { class: "round-towers" },
      order.map((s) => {
        const tower = result.towers[s];
        const run = runLength(tower);
        return h(
          "section",
          { class: "tower-box", dataset: { seat: String(s) }, "aria-label": `${ctx.who(s)}: tower at the end of round ${result.round}` },
          h("h3", { class: "tower-title" }, ctx.who(s), h("span", { class: "run" }, `${result.scores[s]} pts`)),
          h(
            "ol",
            { class: "tower" },
            [...tower.keys()].reverse().map((i) =>
              h(
                "li",
                { class: "slot", dataset: { slot: String(i) } },
                h("span", { class: "slot-no", "aria-hidden": "true" }, String(i)),
                h("div", { class: "slot-body" }, brickFace(tower[i], total, { extraClass: run != null && i < run ? "in-run" : "" })),
              ),
            ),
          ),
        );
      }),
    );
  },

  render(root, ctx) {
    const v = ctx.view;
    const total = brickCount(v);
    const t = targets(ctx);
    if (v.phase !== "turn" || !t.l.take.size) ctx.ui.selected = null;
    const me = ctx.seat ?? 0;
    root.classList.toggle("choosing", t.slots.size > 0);
    return h(
      "div",
      { class: "stacko" },
      towerView(ctx, me, total, t),
      pilesView(ctx, total, t),
      towerView(ctx, 1 - me, total, t),
    );
  },

  /** The line under the players: whose turn, and what to do now. */
  prompt(ctx) {
    const v = ctx.view;
    const who = (s) => (ctx.seat == null ? ctx.names[s] : s === ctx.seat ? "You" : ctx.names[s]);
    if (v.phase === "over") return { text: "Game over", round: `Round ${v.round} of ${v.rounds}` };
    const round = `Round ${v.round} of ${v.rounds} · turn ${v.turns + 1}${v.turn_cap ? ` of ${v.turn_cap}` : ""}`;
    if (ctx.seat != null && v.to_move === ctx.seat) {
      if (v.phase === "drawn") {
        return {
          text: `Your turn: you drew ${v.drawn}. Click a slot to place it, or pass.`,
          round,
          mine: true,
        };
      }
      const text = ctx.ui.selected === "open"
        ? "Your turn: click the slot for the open brick (Esc cancels)."
        : "Your turn: take the open brick or draw from the stack.";
      return { text, round, mine: true };
    }
    const name = who(v.to_move);
    return { text: v.holding ? `${name} drew a brick…` : `${name} to move…`, round };
  },

  key(key, ctx) {
    const v = ctx.view;
    const l = legalSets(ctx.legal);
    if (ctx.busy || v.phase === "over") return false;
    if (key === "d") return l.draw ? (ctx.move({ action: "draw" }), true) : ctx.hint("You cannot draw now.");
    if (key === "p") return l.pass ? (ctx.move({ action: "pass" }), true) : ctx.hint("Pass only after drawing.");
    if (key === "o") {
      if (v.phase !== "turn" || !l.take.size) return ctx.hint("You cannot take the open brick now.");
      ctx.ui.selected = ctx.ui.selected === "open" ? null : "open";
      ctx.rerender();
      return true;
    }
    if (key === "Escape" && ctx.ui.selected) {
      ctx.ui.selected = null;
      ctx.rerender();
      return true;
    }
    if (/^[0-9]$/.test(key)) return this.digit(Number(key), ctx);
    return false;
  },

  /** A slot number typed: one digit, or two quick ones for towers of more than 10 slots. */
  digit(d, ctx) {
    const { ui } = ctx;
    const size = ctx.view.towers[ctx.seat ?? 0].length;
    clearTimeout(ui.digitTimer);
    let slot = d;
    if (ui.firstDigit != null) {
      slot = ui.firstDigit * 10 + d;
      ui.firstDigit = null;
    } else if (size > 10 && d >= 1 && d * 10 < size) {
      ui.firstDigit = d;
      ui.digitTimer = setTimeout(() => {
        ui.firstDigit = null;
        this.slot(d, ctx);
      }, 700);
      return true;
    }
    return this.slot(slot, ctx);
  },

  slot(slot, ctx) {
    const t = targets(ctx);
    if (t.action && t.slots.has(slot)) {
      ctx.move({ action: t.action, slot });
      return true;
    }
    if (ctx.view.phase === "turn") return ctx.hint("Press o to pick the open brick first, or d to draw.");
    return ctx.hint(`No slot ${slot}.`);
  },

  /** Finished rounds: scores and the revealed towers. */
  scores(ctx) {
    const v = ctx.view;
    if (!v.results.length) return null;
    const order = ctx.seat == null ? [0, 1] : [ctx.seat, 1 - ctx.seat];
    const label = (s) => (ctx.seat == null || ctx.replay ? ctx.names[s] : s === ctx.seat ? "You" : ctx.names[s]);
    const rows = v.results.map((r) =>
      h(
        "tr",
        {},
        h("th", { scope: "row" }, `Round ${r.round}`),
        order.map((s) => h("td", {}, String(r.scores[s]))),
        h("td", {}, r.finisher == null ? "turn cap" : `${label(r.finisher)} finished`),
      ),
    );
    const towers = v.results.map((r) =>
      h(
        "li",
        {},
        `Round ${r.round}: `,
        order.map((s) => h("span", { class: "revealed" }, `${label(s)}: ${r.towers[s].join(" · ")} `)),
      ),
    );
    return h(
      "div",
      { class: "card scores" },
      h(
        "table",
        {},
        h("caption", {}, "Scores"),
        h("thead", {}, h("tr", {}, h("th", {}), order.map((s) => h("th", { scope: "col" }, label(s))), h("th", {}, ""))),
        h("tbody", {}, rows),
        h(
          "tfoot",
          {},
          h("tr", {}, h("th", { scope: "row" }, "Total"), order.map((s) => h("td", {}, String(v.totals[s]))), h("td", {})),
        ),
      ),
      h("details", {}, h("summary", {}, "Towers at the end of each round (bottom first)"), h("ul", { class: "plain" }, towers)),
    );
  },
};
