// Accounts on the lobby page: registration (the token is shown once and kept in this
// browser), the account badge, challenges (a notification to accept or decline, and
// `?challenge=NAME` to send one), and the rating change at the end of a rated game.

import { $, h, show } from "./dom.js";
import { ACCOUNT_KEY } from "./net.js";

const state = {
  account: null, // {name, kind} from welcome
  challenges: new Map(), // challenge id -> the challenged frame
  ratings: new Map(), // room code -> "Ann 1500 → 1677 (+177)"
  sent: null, // the challenge this page sent (its id)
};

export const accountState = state;

/** Registration on the name screen. `enter(name)` goes on to the lobby. */
export function wireAccounts({ enter, request }) {
  const form = $("#register-form");
  if (!form) return;
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const name = $("#register-name").value.trim();
    const error = $("#register-error");
    show(error, false);
    let answer;
    try {
      const response = await fetch(`/api/accounts?name=${encodeURIComponent(name)}&kind=human`, { method: "POST" });
      answer = await response.json();
    } catch (err) {
      answer = { error: { message: String(err?.message ?? err) } };
    }
    if (!answer.token) {
      error.textContent = answer.error?.message ?? "The name could not be registered.";
      show(error);
      return;
    }
    localStorage.setItem(ACCOUNT_KEY, answer.token);
    $("#register-token").textContent = answer.token;
    $("#register-who").textContent = answer.name;
    show($("#register-done"));
    show(form, false);
    $("#register-continue").onclick = () => enter(answer.name);
  });
  $("#sign-out")?.addEventListener("click", () => {
    localStorage.removeItem(ACCOUNT_KEY);
    location.reload();
  });
  state.request = request;
}

/** Frames about accounts; true when handled here. */
export function accountFrame(f, app) {
  switch (f.type) {
    case "welcome":
      state.account = f.account ?? null;
      renderBadge();
      if (app.link.challenge && state.account && !state.sent) {
        state.sent = "asked";
        state.request({ type: "challenge", to: app.link.challenge, game: "stacko", rated: true });
      }
      return false; // the lobby handles the rest of it
    case "challenge_sent":
      state.sent = f.challenge;
      notice(`Challenge sent to ${f.to}; waiting for an answer…`);
      return true;
    case "challenged":
      state.challenges.set(f.challenge, f);
      renderChallenges();
      return true;
    case "challenge_over":
      state.challenges.delete(f.challenge);
      if (f.challenge === state.sent) notice(`Your challenge was ${f.reason}.`);
      renderChallenges();
      return true;
    case "rating":
      state.ratings.set(
        f.room,
        f.changes
          .map((c) => `${c.name} ${c.before} → ${c.after} (${c.delta >= 0 ? "+" : ""}${c.delta})${c.provisional ? "?" : ""}`)
          .join(", "),
      );
      return false; // the page renders again
    case "joined":
      if (state.sent && state.sent !== "asked") notice(null);
      return false;
    default:
      return false;
  }
}

function notice(text) {
  const el = $("#challenge-status");
  el.textContent = text ?? "";
  show(el, Boolean(text));
}

function renderBadge() {
  const el = $("#who-account");
  if (!el) return;
  el.textContent = state.account ? `(${state.account.kind} account)` : "";
  show($("#sign-out"), Boolean(state.account));
}

function renderChallenges() {
  const box = $("#challenges");
  const items = [...state.challenges.values()].map((c) =>
    h(
      "li",
      { dataset: { challenge: c.challenge } },
      `${c.name}${c.account ? ` (${c.account.kind})` : ""} challenges you to ${c.game}${c.rated ? ", rated" : ""}. `,
      h("button", { type: "button", class: "primary accept", onclick: () => answer(c, true) }, "Accept"),
      " ",
      h("button", { type: "button", class: "decline", onclick: () => answer(c, false) }, "Decline"),
    ),
  );
  $("#challenge-list").replaceChildren(...items);
  show(box, items.length > 0);
}

function answer(c, accept) {
  state.challenges.delete(c.challenge);
  renderChallenges();
  state.request({ type: accept ? "accept_challenge" : "decline_challenge", challenge: c.challenge });
}

/** The rating line of the room on screen (after its rated game ended). */
export function renderRating(code) {
  const text = code ? state.ratings.get(code) : null;
  const el = $("#rating-line");
  el.textContent = text ? `Rating: ${text}` : "";
  show(el, Boolean(text));
}
