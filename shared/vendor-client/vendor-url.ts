import { InsecureVendorUrlError } from './errors.js';

/** 127.0.0.0/8, localhost and [::1]: the only hosts plain HTTP may reach (the local sandbox). */
export function isLoopbackHostname(hostname: string): boolean {
  const host = hostname.toLowerCase();
  if (host === 'localhost' || host === '[::1]') return true;
  const octets = host.split('.');
  return (
    octets.length === 4 &&
    octets[0] === '127' &&
    octets.every((octet) => /^\d{1,3}$/.test(octet) && Number(octet) <= 255)
  );
}

/**
 * Checks and normalises the vendor base URL once, at construction. The vendor requires TLS (§5.6);
 * plain HTTP is allowed only to loopback so the sandbox can run without certificates. Credentials,
 * queries and fragments are refused: they would end up in every request URL and in error causes.
 * Returns the base without a trailing slash, so paths can be appended.
 */
export function parseVendorBaseUrl(value: string): string {
  if (typeof value !== 'string' || !URL.canParse(value)) {
    throw new InsecureVendorUrlError('vendor base URL is not a valid absolute URL', undefined);
  }
  const url = new URL(value);
  const secure = url.protocol === 'https:' || (url.protocol === 'http:' && isLoopbackHostname(url.hostname));
  if (!secure) {
    throw new InsecureVendorUrlError(
      `vendor base URL must be https:// (plain http:// only for loopback addresses), got ${url.protocol}//${url.host}`,
      undefined,
    );
  }
  if (url.username !== '' || url.password !== '') {
    throw new InsecureVendorUrlError('vendor base URL must not carry a username or password', undefined);
  }
  if (url.search !== '' || url.hash !== '') {
    throw new InsecureVendorUrlError('vendor base URL must not have a query or a fragment', undefined);
  }
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}
