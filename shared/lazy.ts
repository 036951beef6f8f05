/**
 * A value built the first time it is asked for, then kept. For what only some invocations need (a route's
 * body schema, the vendor's answer shapes, the secret's shape): a cold start whose first request does not use it
 * never builds it, and one that does builds it once, then (not at module init).
 */
export function lazy<T>(build: () => T): () => T {
  let built: { value: T } | undefined;
  return () => {
    built ??= { value: build() };
    return built.value;
  };
}
