/**
 * Stands in for `zod` in the functions' bundles (an esbuild alias, set in infra/constructs/broker-function.ts;
 * the sources and tests import zod itself). zod's own module init (its classes, about 100 KiB of them) takes
 * about as long as a third of the DynamoDB client's import, and a function's cold start need not pay it: its
 * schemas are built on first use (shared/lazy-schema.ts), and the configuration the stack vouches for is used
 * without a parse (shared/config/broker-config.ts). So zod is loaded on the first schema built, i.e. by the
 * first request that validates something, or at cold start by a configuration no one vouches for.
 *
 * The same functions, forwarded: every `z.<name>` the functions call at run time (zod-functions.ts; a missing one
 * fails the bundle tests that run the functions).
 */
import path from 'node:path';
import type * as Zod from 'zod';
import { ZOD_FUNCTIONS_FILE } from './zod-functions-file.js';

type ZodModule = typeof Zod;
let loaded: ZodModule | undefined;
const zod = (): ZodModule => {
  // Beside the bundle in the code asset, its own file (infra/constructs/broker-function.ts): a cold start's V8
  // parse of the bundle never reads zod, about a tenth of the import. A computed path: esbuild leaves it alone.
  loaded ??= require(path.join(__dirname, ZOD_FUNCTIONS_FILE)) as ZodModule;
  return loaded;
};

const forward = <K extends keyof ZodModule>(name: K): ZodModule[K] =>
  ((...args: unknown[]) => (zod()[name] as (...values: unknown[]) => unknown)(...args)) as ZodModule[K];

export const array = forward('array');
export const boolean = forward('boolean');
export const discriminatedUnion = forward('discriminatedUnion');
const zodEnum = forward('enum');

export { zodEnum as enum };
export const literal = forward('literal');
export const number = forward('number');
export const object = forward('object');
export const record = forward('record');
export const strictObject = forward('strictObject');
export const string = forward('string');
export const union = forward('union');
export const unknown = forward('unknown');

/**
 * zod's `NEVER` (what a transform returns after adding an issue: the parse fails on the issue, the value is not
 * read). A constant, not a function to forward: zod's own value, so that no import of it loads zod.
 */
export const NEVER = Object.freeze({ status: 'aborted' }) as ZodModule['NEVER'];
