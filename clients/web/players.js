// The leaderboard (players.html) and a player's profile (players.html?name=NAME) with a
// rating-history plot drawn as inline SVG (no library, nothing fetched from elsewhere).

import { $, h, show } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const query = new URLSearchParams(location.search);

function fail(text) {
  $("#players-error").textContent = text;
  show($("#players-error"));
}

async function getJson(path) {
  const response = await fetch(path);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error?.message ?? `HTTP ${response.status}`);
  return body;
}

const record = (r) => `${r.wins} / ${r.draws} / ${r.losses}`;
const rating = (r) => `${r.rating}${r.provisional ? "?" : ""}`;

async function board(game, cursor, append) {
  const page = await getJson(`/api/leaderboard?game=${game}&limit=50${cursor ? `&cursor=${cursor}` : ""}`);
  $("#provisional-games").textContent = String(page.provisional_games);
  const rows = page.players.map((p) =>
    h(
      "tr",
      { dataset: { name: p.name } },
      h("td", {}, String(p.rank)),
      h("td", {}, h("a", { href: `players.html?name=${encodeURIComponent(p.name)}` }, p.name)),
      h("td", {}, p.kind),
      h("td", { class: "rating" }, rating(p)),
      h("td", {}, String(p.deviation)),
      h("td", {}, String(p.games)),
      h("td", {}, record(p)),
    ),
  );
  const body = $("#board-table tbody");
  if (append) body.append(...rows);
  else body.replaceChildren(...rows);
  show($("#board-empty"), body.children.length === 0);
  const more = $("#board-more");
  show(more, Boolean(page.next));
  more.onclick = () => board(game, page.next, true).catch((e) => fail(e.message));
}

/** An SVG line of the rating after each rated game, with the deviation as a band. */
export function plot(points) {
  const width = 480;
  const height = 180;
  const pad = 30;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", "Rating after each rated game");
  if (points.length === 0) return svg;
  const lo = Math.min(...points.map((p) => p[1] - p[2]));
  const hi = Math.max(...points.map((p) => p[1] + p[2]));
  const x = (i) => pad + (points.length === 1 ? 0 : (i * (width - 2 * pad)) / (points.length - 1));
  const y = (v) => height - pad - ((v - lo) * (height - 2 * pad)) / Math.max(1, hi - lo);
  const el = (tag, attrs) => {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    svg.append(node);
    return node;
  };
  const upper = points.map((p, i) => `${x(i)},${y(p[1] + p[2])}`);
  const lower = points.map((p, i) => `${x(i)},${y(p[1] - p[2])}`).reverse();
  el("polygon", { points: [...upper, ...lower].join(" "), class: "band", fill: "#dde7f3" });
  el("polyline", {
    points: points.map((p, i) => `${x(i)},${y(p[1])}`).join(" "),
    class: "line", fill: "none", stroke: "#24527a", "stroke-width": 2,
  });
  points.forEach((p, i) => el("circle", { cx: x(i), cy: y(p[1]), r: 3, fill: "#24527a" }));
  el("text", { x: 2, y: 12, "font-size": 11 }).textContent = String(Math.round(hi));
  el("text", { x: 2, y: height - 4, "font-size": 11 }).textContent = String(Math.round(lo));
  return svg;
}

async function profile(name) {
  const p = await getJson(`/api/players/${encodeURIComponent(name)}`);
  document.title = `${p.name} · Stacko`;
  $("#profile-name").textContent = p.name;
  $("#profile-kind").textContent = `${p.kind}${p.closed ? ", closed" : ""}`;
  $("#profile-challenge").href = `./?challenge=${encodeURIComponent(p.name)}`;
  $("#profile-ratings tbody").replaceChildren(
    ...Object.entries(p.ratings).map(([game, r]) =>
      h("tr", {}, h("td", {}, game), h("td", {}, rating(r)), h("td", {}, String(r.deviation)),
        h("td", {}, String(r.games)), h("td", {}, record(r))),
    ),
  );
  const game = Object.keys(p.history)[0];
  $("#profile-plot").replaceChildren(plot(game ? p.history[game] : []));
  const words = { 1: "won", 0.5: "drew", 0: "lost" };
  $("#profile-recent").replaceChildren(
    ...p.recent.map((g) =>
      h("li", {}, `${words[g.score] ?? g.score} against `, h("a", { href: `players.html?name=${encodeURIComponent(g.opponent)}` }, g.opponent),
        ` (${g.game}, ${g.before} → ${g.after}) `, h("a", { href: g.page, class: "record" }, "the game")),
    ),
  );
  show($("#profile"));
}

function start() {
  const name = query.get("name");
  if (name) {
    profile(name).catch((e) => fail(e.message));
    return;
  }
  const select = $("#board-game");
  select.value = query.get("game") === "stakko" ? "stakko" : "stacko";
  select.addEventListener("change", () => board(select.value).catch((e) => fail(e.message)));
  show($("#board"));
  board(select.value).catch((e) => fail(e.message));
}

start();
