// Fallback for a game this page has no renderer for: the view as text and every legal move
// as a button, so a new game on the server is playable (roughly) before it gets a board.

import { h } from "../dom.js";

export const generic = {
  title: "Game",

  render(root, ctx) {
    return h(
      "div",
      { class: "generic" },
      h("pre", { class: "view-json" }, JSON.stringify(ctx.view, null, 1)),
      h(
        "div",
        { class: "actions", "aria-label": "legal moves" },
        (ctx.legal ?? []).map((m, i) =>
          h(
            "button",
            { type: "button", dataset: { focus: `m${i}` }, disabled: ctx.busy, onclick: () => ctx.move(m) },
            Object.values(m).join(" "),
          ),
        ),
      ),
    );
  },

  prompt(ctx) {
    const v = ctx.view;
    if (v.phase === "over" || v.outcome) return { text: "Game over" };
    if (ctx.seat != null && v.to_move === ctx.seat) return { text: "Your turn: pick a move.", mine: true };
    return { text: v.to_move == null ? "" : `${ctx.names[v.to_move]} to move…` };
  },

  key() {
    return false;
  },

  scores() {
    return null;
  },
};
