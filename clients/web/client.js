// A client of the Stacko server (protocol version 1, PROTOCOL.md) for browsers and Node.
//
// One ES module, no build step, no dependency in a browser. In Node it uses the built-in
// WebSocket (Node 22 and later) or else the `ws` package from npm (Node 20: `npm install ws`).
//
//   import { Client } from "./client.js";
//   const client = new Client({ url: "ws://127.0.0.1:8765/", name: "Ann" });
//   client.onFrame = (frame) => { ... };        // every frame from the server
//   await client.connect();                      // resolves with the welcome frame
//   const joined = await client.request({ type: "quick_match", game: "stacko" });
//
// It keeps the session token and, when the connection drops or the server restarts (close
// code 1012), reconnects by itself with growing, jittered delays and resumes the session with
// the token. `request` matches the answer by request id; an `error` answer rejects.

export const PROTOCOL = 1;

/** Delays before the 1st, 2nd, ... reconnection attempt (ms); the last one repeats. */
export const RETRY_MS = [250, 500, 1000, 2000, 4000, 8000];

/** Fatal errors after which reconnecting on our own would only make things worse. */
export const NO_RETRY = new Set(["session_replaced", "unsupported_version"]);

/** Close code of a server that is restarting (RFC 6455 "Service Restart"). */
export const SERVICE_RESTART = 1012;

const OPEN = 1;

/** The WebSocket class: the global one (browsers, Node 22+), else the `ws` package. */
export async function webSocketClass() {
  if (typeof globalThis.WebSocket === "function") return globalThis.WebSocket;
  try {
    const ws = await import("ws");
    return ws.WebSocket ?? ws.default;
  } catch {
    throw new Error("no WebSocket: use Node 22 or later, or `npm install ws`");
  }
}

/** An `error` frame answering a request, as a rejection. */
export class ServerError extends Error {
  constructor(frame) {
    super(`${frame.code}: ${frame.message ?? ""}`);
    this.name = "ServerError";
    this.code = frame.code;
    this.frame = frame;
  }
}

export class Client {
  /**
   * @param {object} o
   * @param {string} o.url                    ws://host:port/
   * @param {string | (() => string)} o.name  the player's name, read at every hello
   * @param {{get(): string|null, set(token: string): void}} [o.tokenStore]
   *   where the session token lives (default: in this object only)
   * @param {typeof WebSocket} [o.WebSocket]  a WebSocket class (default: webSocketClass())
   * @param {boolean} [o.reconnect]          reconnect by itself when the connection drops (default true)
   * @param {() => string|null} [o.account]   an account token for hello (PROTOCOL.md "Accounts")
   */
  constructor({ url, name, tokenStore, WebSocket, reconnect = true, account }) {
    this.url = url;
    this.name = typeof name === "function" ? name : () => name;
    this.account = account ?? (() => null);
    let token = null;
    this.tokenStore = tokenStore ?? { get: () => token, set: (t) => { token = t; } };
    this.WebSocketClass = WebSocket ?? null;
    this.autoReconnect = reconnect;
    /** Every frame from the server. */
    this.onFrame = () => {};
    /** "connecting" | "online" | "reconnecting" | "stopped", with a fatal error code or close code. */
    this.onStatus = () => {};
    this.ws = null;
    this.online = false;
    this.attempt = 0;
    this.nextId = 1;
    this.retryTimer = null;
    this.stopped = false;
    this.lastFatal = null;
    this.lastClose = null;
    this.waiting = new Map(); // request id -> {resolve, reject}
    this.welcomed = [];
  }

  get token() {
    return this.tokenStore.get();
  }

  /** Open the connection (again); resolves with the next welcome frame. */
  connect() {
    const welcome = new Promise((resolve, reject) => this.welcomed.push({ resolve, reject }));
    this._open();
    return welcome;
  }

  async _open() {
    clearTimeout(this.retryTimer);
    this.stopped = false;
    this.lastFatal = null;
    if (this.ws) this.ws.onclose = this.ws.onmessage = this.ws.onopen = this.ws.onerror = null;
    try {
      this.ws?.close();
    } catch {
      // already closed
    }
    this.ws = null;
    this._status(this.attempt ? "reconnecting" : "connecting");
    let ws;
    try {
      const WS = this.WebSocketClass ?? (this.WebSocketClass = await webSocketClass());
      ws = new WS(this.url);
    } catch (error) {
      // No WebSocket at all, or a URL it refuses: nothing to retry.
      for (const w of this.welcomed.splice(0)) w.reject(error);
      this._status("stopped", String(error?.message ?? error));
      return;
    }
    this.ws = ws;
    ws.onopen = () => {
      const hello = { type: "hello", protocol: PROTOCOL, name: this.name() };
      const token = this.token;
      if (token) hello.token = token;
      const account = this.account();
      if (account) hello.account = account;
      ws.send(JSON.stringify(hello));
    };
    ws.onmessage = (event) => {
      if (this.ws !== ws) return;
      let frame;
      try {
        frame = JSON.parse(typeof event.data === "string" ? event.data : String(event.data));
      } catch {
        return;
      }
      this._frame(frame);
    };
    ws.onerror = () => {}; // a close follows
    ws.onclose = (event) => this._closed(ws, event?.code);
  }

