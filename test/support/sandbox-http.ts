/** Small HTTP helpers for talking to a vendor sandbox over real HTTP in tests. */

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  /** The parsed JSON body, or undefined when the body is empty or not JSON. */
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary answer shapes
  body: any;
}

export interface CallOptions {
  token?: string;
  /** A string is sent as is; anything else as JSON. */
  body?: unknown;
  headers?: Record<string, string>;
}

export async function call(
  baseUrl: string,
  method: string,
  path: string,
  options: CallOptions = {},
): Promise<Reply> {
  const headers: Record<string, string> = { 'Content-Type': 'application/json', ...options.headers };
  if (options.token !== undefined) headers.Authorization = `Bearer ${options.token}`;
  const body =
    options.body === undefined
      ? undefined
      : typeof options.body === 'string'
        ? options.body
        : JSON.stringify(options.body);
  const response = await fetch(`${baseUrl}${path}`, { method, headers, body });
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: response.status, headers: response.headers, text, body: parsed };
}

export async function login(baseUrl: string, username: string, password: string): Promise<Reply> {
  return call(baseUrl, 'POST', '/restful/login/', { body: { username, password } });
}

/** Logs in and returns the access token; fails the test when the login does not succeed. */
export async function tokenFor(baseUrl: string, username: string, password: string): Promise<string> {
  const reply = await login(baseUrl, username, password);
  if (reply.status !== 200) throw new Error(`login of ${username} answered ${reply.status}`);
  return reply.body.accessToken as string;
}

/** A small seeded PRNG (mulberry32), so a "random" sandbox run is the same every time. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}
