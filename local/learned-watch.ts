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
  limits: { limit: number; windowSeconds: number; source: string; learnedAt?: string }[];
}

/** Per class: when the broker first showed a learned limit (its learnedAt), and how often it fell back after. */
export interface LearnedClassFigures {
  /** Epoch ms of the learned limit's learnedAt, the first time a poll showed one; undefined: never learned. */
  learnedAt: number | undefined;
  /** Polls after the first learned one that showed no learned limit (the class back at the probe). */
  probeFallbacks: number;
  /** The learned limits at the last poll, e.g. "10/10s + 30/60s". */
  last: string;
}

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
    for (const [name, view] of Object.entries(classes ?? {})) {
      if (!view.learned) continue;
      const learned = view.limits.filter((l) => l.source === 'learned');
      const entry = figures[name] ?? { learnedAt: undefined, probeFallbacks: 0, last: '' };
      figures[name] = entry;
      if (learned.length > 0 && entry.learnedAt === undefined)
        entry.learnedAt = Math.min(...learned.map((l) => Date.parse(l.learnedAt ?? '') || Date.now()));
      else if (learned.length === 0 && entry.learnedAt !== undefined) entry.probeFallbacks++;
      entry.last = learned.map((l) => `${l.limit}/${l.windowSeconds}s`).join(' + ') || 'probe';
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
