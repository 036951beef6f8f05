import type * as z from 'zod';

/**
 * Every configuration a person writes (the local config, a stage, the functions' document) is made of strict
 * objects (`z.strictObject`): a misspelt optional key would otherwise be dropped and its default used without a
 * word (a reservation or a retention lost). This module says what such a key is: its name, and the known key
 * it was probably meant to be. zod is imported for its types only: the functions load zod on first use
 * (shared/aws/bundle/zod-on-first-use.ts), and this module is part of their cold start.
 */

/**
 * Optimal string alignment distance (Levenshtein plus swapping two neighbours), case-insensitive: a key
 * written `ratelimits` or `rateLimts` is one step from `rateLimits`.
 */
export function editDistance(a: string, b: string): number {
  const s = a.toLowerCase();
  const t = b.toLowerCase();
  // Three rows suffice: the transposition looks two rows back.
  let before: number[] = [];
  let previous = Array.from({ length: t.length + 1 }, (_, j) => j);
  for (let i = 1; i <= s.length; i++) {
    const current = [i];
    for (let j = 1; j <= t.length; j++) {
      const cost = s[i - 1] === t[j - 1] ? 0 : 1;
      let best = Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + cost);
      if (i > 1 && j > 1 && s[i - 1] === t[j - 2] && s[i - 2] === t[j - 1]) {
        best = Math.min(best, (before[j - 2] ?? 0) + 1);
      }
      current.push(best);
    }
    before = previous;
    previous = current;
  }
  return previous[t.length] ?? 0;
}

/**
 * The known key `key` was most likely meant to be: the nearest, if it is within a third of the key's length
 * (at least one edit), so `refreshIntervalSecs` finds `refreshIntervalSeconds` and `colour` finds nothing.
 */
export function closestKey(key: string, known: Iterable<string>): string | undefined {
  const bound = Math.max(1, Math.floor(key.length / 3));
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of known) {
    const distance = editDistance(key, candidate);
    if (distance <= bound && distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

/** "unknown key `rateLimit`; did you mean `rateLimits`?", several keys in one message. */
export function unknownKeysMessage(keys: readonly string[], known: Iterable<string>): string {
  const knownKeys = [...known];
  const named = keys.map((key) => {
    const suggestion = closestKey(key, knownKeys);
    return { key, hint: suggestion === undefined ? '' : `did you mean \`${suggestion}\`?` };
  });
  const [only] = named;
  if (named.length === 1 && only) return `unknown key \`${only.key}\`${only.hint ? `; ${only.hint}` : ''}`;
  return `unknown keys ${named.map(({ key, hint }) => `\`${key}\`${hint ? ` (${hint})` : ''}`).join(', ')}`;
}

/** The keys a strict object (its shape) or a record of an enumerated key type accepts. */
function knownKeysOf(schema: unknown): string[] {
  const def = (
    schema as { _zod?: { def?: { shape?: object; keyType?: { _zod?: { values?: Set<unknown> } } } } }
  )?._zod?.def;
  if (def?.shape) return Object.keys(def.shape);
  return [...(def?.keyType?._zod?.values ?? [])].filter(
    (value): value is string => typeof value === 'string',
  );
}

/**
 * The error map every configuration parse passes to zod (`schema.safeParse(value, { error: unknownKeysError })`):
 * an `unrecognized_keys` issue becomes `unknownKeysMessage` of the object's own keys; every other issue keeps
 * its message. Any `z.strictObject` anywhere in a configuration schema is covered, with nothing to import.
 */
export const unknownKeysError: z.core.$ZodErrorMap = (issue) =>
  issue.code === 'unrecognized_keys' ? unknownKeysMessage(issue.keys, knownKeysOf(issue.inst)) : undefined;

/**
 * The issues as a person reads them. A union fails as a whole with "Invalid input"; where the value has the
 * type of one of its forms only (an object where the other form is a list, as a class given as `{ paths,
 * limits }` or as its limits), that form's own issues are what is wrong with it, e.g. its unknown key.
 */
export function plainIssues(issues: readonly z.core.$ZodIssue[]): z.core.$ZodIssue[] {
  return issues.flatMap((issue) => {
    if (issue.code !== 'invalid_union') return [issue];
    const forms = issue.errors.filter(
      (form) => !form.some((inner) => inner.code === 'invalid_type' && inner.path.length === 0),
    );
    const [form] = forms;
    if (forms.length !== 1 || !form) return [issue];
    return plainIssues(form).map((inner) => ({ ...inner, path: [...issue.path, ...inner.path] }));
  });
}
