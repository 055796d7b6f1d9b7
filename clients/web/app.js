// The Stacko web client: name -> lobby -> room. Talks protocol version 1 (PROTOCOL.md) over
// one WebSocket to the server that served this page. The board itself is drawn by a renderer
// per game (games/index.js); everything else here is game-independent.

import { accountFrame, renderRating, wireAccounts } from "./accounts.js";
import { $, formatClock, h, replaceChildren, show } from "./dom.js";
import { rendererFor } from "./games/index.js";
import { Connection, serverUrl } from "./net.js";

const NAME_KEY = "stacko.name";
const ROOMS_REFRESH_MS = 5000;
const MOVE_TIMEOUT_MS = 10000;
/** How long the end of a round stays on screen against a bot (a person clicks Continue). */
const BOT_ROUND_HOLD_MS = 4000;
const MOVES_KEY = "stacko.moves."; // + room code: this tab's move list, kept across a reload

/** Error codes in words; the server's own message is added where it says more. */
const ERROR_WORDS = {
  unknown_room: "There is no such room (it may have closed).",
  room_full: "That room is full; you can watch it instead.",
  already_in_room: "You already play in that room.",
  already_queued: "You are already waiting for a match.",
  not_queued: "You were not waiting for a match.",
  not_your_turn: "It is not your turn.",
  wrong_phase: "That move does not fit this point of the turn.",
  bad_slot: "There is no such slot in your tower.",
  stale_ply: "The game moved on before your move arrived; here is the current position.",
  game_over: "The game is over.",
  not_started: "The game has not started yet: waiting for an opponent.",
  not_a_player: "Spectators cannot play.",
  not_in_room: "You are not in that room.",
  no_rematch: "A rematch needs a finished game and both players.",
  bad_options: "Those options are not allowed:",
  unknown_bot: "This server has no such bot.",
  server_busy: "The server is full right now; try again in a moment.",
  rate_limited: "Too many messages too fast.",
  session_replaced: "This session was opened in another tab or window.",
  unsupported_version: "This page and the server speak different protocol versions; reload the page.",
};

const TERMINATION_WORDS = {
  completed: "",
  turn_cap: "the turn cap was reached",
  resignation: "by resignation",
  abandoned: "a player left",
  timeout: "on time",
};

const OPTION_LABELS = {
  bricks: "Bricks in the game",
  tower: "Tower height (slots)",
  rounds: "Rounds",
  turn_cap: "Turn cap per round",
  clock_ms: "Clock per move (seconds)",
  variant: "Variant",
  ply_cap: "Move cap",
};

// -- the page's state -------------------------------------------------------------------

const app = {
  screen: "name", // "name" | "lobby" | "room"
  games: [], // the `games` answer to list_games
  openRooms: [], // the `rooms` answer to list_rooms
  rooms: new Map(), // code -> Room (see newRoom)
  current: null, // code of the room on screen
  queued: null, // {game, waiting} while waiting for a quick match
  pending: new Map(), // request id -> {kind, room?}
  link: readLink(), // {room, watch, options} from the address
  status: "connecting",
  lastError: null,
};

function newRoom(code) {
  return {
    code, game: null, role: null, seat: null, info: null,
    view: null, legal: null, text: "", seq: 0,
    clockEnd: null, forfeitEnd: {}, rematch: [],
    busy: false, busyTimer: null, ui: {}, note: "",
    moves: [], said: "", roundEnd: null, gameLink: null, ...loadMoves(code),
  };
}

/** The move list of `code` this tab saw before a reload: {moves, seq}. */
function loadMoves(code) {
  try {
    const saved = JSON.parse(sessionStorage.getItem(MOVES_KEY + code) ?? "null");
    if (saved && Array.isArray(saved.moves)) return { moves: saved.moves, seq: saved.seq ?? 0 };
  } catch {
    // nothing saved
  }
  return {};
}

function saveMoves(room) {
  try {
    sessionStorage.setItem(MOVES_KEY + room.code, JSON.stringify({ moves: room.moves, seq: room.seq }));
  } catch {
    // storage full or off: the list just starts again after a reload
  }
}

/** `?room=CODE`, `#room=CODE` (&watch=1 to spectate), `?options={json}` or `#options=`. */
function readLink() {
  const query = new URLSearchParams(location.search);
  const hash = new URLSearchParams(location.hash.slice(1));
  const get = (k) => hash.get(k) ?? query.get(k);
  let options = null;
  try {
    options = get("options") ? JSON.parse(get("options")) : null;
  } catch {
    options = null;
  }
  const room = get("room");
  const challenge = get("challenge");
  return {
    challenge: challenge && challenge.length <= 32 ? challenge : null,
    room: room && /^[A-Za-z0-9]{4,12}$/.test(room) ? room.toUpperCase() : null,
    watch: get("watch") === "1",
    options: options && typeof options === "object" ? options : null,
  };
}

function writeLink(room) {
  const hash = room ? `#room=${room.code}${room.role === "spectator" ? "&watch=1" : ""}` : "";
  const url = `${location.pathname}${hash}`;
  if (url !== location.pathname + location.search + location.hash) history.replaceState(null, "", url);
  app.link = { room: room ? room.code : null, watch: room?.role === "spectator", options: app.link.options };
}

