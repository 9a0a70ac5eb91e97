// Module resolution hooks so that plugin sources run under plain node for unit tests:
//   "gantry:policy/host@0.1.0" -> host-stub.mjs (log lines are kept in an array)
//   "./gantry.js" imported by a plugin anywhere -> sdk/js/lib/gantry.js (the build copies it next to the plugin)
//   every other .js file outside node_modules is an ES module (as componentize-qjs reads it)
const lib = new URL("../lib/gantry.js", import.meta.url).href;
const stub = new URL("./host-stub.mjs", import.meta.url).href;

export async function resolve(specifier, context, next) {
  if (specifier.startsWith("gantry:policy/host")) return { url: stub, shortCircuit: true };
  if (specifier === "./gantry.js") return { url: lib, format: "module", shortCircuit: true };
  const r = await next(specifier, context);
  if (r.url.startsWith("file:") && r.url.endsWith(".js") && !r.url.includes("/node_modules/")) return { ...r, format: "module" };
  return r;
}
