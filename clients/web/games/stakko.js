// Stakko: a line of stacks of coloured discs. White (seat 0) moves toward the end of the line,
// Black (seat 1) toward its start. A move lifts `count` discs off the top of one of your stacks
// ({stack, count}); it always goes as far as the number of stacks you own.
// Click a disc in one of your stacks to lift it and everything above it. Keys: a stack number,
// then how many discs (a digit); Esc cancels. Interface: see stacko.js.

import { h } from "../dom.js";

const COLOURS = ["white", "black", "gray", "red"];
const SIDE = ["White", "Black"];

/** A disc as the wire may spell it (0..3, "W"/"B"/"G"/"R", "white"...) -> "white" | ... */
export function colourOf(disc) {
  if (typeof disc === "number") return COLOURS[disc] ?? "gray";
  const text = String(disc).toLowerCase();
  return COLOURS.find((c) => c === text || c[0] === text[0]) ?? "gray";
}

/** The line's stacks, each bottom first, whatever field name the view uses. */
function lineOf(v) {
  const line = v.line ?? v.stacks ?? [];
  return line.map((stack) => (typeof stack === "string" ? [...stack] : stack).map(colourOf));
}

/** stack index -> Set of liftable counts, from the legal moves. */
function liftable(legal) {
  const out = new Map();
  for (const m of legal ?? []) {
    if (m.stack == null || m.count == null) continue;
    if (!out.has(m.stack)) out.set(m.stack, new Set());
    out.get(m.stack).add(m.count);
  }
  return out;
}

function ownerOf(stack) {
  const top = stack[stack.length - 1];
  return top === "white" ? 0 : top === "black" ? 1 : null;
}

function distance(v, seat, line) {
  if (v.owned) return v.owned[seat];
  return line.filter((s) => ownerOf(s) === seat).length;
}

function label(ctx, seat) {
  if (ctx.seat == null || ctx.replay) return `${ctx.names[seat]} (${SIDE[seat]})`;
  return seat === ctx.seat ? `You (${SIDE[seat]})` : `${ctx.names[seat]} (${SIDE[seat]})`;
}

/** What one event says, with the players' names. */
function describe(e, ctx) {
  if (e.kind === "moved") {
    const n = `${e.count} disc${e.count === 1 ? "" : "s"}`;
    const gone = e.closed ? `; space ${e.stack} left the line` : "";
    return `${ctx.who(e.seat)} moved ${n} from stack ${e.stack} onto stack ${e.target}${gone}`;
  }
  if (e.kind === "passed") return `${ctx.who(e.seat)} could not move and passed`;
  return null;
}

const HELP = [
  "Type the number of one of your stacks, then how many discs to lift off its top (",
  "two digits quickly for 10 or more, or finish with ", h("kbd", {}, "Enter"), "); ",
  h("kbd", {}, "Esc"), " cancels. Or click a disc (it moves with every disc above it), or the",
  " number under a stack and then how many.",
];

const DIGIT_WAIT_MS = 900;

/** A phone: discs are too thin to tap, so a stack's number is the button and a row of count
 * buttons follows (every button a finger's size). */
function narrow() {
  return typeof matchMedia === "function" && matchMedia("(max-width: 480px)").matches;
}