function shareUrl(code) {
  return `${location.origin}${location.pathname}#room=${code}`;
}

// -- the connection ----------------------------------------------------------------------

const conn = new Connection({
  url: serverUrl(),
  name: () => localStorage.getItem(NAME_KEY) || "Player",
  onFrame,
  onStatus,
});

function request(message, context) {
  const id = conn.send(message);
  if (id == null) {
    flash("Not connected to the server; reconnecting…");
    return null;
  }
  app.pending.set(id, { kind: message.type, ...context });
  return id;
}

function onStatus(status, detail) {
  app.status = status;
  const label = { connecting: "Connecting…", online: "Online", reconnecting: "Reconnecting…", stopped: "Offline" };
  $("#conn-status").textContent = label[status] ?? status;
  show($("#conn-status"));
  $("#conn-status").dataset.status = status;
  const banner = $("#banner");
  if (status === "online") {
    show(banner, false);
  } else if (status === "reconnecting") {
    banner.replaceChildren(detail === 1012 ? "The server is restarting. Reconnecting…" : "Connection lost. Reconnecting…");
    app.reconnected = true;
    show(banner);
  } else if (status === "stopped") {
    const text = detail === "session_replaced"
      ? "This game is now open in another tab or window."
      : ERROR_WORDS[detail] ?? "Disconnected.";
    banner.replaceChildren(text, " ", h("button", { type: "button", onclick: () => conn.reconnect() }, "Play here"));
    show(banner);
  }
  for (const room of app.rooms.values()) room.busy = false;
  render();
}

function onFrame(f) {
  const asked = f.id != null ? app.pending.get(f.id) : undefined;
  if (f.id != null) app.pending.delete(f.id);
  if (accountFrame(f, app)) return undefined;
  switch (f.type) {
    case "welcome":
      return onWelcome(f);
    case "games":
      app.games = f.games;
      return buildCreateForm();
    case "rooms":
      app.openRooms = f.rooms;
      for (const info of f.rooms) {
        const room = app.rooms.get(info.room);
        if (room?.info && info.players.length > room.info.players.length) room.info = info;
      }
      return app.screen === "room" ? render() : renderRoomsTable();
    case "joined":
      return onJoined(f, asked);
    case "state":
      return onState(f);
    case "room":
      return onRoomUpdate(f);
    case "queued":
      app.queued = { game: f.game, waiting: f.waiting };
      return render();
    case "unqueued":
      app.queued = null;
      return render();
    case "left":
      app.rooms.delete(f.room);
      sessionStorage.removeItem(MOVES_KEY + f.room);
      if (app.current === f.room) goLobby();
      return render();
    case "error":
      return onError(f, asked);
    case "rating": // kept by accounts.js; shown under the outcome of the room on screen
      return app.screen === "room" ? render() : undefined;
    default:
      return undefined;
  }
}

function onWelcome(f) {
  const mine = new Set(f.rooms);
  // Seats we still hold come back as joined + state; spectated rooms must be joined again.
  const paired = f.rooms.some((code) => !app.rooms.has(code)); // paired while we were away
  for (const code of [...app.rooms.keys()]) if (!mine.has(code)) app.rooms.delete(code);
  const wasQueued = app.queued;
  app.queued = null;
  if (wasQueued && !paired) {
    // Queueing belongs to the connection (a restart also starts with empty queues): a page
    // that was waiting for a quick match queues again instead of showing an idle lobby.
    request({ type: "quick_match", game: wasQueued.game }, { requeue: wasQueued });
  }
  request({ type: "list_games" });
  request({ type: "list_rooms" });
  if (app.screen === "name") app.screen = "lobby";
  const link = app.link;
  if (link.room && !mine.has(link.room)) {
    // Back after a lost connection or a server restart, without our seat: try the room
    // again; if it is gone, the lobby says so (onError).
    app.lostRoom = app.reconnected && app.current === link.room ? link.room : null;
    app.current = null;
    request({ type: "join", room: link.room, role: link.watch ? "spectator" : "player" }, { room: link.room, link: true });
  } else if (link.room) {
    app.current = link.room;
    app.screen = "room";
  } else if (app.current && !mine.has(app.current)) {
    app.current = null;
  }
  app.reconnected = false;
  render();
}

function onJoined(f, asked) {
  let room = app.rooms.get(f.room);
  if (!room) {
    room = newRoom(f.room);
    app.rooms.set(f.room, room);
  }
  if (room.seat !== f.seat || room.role !== f.role) {
    room.view = null; // a rematch swapped the seats: wait for the new game's state
    room.ui = {};
  }
  Object.assign(room, { game: f.game, role: f.role, seat: f.seat, info: f.info });
  if (asked?.bot) room.botLevel = asked.bot; // the joined frame comes before the bot sits down
  if (asked || app.queued || app.current == null || app.current === f.room) {
    app.queued = null;
    app.current = f.room;
    app.screen = "room";
    room.note = "";
    writeLink(room);
  }
  render();
}