  _frame(frame) {
    if (frame.type === "welcome") {
      this.tokenStore.set(frame.session);
      this.online = true;
      this.attempt = 0;
      this._status("online");
      for (const w of this.welcomed.splice(0)) w.resolve(frame);
    } else if (frame.type === "error" && frame.fatal) {
      this.lastFatal = frame.code;
    }
    const waiter = frame.id != null ? this.waiting.get(frame.id) : undefined;
    if (waiter) {
      this.waiting.delete(frame.id);
      if (frame.type === "error") waiter.reject(new ServerError(frame));
      else waiter.resolve(frame);
    }
    this.onFrame(frame);
  }

  _closed(ws, code) {
    if (this.ws !== ws) return;
    this.ws = null;
    this.online = false;
    this.lastClose = code ?? null;
    for (const w of this.waiting.values()) w.reject(new Error("connection closed"));
    this.waiting.clear();
    if (this.stopped || !this.autoReconnect || NO_RETRY.has(this.lastFatal)) {
      const why = this.lastFatal ?? (this.stopped ? undefined : code);
      for (const w of this.welcomed.splice(0)) w.reject(new Error(`connection closed (${why ?? code})`));
      this._status("stopped", why);
      return;
    }
    // A restarting server (1012) comes back soon: start at the shortest delay.
    if (code === SERVICE_RESTART) this.attempt = Math.min(this.attempt, 1);
    const base = RETRY_MS[Math.min(this.attempt, RETRY_MS.length - 1)];
    this.attempt += 1;
    this._status("reconnecting", code);
    this.retryTimer = setTimeout(() => this._open(), base + Math.random() * base * 0.5);
  }

  _status(status, detail) {
    this.status = status;
    this.onStatus(status, detail);
  }

  /** Reconnect now (a new name, or taking the session back from another tab). */
  reconnect() {
    this.attempt = 0;
    this._open();
  }

  /** Close for good: no reconnection. */
  stop() {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    try {
      this.ws?.close(1000);
    } catch {
      // not open yet
    }
  }

  /** Send a message with a fresh request id; returns the id, or null when offline (nothing is queued). */
  send(message) {
    if (!this.online || !this.ws || this.ws.readyState !== OPEN) return null;
    const id = this.nextId++;
    this.ws.send(JSON.stringify({ ...message, id }));
    return id;
  }

  /** Send a message; resolves with the frame that answers it (same id), rejects on an `error` answer. */
  request(message) {
    const id = this.send(message);
    if (id == null) return Promise.reject(new Error("not connected"));
    return new Promise((resolve, reject) => this.waiting.set(id, { resolve, reject }));
  }

  /** Play `move` at `ply` in `room` (the ply of the state frame the move was chosen from). */
  move(room, ply, move) {
    return this.send({ type: "move", room, ply, move });
  }
}

/**
 * Play games with `choose(view, legal) -> move` until `games` of them have ended; resolves
 * with their outcomes. `start(client)` asks for the first game (create_room, join or
 * quick_match); a finished game is left, not rematched.
 */
export async function play(client, { choose, start, games = 1 }) {
  const outcomes = [];
  let resolveAll;
  const all = new Promise((resolve) => (resolveAll = resolve));
  const previous = client.onFrame;
  const lastPly = new Map(); // room -> ply we answered
  client.onFrame = (f) => {
    previous(f);
    if (f.type !== "state") return;
    const v = f.view;
    if (v.outcome) {
      if (lastPly.get(f.room) === "over") return;
      lastPly.set(f.room, "over");
      outcomes.push({ room: f.room, outcome: v.outcome, ply: v.ply, view: v });
      if (outcomes.length >= games) resolveAll(outcomes);
      return;
    }
    if (f.legal && lastPly.get(f.room) !== v.ply) {
      lastPly.set(f.room, v.ply);
      client.move(f.room, v.ply, choose(v, f.legal));
    }
  };
  if (!client.online) await client.connect();
  await start(client);
  const done = await all;
  client.onFrame = previous;
  return done;
}
