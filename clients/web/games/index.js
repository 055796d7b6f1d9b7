// One renderer per game (the `game` field of a state frame's view). Adding a game to the
// page: a module in this folder exporting a renderer (see stacko.js for the interface) and
// one line below.

import { generic } from "./generic.js";
import { stacko } from "./stacko.js";
import { stakko } from "./stakko.js";

const RENDERERS = { stacko, stakko };

export function rendererFor(game) {
  return RENDERERS[game] ?? generic;
}
