/**
 * What the local Function URL adapter accepts as a request's target and Host, before it verifies a signature
 * or builds an event: a request AWS's front end could not parse is refused there with a 4xx and never reaches
 * the function, so the adapter refuses it the same way instead of failing on it (a 5xx).
 */

/**
 * The request target as a URL, or undefined when it is not origin-form (`/path?query`). The target is read
 * as a path even when it starts with `//` (`//host/x` is the path `//host/x`, not a request for `host`), as a
 * server reads its request line, unlike `new URL(target, base)`.
 */
export function requestUrl(target: string): URL | undefined {
  if (!target.startsWith('/')) return undefined;
  try {
    return new URL(`http://function-url.invalid${target}`);
  } catch {
    return undefined;
  }
}

/** RFC 9110's Host: a registered name, an IPv4 address or a bracketed IP literal, and an optional port. */
const HOST =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.?|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

export function validHost(host: string | undefined): host is string {
  return host !== undefined && host.length <= 255 && HOST.test(host);
}
