// Stands in for the `gantry:policy/host` import when plugin code runs under node.
export const lines = [];
export function log(level, message) {
  lines.push([level, message]);
}
export default { log };
