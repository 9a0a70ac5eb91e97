// node --import ./sdk/js/test/register.mjs --test sdk/js/test/*.test.mjs
import { register } from "node:module";
register("./hooks.mjs", import.meta.url);
