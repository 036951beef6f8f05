import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { FunctionUrlSigner } from '../client/sigv4.js';

/**
 * What the broker itself says of a set's learned class limits while a soak runs, read the way an operator reads
 * it: `GET /v1/credential-sets` signed with the operator's keys (the route `token-broker status` calls).
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface OperatorAccess {
  vendUrl: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
}

interface ClassView {
  learned: boolean;
  limits: {
    limit: number;
    windowSeconds: number;
    source: string;
    learnedAt?: string;
    provisionalUntil?: string;
  }[];
}

/** One learned limit as a poll listed it. */
export interface ShownLimit {
  limit: number;
  windowSeconds: number;
  /** Epoch ms, when the view gave it. */
  learnedAt?: number;
  provisionalUntil?: number;
}

/** What a poll listed as learned for a class, recorded when it differs from the poll before. */
export interface ShownView {
  /** Epoch ms of the poll. */
  at: number;
  /** Empty: the class is at the probe. */
  limits: ShownLimit[];
}

/** Per class: when the broker first showed a learned limit (its learnedAt), and how often its view changed after. */
export interface LearnedClassFigures {
  /** Epoch ms of the learned limit's learnedAt, the first time a poll showed one; undefined: never learned. */
  learnedAt: number | undefined;
  /** Polls after the first learned one that showed no learned limit (the class back at the probe). */
  probeFallbacks: number;
  /**
   * After the first learned poll: polls whose listed limits (limit and window; not their provisional ends)
   * differ from the poll before's, a return to the probe included.
   */
  changes: number;
  /** Of those, the returns to the probe (a listed limit before, none now). */
  probeReturns: number;
  /** The learned limits at the last poll, e.g. "10/10s + 30/60s". */
  last: string;
  /** Every poll that listed something other than the poll before, from the first poll on (oldest first). */
  history: ShownView[];
  /** Epoch ms of the last poll that answered. */
  lastPollAt: number | undefined;
}

/** `10/10s + 30/60s`, or `probe` for none. */
export const shownText = (limits: readonly { limit: number; windowSeconds: number }[]): string =>
  limits.map((l) => `${l.limit}/${l.windowSeconds}s`).join(' + ') || 'probe';

const epochMs = (iso: string | undefined): number | undefined => {
  const ms = iso === undefined ? Number.NaN : Date.parse(iso);
  return Number.isNaN(ms) ? undefined : ms;
};

async function classesOf(access: OperatorAccess, setId: string): Promise<Record<string, ClassView>> {
  const signer = new FunctionUrlSigner({
    region: access.region,
    credentials: { accessKeyId: access.accessKeyId, secretAccessKey: access.secretAccessKey },
  });
  const signed = await signer.sign({ url: `${access.vendUrl}/v1/credential-sets`, method: 'GET' });
  const response = await fetch(signed.url, { method: signed.method, headers: signed.headers });
  if (!response.ok) throw new Error(`GET /v1/credential-sets: HTTP ${response.status}`);
  const body = (await response.json()) as {
    credentialSets?: { id: string; classes?: Record<string, ClassView> }[];
  };
  return body.credentialSets?.find((set) => set.id === setId)?.classes ?? {};
}

/** Polls the operator's view every `everyMs` until stopped; `stop()` gives each learned class's figures. */
export function watchLearnedClasses(
  access: OperatorAccess,
  setId: string,
  everyMs = 1000,
): { stop(): Promise<Record<string, LearnedClassFigures>> } {
  const figures: Record<string, LearnedClassFigures> = {};
  let polling: Promise<void> = Promise.resolve();
  const poll = async () => {
    const classes = await classesOf(access, setId).catch(() => undefined);
    const at = Date.now();
    for (const [name, view] of Object.entries(classes ?? {})) {
      if (!view.learned) continue;
      const learned: ShownLimit[] = view.limits
        .filter((l) => l.source === 'learned')
        .map((l) => {
          const learnedAt = epochMs(l.learnedAt);
          const until = epochMs(l.provisionalUntil);
          return {
            limit: l.limit,
            windowSeconds: l.windowSeconds,
            ...(learnedAt === undefined ? {} : { learnedAt }),
            ...(until === undefined ? {} : { provisionalUntil: until }),
          };
        });
      const entry: LearnedClassFigures = figures[name] ?? {
        learnedAt: undefined,
        probeFallbacks: 0,
        changes: 0,
        probeReturns: 0,
        last: '',
        history: [],
        lastPollAt: undefined,
      };
      figures[name] = entry;
      const text = shownText(learned);
      const before = entry.history.at(-1);
      if (entry.learnedAt !== undefined && text !== entry.last) {
        entry.changes++;
        if (learned.length === 0) entry.probeReturns++;
      }
      if (before === undefined || text !== shownText(before.limits))
        entry.history.push({ at, limits: learned });
      if (learned.length > 0 && entry.learnedAt === undefined)
        entry.learnedAt = Math.min(...learned.map((l) => l.learnedAt ?? at));
      else if (learned.length === 0 && entry.learnedAt !== undefined) entry.probeFallbacks++;
      entry.last = text;
      entry.lastPollAt = at;
    }
  };
  const timer = setInterval(() => {
    polling = polling.then(poll);
  }, everyMs);
  return {
    async stop() {
      clearInterval(timer);
      await polling;
      return figures;
    },
  };
}

/** `token-broker status <set>` as an operator runs it (the repository's CLI, narrow), its stdout. */
export function operatorStatus(access: OperatorAccess, setId: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'bin/token-broker.mjs'), 'status', setId], {
      cwd: ROOT,
      env: {
        ...process.env,
        TOKEN_BROKER_URL: access.vendUrl,
        AWS_REGION: access.region,
        AWS_ACCESS_KEY_ID: access.accessKeyId,
        AWS_SECRET_ACCESS_KEY: access.secretAccessKey,
        AWS_SESSION_TOKEN: '',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.on('error', reject);
    child.on('close', () => resolve(out));
  });
}
