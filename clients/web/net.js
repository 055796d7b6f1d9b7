// The WebSocket connection to the server: hello/welcome, request ids, reconnection.
//
// The session token is the only way back to a seat after a dropped connection. It lives in
// this tab's sessionStorage: a reload resumes the game, another tab is another player.

export const PROTOCOL = 1;
const TOKEN_KEY = "stacko.session";
const RETRY_MS = [250, 500, 1000, 2000, 4000, 8000];

/** Fatal errors after which reconnecting on our own would only make things worse. */
const NO_RETRY = new Set(["session_replaced", "unsupported_version"]);

export function serverUrl(loc = window.location) {
  const scheme = loc.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${loc.host}/`;
}

export class Connection {
  /**
   * @param {object} o
   * @param {string} o.url         ws://host:port/
   * @param {() => string} o.name  the player's name, read at every hello
   * @param {(frame: object) => void} o.onFrame      every frame from the server
   * @param {(status: string, detail?: string) => void} o.onStatus
   *   "connecting" | "online" | "reconnecting" | "stopped"
   */
  constructor({ url, name, onFrame, onStatus }) {
    this.url = url;
    this.name = name;
    this.onFrame = onFrame;
    this.onStatus = onStatus;
    this.ws = null;
    this.online = false;
    this.attempt = 0;
    this.nextId = 1;
    this.retryTimer = null;
    this.stopped = false;
    this.lastFatal = null;
  }

  get token() {
    return sessionStorage.getItem(TOKEN_KEY);
  }

  connect() {
    clearTimeout(this.retryTimer);
    this.stopped = false;
    this.lastFatal = null;
    if (this.ws) this.ws.onclose = this.ws.onmessage = this.ws.onopen = null;
    this.ws?.close();
    this.onStatus(this.attempt ? "reconnecting" : "connecting");
    const ws = new WebSocket(this.url);
    this.ws = ws;
    ws.onopen = () => {
      const hello = { type: "hello", protocol: PROTOCOL, name: this.name() };
      const token = this.token;
      if (token) hello.token = token;
      ws.send(JSON.stringify(hello));
    };
    ws.onmessage = (event) => {
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch {
        return;
      }
      if (frame.type === "welcome") {
        sessionStorage.setItem(TOKEN_KEY, frame.session);
        this.online = true;
        this.attempt = 0;
        this.onStatus("online");
      } else if (frame.type === "error" && frame.fatal) {
        this.lastFatal = frame.code;
      }
      this.onFrame(frame);
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.online = false;
      if (this.stopped || NO_RETRY.has(this.lastFatal)) {
        this.onStatus("stopped", this.lastFatal ?? undefined);
        return;
      }
      const base = RETRY_MS[Math.min(this.attempt, RETRY_MS.length - 1)];
      this.attempt += 1;
      this.onStatus("reconnecting");
      this.retryTimer = setTimeout(() => this.connect(), base + Math.random() * base * 0.5);
    };
  }

  /** Reconnect now (a new name, or "play here" after another tab took the session over). */
  reconnect() {
    this.attempt = 0;
    this.connect();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    this.ws?.close(1000);
  }

  /** Send a request; returns its id, or null when offline (nothing is queued). */
  send(message) {
    if (!this.online || !this.ws || this.ws.readyState !== WebSocket.OPEN) return null;
    const id = this.nextId++;
    this.ws.send(JSON.stringify({ ...message, id }));
    return id;
  }
}
