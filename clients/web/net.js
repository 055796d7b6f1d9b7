// The page's connection to the server: the protocol client of client.js (hello/welcome,
// request ids, reconnection with backoff), with the session token kept in this tab.
//
// The session token is the only way back to a seat after a dropped connection. It lives in
// this tab's sessionStorage: a reload resumes the game, another tab is another player.

import { Client } from "./client.js";

export { PROTOCOL } from "./client.js";

const TOKEN_KEY = "stacko.session";
/** The account token (registration on this page): kept across tabs and visits. */
export const ACCOUNT_KEY = "stacko.account";

export function serverUrl(loc = window.location) {
  const scheme = loc.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${loc.host}/`;
}

export class Connection extends Client {
  /**
   * @param {object} o
   * @param {string} o.url         ws://host:port/
   * @param {() => string} o.name  the player's name, read at every hello
   * @param {(frame: object) => void} o.onFrame      every frame from the server
   * @param {(status: string, detail?: string|number) => void} o.onStatus
   *   "connecting" | "online" | "reconnecting" | "stopped"
   */
  constructor({ url, name, onFrame, onStatus }) {
    super({
      url,
      name,
      WebSocket: window.WebSocket,
      account: () => localStorage.getItem(ACCOUNT_KEY),
      tokenStore: {
        get: () => sessionStorage.getItem(TOKEN_KEY),
        set: (token) => sessionStorage.setItem(TOKEN_KEY, token),
      },
    });
    this.onFrame = onFrame;
    this.onStatus = onStatus;
  }

  /** Open the connection; the page follows it through onStatus, not a promise. */
  connect() {
    this._open();
  }
}
