import { classOfPath, compileRequestClasses, type RequestClasses } from '../shared/config/request-classes.js';
import type { Telemetry } from '../shared/telemetry.js';
import type { VendedToken } from './types.js';

/** What a vendor request is: its class (undefined: general), and whether a class pattern matched its path. */
export interface RequestClassification {
  cls: string | undefined;
  /** The path matched a pattern: it may be of any safe shape, not only `/users/...` (vendor-api.md §4). */
  byPath: boolean;
}

/** Remembered (set, named, chosen) warnings, so a caller's steady mistake is said once, not per request. */
const REMEMBERED_WARNINGS = 64;

/**
 * Classifies vendor requests by the path patterns the broker sends with each token (`classes` of the token
 * answer): the first class with a pattern the path matches, else the class the caller named, else general.
 *
 * Where the caller names a class and the path matches another's pattern, the path's class is taken, and said
 * once (a warning): the vendor counts the request where its path belongs, so a permit of the named class would
 * leave the path's class under-counted for every consumer, and a refusal would break a caller that named a
 * class before the operator configured paths. A caller still names the class of a path no pattern covers.
 */
export class RequestClassifier {
  readonly #telemetry: Telemetry;
  /** Compiled once per token answer; null when a pattern could not be compiled (a newer broker's syntax). */
  readonly #compiled = new WeakMap<object, RequestClasses | null>();
  readonly #warned = new Set<string>();

  constructor(telemetry: Telemetry) {
    this.#telemetry = telemetry;
  }

  classify(
    setId: string,
    token: VendedToken,
    path: string,
    named: string | undefined,
  ): RequestClassification {
    const classes = this.#classesOf(setId, token);
    const byPath = classes ? classOfPath(classes, path) : undefined;
    if (byPath === undefined) return { cls: named, byPath: false };
    if (named !== undefined && named !== byPath) this.#warnOnce(setId, named, byPath);
    return { cls: byPath, byPath: true };
  }

  #classesOf(setId: string, token: VendedToken): RequestClasses | undefined {
    const listed = token.classes;
    if (!listed || listed.length === 0) return undefined;
    let compiled = this.#compiled.get(listed);
    if (compiled === undefined) {
      try {
        compiled = compileRequestClasses(listed);
      } catch (error) {
        // Requests are then classified as before patterns existed (by the caller's `class`); said once per answer.
        this.#telemetry.warn('request classes not understood; classifying by the caller only', {
          credentialSet: setId,
          reason: (error as Error).message,
        });
        compiled = null;
      }
      this.#compiled.set(listed, compiled);
    }
    return compiled ?? undefined;
  }

  #warnOnce(setId: string, named: string, chosen: string): void {
    const key = `${setId}\u0000${named}\u0000${chosen}`;
    if (this.#warned.has(key)) return;
    if (this.#warned.size >= REMEMBERED_WARNINGS) this.#warned.clear();
    this.#warned.add(key);
    this.#telemetry.warn('the request path is of another class than the one named; the path decides', {
      credentialSet: setId,
      namedClass: named,
      class: chosen,
    });
  }
}