function onState(f) {
  const room = app.rooms.get(f.room);
  if (!room) return;
  if (room.view && room.view.ply !== f.view.ply) room.ui.selected = null;
  if (room.view && room.view.round !== f.view.round) room.ui = {};
  const fresh = f.seq > (room.seq ?? 0); // the same seq again (resume, stale_ply) is no news
  if (f.view.ply === 0 && fresh) {
    room.moves = []; // a new game (a rematch): a new list
    room.roundEnd = null;
  }
  Object.assign(room, { view: f.view, legal: f.legal, text: f.text, seq: f.seq, game: f.view.game });
  if (fresh) {
    noteEvents(room, f);
    saveMoves(room);
  }
  // The frame that ends a game names its record (null: the server keeps none); the record
  // is committed before that frame leaves the server, so the link works at once.
  room.gameLink = f.view.outcome && f.game_id ? `/games/${encodeURIComponent(f.game_id)}` : null;
  room.clockEnd = f.clock_ms != null ? performance.now() + f.clock_ms : null;
  if (room.info) {
    room.info = { ...room.info, status: f.view.outcome ? "finished" : "playing" };
    // The server sends no `room` frame when the second player sits down: a public room's
    // listing has the opponent's name; a private room's opponent stays "Opponent".
    if (room.info.players.length < 2 && room.info.public && !room.askedNames) {
      room.askedNames = true;
      request({ type: "list_rooms" });
    }
  }
  if (f.id != null) room.error = "";
  setBusy(room, false);
  render();
}

/** The frame's events in words with names: the line under the board, the move list, and
 * the end of a round held on screen. */
function noteEvents(room, f) {
  const renderer = rendererFor(f.view.game);
  const ctx = contextFor(room);
  const said = [];
  const events = f.view.events ?? [];
  if (/clock ran out|ran out of time/.test(f.text ?? "") && events.length && events[0].seat != null) {
    said.push(`${possessive(ctx.who(events[0].seat))} clock ran out`);
  }
  for (const e of events) {
    if (e.kind === "game_ended") continue; // the outcome box says it
    const text = renderer.describe?.(e, ctx);
    if (!text) continue;
    said.push(text);
    const last = room.moves[room.moves.length - 1];
    // A draw and its place or pass are one turn: one line.
    if (last && last.kind === "drew" && last.seat === e.seat && (e.kind === "placed" || e.kind === "passed")) room.moves.pop();
    room.moves.push({ ply: f.view.ply, seat: e.seat ?? null, kind: e.kind, text: capitalize(text, ctx.names) });
    if (e.kind === "round_ended" && !f.view.outcome) {
      room.roundEnd = { result: e, ply: f.view.ply };
      clearTimeout(room.roundEndTimer);
      if (room.botLevel || room.info?.players.some((p) => p.bot)) {
        room.roundEndTimer = setTimeout(() => continueRound(room), app.roundHoldMs ?? BOT_ROUND_HOLD_MS);
      }
    }
  }
  room.said = said.length ? said.join("; ") : nameSeats(f.text ?? "", room);
}

function continueRound(room) {
  clearTimeout(room.roundEndTimer);
  room.roundEnd = null;
  render();
}

/** The first letter up ("round 1 over" -> "Round 1 over"), unless the text starts with a
 * player's name: that is shown as its player wrote it ("ann took ...", not "Ann took ..."). */
