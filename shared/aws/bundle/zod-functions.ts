/**
 * The zod functions the functions call at run time, and nothing else of zod: what zod-on-first-use.ts loads on
 * first use, bundled on its own beside each function's bundle (infra/constructs/broker-function.ts). A path, not
 * the package name: the bundles' alias maps `zod` to zod-on-first-use.ts.
 */
export {
  array,
  boolean,
  discriminatedUnion,
  enum,
  literal,
  number,
  object,
  record,
  strictObject,
  string,
  union,
  unknown,
} from '../../../node_modules/zod/v4/classic/schemas.js';