export const stakko = {
  title: "Stakko",

  describe,

  help() {
    return HELP.map((n) => (typeof n === "string" ? n : n.cloneNode(true)));
  },

  render(root, ctx) {
    const v = ctx.view;
    const line = lineOf(v);
    const lifts = ctx.busy ? new Map() : liftable(ctx.legal);
    const mover = v.to_move;
    const step = mover == null ? 0 : distance(v, mover, line) * (mover === 0 ? 1 : -1);
    const { ui } = ctx;
    if (ui.stack != null && !lifts.has(ui.stack)) ui.stack = null;
    root.classList.toggle("choosing", lifts.size > 0);

    const preview = (i, on) => {
      const target = root.querySelector(`.stakko-stack[data-stack="${i + step}"]`);
      target?.classList.toggle("landing", on);
    };

    const phone = narrow();
    const stacks = line.map((stack, i) => {
      const counts = lifts.get(i);
      const owner = ownerOf(stack);
      const discs = stack.map((colour, j) => {
        const count = stack.length - j;
        const name = `${colour} disc ${j + 1} of ${stack.length}`;
        if (counts?.has(count) && !phone) {
          return h(
            "button",
            {
              type: "button",
              class: `disc ${colour}${ui.stack === i ? " armed" : ""}`,
              dataset: { focus: `disc-${i}-${j}`, count: String(count) },
              "aria-label": `Lift ${count} disc${count === 1 ? "" : "s"} off stack ${i} onto stack ${i + step}`,
              onclick: () => ctx.move({ stack: i, count }),
              onmouseenter: () => preview(i, true),
              onmouseleave: () => preview(i, false),
              onfocus: () => preview(i, true),
              onblur: () => preview(i, false),
            },
          );
        }
        return h("span", { class: `disc ${colour}`, role: "img", "aria-label": name });
      });
      const home = i === 0 ? "White's home" : i === line.length - 1 ? "Black's home" : null;
      return h(
        "li",
        {
          class: `stakko-stack${owner != null ? ` owned-${owner}` : ""}${counts ? " movable" : ""}${ui.stack === i ? " selected" : ""}`,
          dataset: { stack: String(i) },
          "aria-label": `stack ${i}: ${stack.length} discs, ${owner == null ? "nobody's" : SIDE[owner] + "'s"}`,
        },
        h("div", { class: "discs" }, discs),
        counts
          ? h(
              "button",
              {
                type: "button",
                class: "stack-no stack-btn",
                dataset: { focus: `stack-${i}` },
                "aria-pressed": String(ui.stack === i),
                "aria-label": `Stack ${i}: choose how many discs to lift`,
                onclick: () => {
                  this.cancel(ctx);
                  if (counts.size === 1) return this.lift(i, [...counts][0], ctx);
                  ui.stack = ui.stack === i ? null : i;
                  return ctx.rerender();
                },
              },
              String(i),
            )
          : h("span", { class: "stack-no" }, String(i)),
        h("span", { class: "home" }, home ?? ""),
      );
    });

    const heights = v.heights ?? [0, 0];
    const info = [0, 1].map((s) =>
      h(
        "li",
        { class: `side side-${s}${mover === s && !v.outcome ? " to-move" : ""}` },
        h("span", { class: `disc ${COLOURS[s]} mini`, "aria-hidden": "true" }),
        h("strong", {}, label(ctx, s)),
        ` moves ${s === 0 ? "→" : "←"} ${distance(v, s, line)} · height ${heights[s]}`,
        v.passes?.[s] ? ` · passed ${v.passes[s]}×` : "",
      ),
    );
    const chosen = ui.stack != null ? lifts.get(ui.stack) : null;
    const picker = chosen
      ? h(
          "div",
          { class: "count-picker", role: "group", "aria-label": `How many discs off stack ${ui.stack}` },
          h("span", {}, `Lift from stack ${ui.stack}:`),
          [...chosen].sort((a, b) => a - b).map((count) =>
            h(
              "button",
              { type: "button", dataset: { focus: `count-${count}`, count: String(count) }, onclick: () => this.lift(ui.stack, count, ctx) },
              `${count} disc${count === 1 ? "" : "s"}`,
            ),
          ),
          h("button", { type: "button", class: "cancel", onclick: () => { this.cancel(ctx); ctx.rerender(); } }, "Cancel"),
        )
      : null;
    return h(
      "div",
      { class: "stakko" },
      h("ul", { class: "sides plain" }, info),
      picker,
      h("ol", { class: "stakko-line", "aria-label": "the line of stacks, White's home first" }, stacks),
    );
  },

  prompt(ctx) {
    const v = ctx.view;
    const moves = v.ply_cap ?? v.options?.ply_cap;
    const round = `Move ${v.ply + 1}${moves ? ` of at most ${moves}` : ""}`;
    if (v.outcome) return { text: "Game over", round: `${v.ply} moves` };
    if (ctx.seat != null && v.to_move === ctx.seat) {
      const line = lineOf(v);
      const n = distance(v, ctx.seat, line);
      return {
        text: narrow()
          ? `Your turn: tap the number under one of your stacks, then how many discs go ${n} stack${n === 1 ? "" : "s"} ${ctx.seat === 0 ? "right" : "left"}.`
          : `Your turn: click a disc in one of your stacks to move it and everything above it ${n} stack${n === 1 ? "" : "s"} ${ctx.seat === 0 ? "right" : "left"}.`,
        round,
        mine: true,
      };
    }
    const who = ctx.seat == null ? ctx.names[v.to_move] : ctx.names[v.to_move];
    return { text: `${who} (${SIDE[v.to_move]}) to move…`, round };
  },

  key(key, ctx) {
    const lifts = liftable(ctx.legal);
    const { ui } = ctx;
    if (ctx.busy || !lifts.size) return false;
    if (key === "Escape" && ui.stack != null) {
      this.cancel(ctx);
      ctx.rerender();
      ctx.hint(null);
      return true;
    }
    if (key === "Enter" && ui.stack != null && ui.count) return this.lift(ui.stack, Number(ui.count), ctx);
    if (!/^[0-9]$/.test(key)) return false;
    if (ui.stack == null) {
      const d = Number(key);
      if (!lifts.has(d)) return ctx.hint(`You cannot move stack ${d}.`);
      const counts = lifts.get(d);
      if (counts.size === 1) return this.lift(d, [...counts][0], ctx);
      ui.stack = d;
      ui.count = "";
      ctx.rerender();
      return ctx.hint(`Stack ${d}: how many discs? (${[...counts].sort((a, b) => a - b).join(", ")})`);
    }
    // The count: digits typed one after another ("1", "2" -> 12); it goes as soon as no
    // longer count could follow, else on Enter or after a short pause.
    const counts = lifts.get(ui.stack);
    clearTimeout(ui.countTimer);
    const typed = `${ui.count ?? ""}${key}`;
    const longer = [...counts].some((c) => c > Number(typed) && String(c).startsWith(typed));
    if (!counts.has(Number(typed)) && !longer) {
      ui.count = "";
      return ctx.hint(`You cannot lift ${typed} from stack ${ui.stack}.`);
    }
    if (!longer) return this.lift(ui.stack, Number(typed), ctx);
    ui.count = typed;
    ctx.hint(`Stack ${ui.stack}: ${typed}… (Enter to lift ${typed})`);
    if (counts.has(Number(typed))) {
      const stack = ui.stack;
      ui.countTimer = setTimeout(() => {
        if (ui.stack === stack && ui.count === typed) this.lift(stack, Number(typed), ctx);
      }, DIGIT_WAIT_MS);
    }
    return true;
  },

  cancel(ctx) {
    clearTimeout(ctx.ui.countTimer);
    ctx.ui.stack = null;
    ctx.ui.count = "";
  },

  lift(stack, count, ctx) {
    const counts = liftable(ctx.legal).get(stack);
    if (!counts?.has(count)) return ctx.hint(`You cannot lift ${count} from stack ${stack}.`);
    this.cancel(ctx);
    ctx.move({ stack, count });
    return true;
  },

  scores(ctx) {
    const v = ctx.view;
    if (!v.outcome) return null;
    const order = ctx.seat == null ? [0, 1] : [ctx.seat, 1 - ctx.seat];
    return h(
      "div",
      { class: "card scores" },
      h(
        "table",
        {},
        h("caption", {}, "Heights on the opponent's home"),
        h("tbody", {}, order.map((s) => h("tr", {}, h("th", { scope: "row" }, label(ctx, s)), h("td", {}, String(v.outcome.scores[s]))))),
      ),
    );
  },
};