function capitalize(text, names = []) {
  if (names.some((name) => name && text.startsWith(name))) return text;
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function possessive(name) {
  return name === "You" ? "Your" : `${name}'s`;
}

/** A server text with "seat 1" / "opponent" in it, with the names instead. */
function nameSeats(text, room) {
  const names = namesOf(room);
  let out = text.replace(/\bseat ([01])\b/g, (_, s) => names[Number(s)]);
  if (room.seat != null) out = out.replace(/\bopponent\b/g, names[1 - room.seat]);
  return out;
}

/** What changed between two room infos, in words with names ("Bob joined"). */
function roomNews(room, before, f) {
  const after = f.info;
  const name = (p) => p.name || `Seat ${p.seat}`;
  const news = [];
  for (const p of after.players) {
    const old = before?.players.find((x) => x.seat === p.seat);
    if (!old) news.push(`${name(p)} joined`);
    else if (old.connected && !p.connected) news.push(`${name(p)} disconnected`);
    else if (!old.connected && p.connected) news.push(`${name(p)} is back`);
  }
  for (const p of before?.players ?? []) {
    if (!after.players.some((x) => x.seat === p.seat)) news.push(`${name(p)} left`);
  }
  for (const s of f.rematch) {
    if (!room.rematch.includes(s)) {
      const p = after.players.find((x) => x.seat === s);
      news.push(`${p ? name(p) : `Seat ${s}`} asks for a rematch`);
    }
  }
  return news.length ? news.join("; ") : nameSeats(f.text ?? "", { ...room, info: after });
}

function onRoomUpdate(f) {
  const room = app.rooms.get(f.room);
  if (!room) return;
  const news = roomNews(room, room.info, f);
  room.info = f.info;
  room.rematch = f.rematch;
  room.note = news;
  room.said = "";
  const now = performance.now();
  room.forfeitEnd = Object.fromEntries(Object.entries(f.forfeit_ms).map(([s, ms]) => [s, now + ms]));
  render();
}

function onError(f, asked) {
  if (f.fatal) {
    app.lastError = f.code;
    return;
  }
  const words = ERROR_WORDS[f.code];
  const text = words ? (words.endsWith(":") ? `${words} ${f.message}` : words) : f.message;
  if (asked?.requeue && f.code === "already_queued") {
    app.queued = asked.requeue; // the server kept the queue after all: still waiting
    render();
    return;
  }
  if (asked?.link && f.code === "unknown_room" && app.lostRoom === asked.room) {
    app.lostRoom = null;
    writeLink(null);
    app.screen = "lobby";
    showLobbyError(`Room ${asked.room} is gone: the server restarted or closed it, and the game could not be resumed.`);
    render();
    return;
  }
  if (asked?.link) {
    if (f.code === "room_full") {
      request({ type: "join", room: asked.room, role: "spectator" }, { room: asked.room, link: true });
      return;
    }
    writeLink(null);
    app.screen = "lobby";
  }
  const room = app.rooms.get(f.room ?? asked?.room ?? "");
  if (room) {
    setBusy(room, false);
    if (f.code === "stale_ply") return; // the current state follows at once
    room.error = text;
    render();
    return;
  }
  showLobbyError(text);
}

function setBusy(room, busy) {
  clearTimeout(room.busyTimer);
  room.busy = busy;
  if (busy) {
    room.busyTimer = setTimeout(() => {
      room.busy = false;
      render();
    }, MOVE_TIMEOUT_MS);
  }
}

// -- actions -------------------------------------------------------------------------------

function sendMove(room, move) {
  if (room.busy || !room.view) return;
  const id = request({ type: "move", room: room.code, ply: room.view.ply, move }, { room: room.code });
  if (id == null) return;
  flash(null); // the key hint that led here is done
  room.error = "";
  room.ui.selected = null;
  setBusy(room, true);
  render();
}

function goLobby() {
  refreshRecent();
  app.current = null;
  app.screen = "lobby";
  writeLink(null);
  request({ type: "list_rooms" });
  render();
}

function joinRoom(code, role) {
  request({ type: "join", room: code, role }, { room: code });
}

/** A button that asks to be clicked twice within a few seconds for a drastic action. */
function armed(button, question, action) {
  if (button.dataset.armed === "1") {
    delete button.dataset.armed;
    action();
    return;
  }
  const label = button.textContent;
  button.dataset.armed = "1";
  button.textContent = question;
  setTimeout(() => {
    if (button.dataset.armed === "1") {
      delete button.dataset.armed;
      button.textContent = label;
    }
  }, 4000);
}

let flashTimer = null;
/** A short hint in the error line; `flash(null)` takes the current one away. */
function flash(text) {
  const room = app.current && app.rooms.get(app.current);
  const el = room ? $("#room-error") : $("#lobby-error");
  if (text == null) {
    clearTimeout(flashTimer);
    if (el.classList.contains("hint")) {
      el.classList.remove("hint");
      el.textContent = "";
      show(el, false);
    }
    return true;
  }
  el.textContent = text;
  el.classList.add("hint");
  show(el);
  clearTimeout(flashTimer);
  flashTimer = setTimeout(() => {
    el.classList.remove("hint");
    render();
  }, 2500);
  return true;
}

function showLobbyError(text) {
  const el = $("#lobby-error");
  el.classList.remove("hint");
  el.textContent = text;
  show(el, Boolean(text));
}

// -- the create form, built from the game's options schema ----------------------------------

function selectedGame() {
  const name = $("#game-select").value || "stacko";
  return app.games.find((g) => g.game === name) ?? app.games[0];
}

/** A JSON Schema property -> {kind, nullable, min, max, enum, default}. */
function describeOption(prop) {
  const alts = prop.anyOf ?? [prop];
  const base = alts.find((a) => a.type && a.type !== "null") ?? {};
  return {
    kind: base.enum ? "enum" : base.type === "string" && prop.enum ? "enum" : base.type,
    nullable: alts.some((a) => a.type === "null"),
    min: base.minimum,
    max: base.maximum,
    enum: base.enum ?? prop.enum,
    default: prop.default,
  };
}

function buildCreateForm() {
  const select = $("#game-select");
  const previous = select.value;
  select.replaceChildren(...app.games.map((g) => h("option", { value: g.game }, g.title)));
  if (previous && app.games.some((g) => g.game === previous)) select.value = previous;
  show($("#game-field"), app.games.length > 1);
  buildOptions();
}

function buildOptions() {
  const game = selectedGame();
  const box = $("#options-fields");
  const fields = [h("legend", {}, "Options")];
  const preset = app.link.options ?? {};
  for (const [key, prop] of Object.entries(game?.options?.properties ?? {})) {
    const o = describeOption(prop);
    const id = `opt-${key}`;
    const isClock = key.endsWith("_ms");
    const scale = isClock ? 1000 : 1;
    const start = key in preset ? preset[key] : o.default;
    let input;
    if (o.kind === "boolean") {
      input = h("input", { type: "checkbox", id, name: key, checked: Boolean(start) });
    } else if (o.kind === "enum") {
      input = h("select", { id, name: key }, o.enum.map((v) => h("option", { value: v, selected: v === start }, v)));
    } else if (o.kind === "integer") {
      input = h("input", {
        type: "number", id, name: key, step: 1, inputmode: "numeric",
        min: o.min != null ? Math.ceil(o.min / scale) : null,
        max: o.max != null ? Math.floor(o.max / scale) : null,
        value: start == null ? "" : String(start / scale),
        placeholder: o.nullable ? "none" : null,
      });
    } else {
      input = h("input", { type: "text", id, name: key, value: start ?? "" });
    }
    input.dataset.option = key;
    input.dataset.scale = String(scale);
    input.dataset.nullable = o.nullable ? "1" : "";
    const label = OPTION_LABELS[key] ?? prop.title ?? key;
    const hint = o.nullable && o.kind === "integer" ? " (empty: none)" : "";
    fields.push(h("div", { class: `field${o.kind === "boolean" ? " check" : ""}` }, h("label", { for: id }, label + hint), input));
  }
  box.replaceChildren(...fields);
  const bots = game?.bots ?? [];
  const botSelect = $("#bot-select");
  botSelect.replaceChildren(...(bots.length ? bots.map((b) => h("option", { value: b }, b)) : [h("option", { value: "" }, "none available")]));
  botSelect.disabled = bots.length === 0;
  $("#bot-btn").disabled = bots.length === 0;
  show($("#bot-note"), bots.length === 0);
}

function readOptions() {
  const options = {};
  for (const input of $("#options-fields").querySelectorAll("[data-option]")) {
    const key = input.dataset.option;
    if (input.type === "checkbox") options[key] = input.checked;
    else if (input.type === "number") {
      if (input.value === "") {
        if (input.dataset.nullable) options[key] = null;
      } else options[key] = Math.round(Number(input.value) * Number(input.dataset.scale));
    } else options[key] = input.value;
  }
  return options;
}

function createRoom(bot) {
  const form = $("#create-form");
  if (!form.reportValidity()) return;
  const game = selectedGame()?.game ?? "stacko";
  const message = { type: "create_room", game, public: bot ? false : $("#public-check").checked, options: readOptions() };
  if (bot) message.bot = bot;
  showLobbyError("");
  request(message, { bot });
}

// -- rendering -------------------------------------------------------------------------------

function render() {
  const online = app.status === "online";
  if (app.screen === "room" && !app.rooms.get(app.current) && online && !app.link.room) app.screen = "lobby";
  for (const s of ["name", "lobby", "room"]) show($(`#screen-${s}`), app.screen === s);
  const name = localStorage.getItem(NAME_KEY);
  show($("#who"), Boolean(name) && app.screen !== "name");
  $("#who-name").textContent = name ?? "";
  $("#who-name").title = name ?? ""; // the full name where a phone cuts it short
  if (app.screen === "lobby") renderLobby();
  if (app.screen === "room") renderRoom();
}

function renderLobby() {
  const mine = [...app.rooms.values()];
  show($("#my-games"), mine.length > 0);
  replaceChildren(
    $("#my-games-list"),
    mine.map((r) =>
      h(
        "li",
        {},
        h("span", { class: "code" }, r.code), " ",
        r.role === "spectator" ? "watching" : r.info?.status ?? "", " ",
        h("button", { type: "button", class: "small", dataset: { focus: `open-${r.code}` }, onclick: () => {
          app.current = r.code;
          app.screen = "room";
          writeLink(r);
          render();
        } }, "Open"),
      ),
    ),
  );
  const q = app.queued;
  show($("#queue-status"), Boolean(q));
  show($("#cancel-queue-btn"), Boolean(q));
  $("#queue-status").textContent = q ? "Waiting for an opponent for a quick match…" : "";
  $("#quick-btn").disabled = Boolean(q);
  renderRoomsTable();
  renderRecent();
}

function describeRoomOptions(info) {
  const o = info.options ?? {};
  const parts = [];
  if (o.tower != null) parts.push(`tower ${o.tower}`);
  if (o.rounds != null) parts.push(`${o.rounds} round${o.rounds === 1 ? "" : "s"}`);
  if (o.variant != null) parts.push(o.variant);
  if (info.clock_ms != null) parts.push(`${Math.round(info.clock_ms / 1000)} s/move`);
  return parts.join(" · ");
}

function renderRoomsTable() {
  const rows = app.openRooms.map((info) => {
    const seats = [0, 1].map((s) => info.players.find((p) => p.seat === s));
    const names = seats.map((p) => (p ? p.name : "(open seat)")).join(" vs ");
    const open = seats.some((p) => !p) && info.status === "waiting";
    const mine = app.rooms.has(info.room);
    return h(
      "tr",
      { dataset: { room: info.room } },
      h("td", {}, h("span", { class: "code" }, info.room), h("div", { class: "note" }, describeRoomOptions(info))),
      h("td", {}, names),
      h("td", {}, info.status),
      h(
        "td",
        { class: "row-actions" },
        open && !mine
          ? h("button", { type: "button", class: "small", "aria-label": `Join room ${info.room}`, onclick: () => joinRoom(info.room, "player") }, "Join")
          : null,
        !mine
          ? h("button", { type: "button", class: "small", "aria-label": `Watch room ${info.room}`, onclick: () => joinRoom(info.room, "spectator") }, "Watch")
          : null,
      ),
    );
  });
  replaceChildren($("#rooms-table tbody"), rows);
  show($("#rooms-table"), rows.length > 0);
  show($("#rooms-empty"), rows.length === 0);
}

function namesOf(room) {
  const names = [0, 1].map((s) => (room.seat == null ? `Seat ${s}` : s === room.seat ? "You" : "Opponent"));
  if (room.botLevel && room.seat != null) names[1 - room.seat] = `Bot (${room.botLevel})`;
  for (const p of room.info?.players ?? []) if (p.name) names[p.seat] = p.name;
  return names;
}

function contextFor(room) {
  return {
    view: room.view,
    legal: room.legal,
    seat: room.seat,
    names: namesOf(room),
    who: (s) => (s === room.seat ? "You" : namesOf(room)[s]),
    busy: room.busy || app.status !== "online",
    ui: room.ui,
    move: (m) => sendMove(room, m),
    hint: (text) => flash(text),
    rerender: () => renderRoom(),
  };
}

function outcomeText(room) {
  const o = room.view?.outcome;
  if (!o) return "";
  const names = namesOf(room);
  const me = room.seat;
  const how = TERMINATION_WORDS[o.termination] ?? o.termination;
  let headline;
  if (o.winner == null) headline = "Draw";
  else if (me == null) headline = `${names[o.winner]} won`;
  else headline = o.winner === me ? "You won!" : "You lost";
  const order = me == null ? [0, 1] : [me, 1 - me];
  const label = (s) => (me == null ? names[s] : s === me ? "You" : names[s]);
  const score = `${label(order[0])} ${o.scores[order[0]]} – ${o.scores[order[1]]} ${label(order[1])}`;
  return { headline, detail: how ? `${score} (${how})` : score };
}

function renderRoom() {
  const room = app.rooms.get(app.current);
  if (!room) {
    $("#room-code").textContent = app.link.room ?? "";
    $("#turn").textContent = app.status === "online" ? "Joining…" : "Connecting…";
    replaceChildren($("#board"));
    return;
  }
  const info = room.info;
  const status = info?.status ?? "waiting";
  const player = room.role === "player";
  const over = Boolean(room.view?.outcome);
  $("#room-code").textContent = room.code;
  const rulesLink = $("#rules-link");
  const game = room.game ?? info?.game ?? "stacko";
  const variant = info?.options?.variant;
  rulesLink.href = `rules-${game === "stakko" ? "stakko" : "stacko"}.html${variant && variant !== "basic" ? `#${variant}` : ""}`;
  // "Rules" stays on a phone; the rest is dropped there to keep the room's head on one line.
  rulesLink.replaceChildren(
    "Rules",
    h("span", { class: "rules-of" }, ` of ${rendererFor(game).title ?? "the game"}${variant && variant !== "basic" ? ` (${variant})` : ""}`),
  );
  replaceChildren($("#key-help"), rendererFor(game).help?.() ?? []);
  $("#room-kind").textContent = [
    info?.public ? "public" : "private",
    room.role === "spectator" ? "you are watching" : "",
    info ? describeRoomOptions(info) : "",
  ].filter(Boolean).join(" · ");
  show($("#share"), player && status === "waiting");
  $("#share-link").value = shareUrl(room.code);

  // players
  const names = namesOf(room);
  const now = performance.now();
  replaceChildren(
    $("#players"),
    [0, 1].map((s) => {
      const p = info?.players.find((x) => x.seat === s);
      const turn = room.view && !over && room.view.to_move === s;
      const forfeit = room.forfeitEnd[String(s)];
      return h(
        "li",
        { class: `player${turn ? " to-move" : ""}${p && !p.connected ? " gone" : ""}`, dataset: { seat: String(s) } },
        h("span", { class: `dot${(p ? p.connected : room.view) ? " on" : ""}`, "aria-hidden": "true" }),
        h("strong", { class: "name", title: p?.name || null }, p || room.view ? names[s] : "waiting for a player…"),
        s === room.seat ? h("span", { class: "tag" }, "you") : null,
        p?.account ? h("span", { class: "tag account" }, p.account === "bot" ? "bot account" : "account") : null,
        p?.bot || (!p && room.botLevel && s !== room.seat) ? h("span", { class: "tag" }, `bot: ${p?.bot ?? room.botLevel}`) : null,
        p && !p.connected ? h("span", { class: "tag warn", dataset: { forfeit: String(s) } }, forfeitText(forfeit, now)) : null,
        room.rematch.includes(s) ? h("span", { class: "tag" }, "wants a rematch") : null,
      );
    }),
    info?.spectators ? h("li", { class: "spectators" }, `${info.spectators} watching`) : null,
  );

  // turn line, clock, board
  const renderer = rendererFor(room.game);
  const board = $("#board");
  renderRoundEnd(room, renderer);
  show(board, !room.roundEnd);
  renderMoves(room);
  if (room.view) {
    const ctx = contextFor(room);
    const p = renderer.prompt(ctx);
    const turn = $("#turn");
    turn.replaceChildren(p.text, p.round ? h("span", { class: "round" }, p.round) : "");
    turn.classList.toggle("mine", Boolean(p.mine));
    replaceChildren(board, renderer.render(board, ctx));
    board.classList.toggle("busy", ctx.busy);
    replaceChildren($("#scores"), renderer.scores(ctx));
  } else {
    $("#turn").textContent = status === "waiting" ? "Waiting for an opponent…" : "Starting…";
    $("#turn").classList.remove("mine");
    replaceChildren(board);
    replaceChildren($("#scores"));
  }
  tickClock();
  const said = room.said || room.note || "";
  $("#event-text").textContent = capitalize(said, namesOf(room));
  const err = $("#room-error");
  if (!err.classList.contains("hint")) {
    err.textContent = room.error ?? "";
    show(err, Boolean(room.error));
  }

  // outcome and buttons
  const out = outcomeText(room);
  show($("#outcome"), Boolean(out));
  if (out) $("#outcome").replaceChildren(h("strong", {}, out.headline), " ", out.detail);
  renderRating(room.code);
  show($("#game-link-line"), Boolean(out && room.gameLink));
  if (room.gameLink) $("#game-link").href = room.gameLink;
  const opponentHere = info?.players.length === 2 || Boolean(room.botLevel);
  const rematch = $("#rematch-btn");
  show(rematch, player && over);
  const asked = room.rematch.includes(room.seat);
  const theyAsked = room.rematch.includes(1 - room.seat);
  rematch.disabled = asked || !opponentHere || app.status !== "online";
  rematch.textContent = asked ? "Rematch asked…" : theyAsked ? "Accept rematch" : "Rematch";
  show($("#resign-btn"), player && status === "playing" && !over);
}

function renderRoundEnd(room, renderer) {
  const held = room.roundEnd;
  show($("#round-end"), Boolean(held));
  if (!held) return;
  const r = held.result;
  const ctx = contextFor(room);
  const order = room.seat == null ? [0, 1] : [room.seat, 1 - room.seat];
  $("#round-end-title").textContent = `Round ${r.round} is over`;
  const how = r.finisher == null ? "Nobody finished (turn cap)." : `${ctx.who(r.finisher)} finished the tower.`;
  $("#round-end-score").textContent = `${how} ${order.map((s) => `${ctx.who(s)} ${r.scores[s]}`).join(" – ")}`;
  replaceChildren($("#round-end-towers"), renderer.roundEnd ? renderer.roundEnd(r, ctx) : null);
  const bot = room.botLevel || room.info?.players.some((p) => p.bot);
  $("#continue-btn").textContent = bot ? "Continue (the game goes on in a few seconds)" : "Continue";
}

function renderMoves(room) {
  const items = room.moves.map((m) =>
    h("li", { class: m.seat == null ? "system" : `by-${m.seat}`, dataset: { seat: m.seat == null ? "" : String(m.seat) } }, m.text),
  );
  const list = $("#move-list");
  const atEnd = list.scrollTop + list.clientHeight >= list.scrollHeight - 4;
  replaceChildren(list, items);
  if (atEnd) list.scrollTop = list.scrollHeight;
  show($("#moves-empty"), items.length === 0);
}

// -- records (GET /api/games...): recent games on the lobby, a finished game's page ------------

const GAMES_API = "/api/games";

async function fetchRecent() {
  try {
    const response = await fetch(`${GAMES_API}?limit=20`, { headers: { Accept: "application/json" } });
    if (!response.ok) return null;
    const data = await response.json();
    return Array.isArray(data.games) ? data.games : null;
  } catch {
    return null; // a server without records: no list
  }
}

async function refreshRecent() {
  const games = await fetchRecent();
  app.recent = games;
  renderRecent();
}

function renderRecent() {
  const games = app.recent;
  show($("#recent"), Boolean(games && games.length));
  if (!games) return;
  replaceChildren(
    $("#recent-list"),
    games.map((g) => {
      const names = [0, 1].map((s) => g.players?.find((p) => p.seat === s)?.name ?? `Seat ${s}`);
      const r = g.result ?? {};
      const score = Array.isArray(r.scores) ? ` ${r.scores[0]}:${r.scores[1]}` : "";
      const how = r.termination && r.termination !== "completed" ? TERMINATION_WORDS[r.termination] ?? r.termination : "";
      const said = /^(by|on) /.test(how) ? ` ${how}` : how ? ` (${how})` : ""; // "won by resignation", "draw (the turn cap was reached)"
      const won = `${r.winner == null ? "draw" : `${names[r.winner]} won`}${said}`;
      return h(
        "li",
        { dataset: { game: String(g.id) } },
        h("a", { href: `/games/${encodeURIComponent(g.id)}` }, `${names[0]} vs ${names[1]}`),
        h("span", { class: "note" }, ` · ${g.game}${g.variant && g.variant !== "basic" ? ` (${g.variant})` : ""} · ${won}${score} · ${g.plies ?? "?"} moves`),
      );
    }),
  );
}

function forfeitText(end, now) {
  if (end == null) return "disconnected";
  return `disconnected · forfeits in ${formatClock(end - now)}`;
}

function tickClock() {
  const room = app.screen === "room" ? app.rooms.get(app.current) : null;
  const clock = $("#clock");
  const v = room?.view;
  if (!room || !v || v.outcome || room.clockEnd == null) {
    show(clock, false);
    return;
  }
  const left = room.clockEnd - performance.now();
  const whose = room.seat == null ? namesOf(room)[v.to_move] : v.to_move === room.seat ? "Your" : "Opponent's";
  clock.textContent = `${whose === "Your" || whose === "Opponent's" ? whose : `${whose}'s`} clock ${formatClock(left)}`;
  clock.classList.toggle("low", left < 10000);
  show(clock);
  const now = performance.now();
  for (const el of document.querySelectorAll("[data-forfeit]")) {
    el.textContent = forfeitText(room.forfeitEnd[el.dataset.forfeit], now);
  }
}

// -- wiring -----------------------------------------------------------------------------------

function enter(name) {
  localStorage.setItem(NAME_KEY, name);
  if (app.status === "online") {
    conn.reconnect(); // the same session under its new name
    app.screen = app.current ? "room" : "lobby";
  } else {
    conn.connect();
  }
  render();
}

function wire() {
  wireAccounts({ enter, request });
  $("#name-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const name = $("#name-input").value.trim();
    if (name) enter(name.slice(0, 32));
  });
  $("#change-name").addEventListener("click", () => {
    $("#name-input").value = localStorage.getItem(NAME_KEY) ?? "";
    app.screen = "name";
    render();
    $("#name-input").focus();
  });
  $("#home-link").addEventListener("click", (e) => {
    e.preventDefault();
    if (app.status === "online" || app.screen === "room") goLobby();
  });
  $("#game-select").addEventListener("change", buildOptions);
  $("#create-form").addEventListener("submit", (e) => {
    e.preventDefault();
    createRoom(null);
  });
  $("#bot-btn").addEventListener("click", () => createRoom($("#bot-select").value));
  $("#quick-btn").addEventListener("click", () => {
    showLobbyError("");
    request({ type: "quick_match", game: selectedGame()?.game ?? "stacko" });
  });
  $("#cancel-queue-btn").addEventListener("click", () => request({ type: "cancel_match" }));
  $("#refresh-btn").addEventListener("click", () => request({ type: "list_rooms" }));
  $("#join-form").addEventListener("submit", (e) => {
    e.preventDefault();
    joinRoom($("#join-code").value.trim().toUpperCase(), "player");
  });
  $("#watch-btn").addEventListener("click", () => {
    const code = $("#join-code").value.trim().toUpperCase();
    if ($("#join-form").reportValidity()) joinRoom(code, "spectator");
  });
  const copy = async () => {
    const input = $("#share-link");
    input.value = shareUrl(app.current);
    try {
      await navigator.clipboard.writeText(input.value);
      flash("Link copied.");
    } catch {
      show($("#share"));
      input.select();
      flash("Copy the selected link.");
    }
  };
  $("#copy-link").addEventListener("click", copy);
  $("#copy-link-2").addEventListener("click", copy);
  $("#continue-btn").addEventListener("click", () => {
    const room = app.rooms.get(app.current);
    if (room) continueRound(room);
  });
  $("#rematch-btn").addEventListener("click", () => request({ type: "rematch", room: app.current }, { room: app.current }));
  $("#resign-btn").addEventListener("click", (e) =>
    armed(e.currentTarget, "Really resign?", () => request({ type: "resign", room: app.current }, { room: app.current })),
  );
  $("#leave-btn").addEventListener("click", (e) => {
    const room = app.rooms.get(app.current);
    const leave = () => {
      if (room) request({ type: "leave", room: room.code }, { room: room.code });
      else goLobby();
    };
    const playing = room?.role === "player" && room.info?.status === "playing" && !room.view?.outcome;
    if (playing) armed(e.currentTarget, "Leave and lose the game?", leave);
    else leave();
  });
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || app.screen !== "room") return;
    if (e.target.closest?.("input, select, textarea")) return;
    const room = app.rooms.get(app.current);
    if (!room?.view) return;
    if (room.roundEnd) {
      if (e.key === "Enter" || e.key === " " || e.key === "Escape") {
        e.preventDefault();
        continueRound(room);
      }
      return;
    }
    if (rendererFor(room.game).key(e.key, contextFor(room))) e.preventDefault();
  });
  window.addEventListener("hashchange", () => {
    const link = readLink();
    if (!link.room || link.room === app.current) return;
    app.link = link;
    if (app.rooms.has(link.room)) {
      app.current = link.room;
      app.screen = "room";
      render();
    } else if (app.status === "online") {
      request({ type: "join", room: link.room, role: link.watch ? "spectator" : "player" }, { room: link.room, link: true });
    }
  });
  setInterval(tickClock, 250);
  setInterval(() => {
    if (app.screen === "lobby" && app.status === "online" && !document.hidden) request({ type: "list_rooms" });
  }, ROOMS_REFRESH_MS);
}

function start() {
  wire();
  if (app.link.room) writeLink({ code: app.link.room, role: app.link.watch ? "spectator" : "player" });
  const name = localStorage.getItem(NAME_KEY);
  if (name) {
    app.screen = app.link.room ? "room" : "lobby";
    conn.connect();
  } else {
    app.screen = "name"; // nothing tried yet: no connection status to show
    app.status = "idle";
  }
  refreshRecent();
  render();
  if (app.screen === "name") $("#name-input").focus();
  window.stackoApp = app; // for the browser tests and the curious
}

start();
