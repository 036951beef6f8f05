/**
 * Stands in for `@aws-sdk/endpoint-cache` in the functions' bundles (an esbuild alias, set in
 * infra/constructs/broker-function.ts; the sources and tests import the real one). The DynamoDB client builds an
 * endpoint cache for endpoint discovery whether or not discovery is on (it is off: we set no
 * AWS_ENABLE_ENDPOINT_DISCOVERY), and the real cache keeps its entries in mnemonist's LRUCache, which brings
 * mnemonist's typed-array helpers and obliterator: about 7 KiB of the vend bundle for a cache no call of ours fills.
 *
 * Same export, same behaviour as the real module's `EndpointCache` (test/bundle-endpoint-cache.test.ts plays both
 * through the same random operations): endpoints with their expiry per key, at most `capacity` keys, the least
 * recently read or written one evicted first; a Map keeps that order (a read or write moves its key to the end).
 */
export interface Endpoint {
  Address: string;
  CachePeriodInMinutes: number;
}

interface EndpointWithExpiry {
  Address: string;
  Expires: number;
}

export class EndpointCache {
  readonly #capacity: number;
  readonly #cache = new Map<string, EndpointWithExpiry[]>();

  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  getEndpoint(key: string): string | undefined {
    const endpoints = this.get(key)?.map((endpoint) => endpoint.Address);
    if (!endpoints || endpoints.length === 0) return undefined;
    return endpoints[Math.floor(Math.random() * endpoints.length)];
  }

  get(key: string): EndpointWithExpiry[] | undefined {
    if (!this.has(key)) return undefined;
    const value = this.#touch(key);
    if (!value) return undefined;
    const now = Date.now();
    const live = value.filter((endpoint) => now < endpoint.Expires);
    if (live.length === 0) {
      this.delete(key);
      return undefined;
    }
    return live;
  }

  set(key: string, endpoints: Endpoint[]): void {
    const now = Date.now();
    this.#put(
      key,
      endpoints.map(({ Address, CachePeriodInMinutes }) => ({
        Address,
        Expires: now + CachePeriodInMinutes * 60 * 1000,
      })),
    );
  }

  delete(key: string): void {
    this.#put(key, []);
  }

  has(key: string): boolean {
    // A peek: it does not count as a use.
    return (this.#cache.get(key)?.length ?? 0) > 0;
  }

  clear(): void {
    this.#cache.clear();
  }

  /** The key's value, now the most recently used. */
  #touch(key: string): EndpointWithExpiry[] | undefined {
    const value = this.#cache.get(key);
    if (value === undefined) return undefined;
    this.#cache.delete(key);
    this.#cache.set(key, value);
    return value;
  }

  #put(key: string, value: EndpointWithExpiry[]): void {
    this.#cache.delete(key);
    if (this.#cache.size >= this.#capacity) {
      const oldest = this.#cache.keys().next();
      if (!oldest.done) this.#cache.delete(oldest.value);
    }
    this.#cache.set(key, value);
  }
}
