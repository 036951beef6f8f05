/**
 * A schema (or any object) built the first time one of its properties is used, standing in for it until then.
 * Module-scope zod schemas cost a cold start about 20 ms to build, though a function whose configuration the
 * stack vouches for (shared/config/broker-config.ts) may never parse with them, and a request needs only its
 * own; exported as they were, under the same names and types, so that every user keeps working unchanged.
 *
 * The stand-in forwards every property read, `in`, key listing and prototype look-up to the built value; zod
 * schemas keep their methods as closures over themselves, so `lazySchema(...).safeParse(value)`, and a stand-in
 * nested in another schema, behave as the schema itself.
 */
export function lazySchema<T extends object>(build: () => T): T {
  let built: T | undefined;
  const value = (): T => {
    built ??= build();
    return built;
  };
  return new Proxy({} as T, {
    get: (_target, key) => Reflect.get(value(), key, value()),
    has: (_target, key) => Reflect.has(value(), key),
    ownKeys: () => Reflect.ownKeys(value()),
    getOwnPropertyDescriptor: (_target, key) => {
      const descriptor = Reflect.getOwnPropertyDescriptor(value(), key);
      // A proxy may not report a property its own (empty) target lacks as non-configurable.
      return descriptor ? { ...descriptor, configurable: true } : undefined;
    },
    getPrototypeOf: () => Reflect.getPrototypeOf(value()),
  });
}
