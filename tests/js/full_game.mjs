// Two players, each a Client of clients/web/client.js, play a whole game of every game named
// on the command line against the server at URL; prints one JSON line per game. "resume"
// instead of a game: a client whose connection drops reconnects and keeps its session.
//   node tests/js/full_game.mjs ws://127.0.0.1:PORT/ stacko stakko resume
// Moves are the first legal move rotated by the ply (deterministic, and not always the same
// slot, so Stacko games reach the end of their rounds).

import { Client, play, ServerError } from "../../clients/web/client.js";

const [url, ...games] = process.argv.slice(2);
// client.js finds `ws` itself when it sits in a project that has it; here the package is in
// tests/js/node_modules, out of client.js's reach, so the class is passed in.
const WebSocket = globalThis.WebSocket ?? (await import("ws")).WebSocket;
const OPTIONS = {
  stacko: { tower: 3, bricks: 8, rounds: 2, turn_cap: 6, clock_ms: null },
  stakko: { ply_cap: 40 },
};

const choose = (view, legal) => legal[view.ply % legal.length];

async function game(name) {
  const ann = new Client({ url, name: "Ann", WebSocket });
  const bob = new Client({ url, name: "Bob", WebSocket });
  const welcome = await ann.connect();
  await bob.connect();
  // A request answered by an error rejects with the code.
  const refused = await bob.request({ type: "join", room: "ZZZZZZ", role: "player" }).catch((e) => e);
  if (!(refused instanceof ServerError) || refused.code !== "unknown_room") throw new Error(`expected unknown_room, got ${refused}`);
  let code = null;
  const annDone = play(ann, {
    choose,
    start: async (c) => {
      const joined = await c.request({ type: "create_room", game: name, public: false, options: OPTIONS[name] });
      code = joined.room;
    },
  });
  while (code == null) await new Promise((r) => setTimeout(r, 10));
  const bobDone = play(bob, { choose, start: (c) => c.request({ type: "join", room: code, role: "player" }) });
  const [[a], [b]] = await Promise.all([annDone, bobDone]);
  ann.stop();
  bob.stop();
  return {
    game: name,
    room: code,
    session: typeof welcome.session === "string",
    ply: a.ply,
    outcome: a.outcome,
    same: JSON.stringify(a.outcome) === JSON.stringify(b.outcome) && a.ply === b.ply,
    seats: [a.view.seat, b.view.seat],
  };
}

/** A dropped connection: the client reconnects by itself and resumes its session. */
async function resume() {
  const client = new Client({ url, name: "Cy", WebSocket });
  const first = await client.connect();
  const statuses = [];
  const back = new Promise((resolve) => {
    client.onStatus = (status) => {
      statuses.push(status);
      if (status === "online") resolve();
    };
  });
  client.ws.close(4000, "test: dropped"); // as a network failure would
  await back;
  client.stop();
  return { game: "resume", statuses, same: client.token === first.session };
}

const timer = setTimeout(() => {
  console.error("timed out");
  process.exit(2);
}, 30000);
for (const name of games) console.log(JSON.stringify(name === "resume" ? await resume() : await game(name)));
clearTimeout(timer);
