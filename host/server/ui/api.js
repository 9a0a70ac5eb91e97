// The API client: the token (sessionStorage, or localStorage when "remember" is ticked),
// JSON requests with `Authorization: Bearer`, and the live-update stream.
//
// The stream is `GET /v1/stream` (server-sent events). EventSource cannot send an
// Authorization header, so it is read with fetch and a stream reader; on any break it
// reconnects after a back-off (1 s doubling to 15 s).

const KEY = "gantry.token";

/** The stored token, or "" (an open daemon needs none). */
export function token() {
  return sessionStorage.getItem(KEY) || localStorage.getItem(KEY) || "";
}

/** Stores `value` for this tab, and on this computer when `remember`. */
export function setToken(value, remember) {
  sessionStorage.setItem(KEY, value);
  if (remember) localStorage.setItem(KEY, value);
}

export function clearToken() {
  sessionStorage.removeItem(KEY);
  localStorage.removeItem(KEY);
}

/** An API answer that was not 2xx: status, the JSON error's code and message. */
export class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.code = e.code || "http";
  }
}

function headers(extra) {
  const h = { ...extra };
  const t = token();
  if (t) h.authorization = `Bearer ${t}`;
  return h;
}

/** `method path` with an optional JSON body; resolves to the parsed JSON. */
export async function api(path, { method = "GET", body, signal } = {}) {
  const init = { method, headers: headers(body === undefined ? {} : { "content-type": "application/json" }), signal };
  if (body !== undefined) init.body = JSON.stringify(body);
  const resp = await fetch(path, init);
  const text = await resp.text();
  let value = null;
  try { value = text ? JSON.parse(text) : null; } catch { value = text; }
  if (!resp.ok) throw new ApiError(resp.status, value);
  return value;
}

/** `GET path` as text (logs). */
export async function apiText(path, { signal } = {}) {
  const resp = await fetch(path, { headers: headers({}), signal });
  const text = await resp.text();
  if (!resp.ok) {
    let body = null;
    try { body = JSON.parse(text); } catch { /* plain text */ }
    throw new ApiError(resp.status, body);
  }
  return text;
}

/**
 * Reads a line- or event-framed stream at `path`, calling `onChunk(text)` per chunk of
 * decoded text, until `signal` aborts or the server ends it. Resolves when it ends.
 */
export async function readStream(path, signal, onChunk) {
  const resp = await fetch(path, { headers: headers({}), signal });
  if (!resp.ok) {
    let body = null;
    try { body = await resp.json(); } catch { /* not JSON */ }
    throw new ApiError(resp.status, body);
  }
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    onChunk(decoder.decode(value, { stream: true }));
  }
}

/**
 * Follows `GET /v1/stream`: `onChange(parts)` for each `changed` event (parts among
 * jobs, nodes, policy, faults), `onState(connected)` as the connection comes and goes.
 * Returns a function that stops it.
 */
export function follow(onChange, onState) {
  const stop = new AbortController();
  let backoff = 1000;
  (async () => {
    while (!stop.signal.aborted) {
      let buffer = "";
      try {
        await readStream("/v1/stream", stop.signal, (chunk) => {
          onState(true);
          backoff = 1000;
          buffer += chunk;
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const data = block.split("\n").find((l) => l.startsWith("data: "));
            if (block.includes("event: changed") && data) {
              try { onChange(JSON.parse(data.slice(6)).parts || []); } catch { /* ignore a bad frame */ }
            }
          }
        });
      } catch (e) {
        if (stop.signal.aborted) return;
        if (e instanceof ApiError && e.status === 401) { onState(false); return; }
      }
      onState(false);
      await new Promise((r) => setTimeout(r, backoff));
      backoff = Math.min(backoff * 2, 15000);
    }
  })();
  return () => stop.abort();
}
