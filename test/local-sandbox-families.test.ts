import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FunctionUrlSigner } from '../client/sigv4.js';
import { type LocalBroker, startLocalBroker } from '../local/broker.js';
import { loadLocalConfig } from '../local/config.js';
import { DEFAULT_FAMILIES } from '../sandbox/index.js';
import { ManualClock } from '../shared/clock.js';
import { MemoryTelemetry } from '../shared/observability.js';
import { call } from './support/sandbox-http.js';

/**
 * `npm start`'s configuration file takes the vendor sandbox's endpoint families (`sandbox.families`), checked as
 * the sandbox checks them, and the local sandboxes run with them (their windows compressed by the time scale, as
 * the general ones). Over real HTTP, on a manual clock.
 */
const dir = mkdtempSync(join(tmpdir(), 'local-families-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

/** The committed local configuration with this `sandbox` block (and the committed credentials file). */
function configFile(sandbox: Record<string, unknown>, timeScale = 1): string {
  const config = JSON.parse(readFileSync('local/broker.config.json', 'utf8')) as Record<string, unknown>;
  const file = join(dir, `broker.config-${++files}.json`);
  writeFileSync(
    file,
    JSON.stringify({
      ...config,
      timeScale,
      credentialsFile: join(process.cwd(), 'local/credentials.json'),
      sandbox,
    }),
  );
  return file;
}

const EXPORTS = { name: 'exports', pathPrefix: '/exports/', limits: [{ limit: 2, windowSeconds: 60 }] };

describe('the local configuration: sandbox.families', () => {
  it('defaults to the sandbox’s families, which docs/local-mode.md shows as the block that would set them', () => {
    const config = loadLocalConfig({ BROKER_CONFIG: configFile({}) });
    expect(config.sandbox.families).toEqual(DEFAULT_FAMILIES);
    const doc = readFileSync('docs/local-mode.md', 'utf8');
    const shown = /### Endpoint families[\s\S]*?```json\n([\s\S]*?)```/.exec(doc)?.[1] ?? '';
    const { sandbox } = JSON.parse(`{${shown}}`) as { sandbox: Record<string, unknown> };
    expect(loadLocalConfig({ BROKER_CONFIG: configFile(sandbox) }).sandbox.families).toEqual(
      DEFAULT_FAMILIES,
    );
  });

  it('is taken, and the running local sandbox applies it: a family path meets its own limit over HTTP', async () => {
    // Ten times faster: the family's minute is 6 s, as the general minute is.
    const config = loadLocalConfig({
      BROKER_CONFIG: configFile({ families: [EXPORTS] }, 10),
      BROKER_PORT: '0',
    });
    expect(config.sandbox.families).toEqual([EXPORTS]);
    // Aligned to the 6 s window, so the fixed windows do not roll over during the test.
    const clock = new ManualClock(Date.UTC(2026, 0, 5, 9, 0, 0));
    let broker: LocalBroker | undefined;
    try {
      broker = await startLocalBroker(config, { clock, telemetry: new MemoryTelemetry(), schedule: false });
      await broker.refreshNow();
      const sandbox = broker.sandboxes.uat;
      if (!sandbox) throw new Error('no local uat sandbox');
      // The families it runs with, as its operator API says: the configured list, its windows compressed.
      const settings = await call(sandbox.url, 'POST', '/_sandbox/settings', { body: {} });
      expect(settings.body.settings.families).toEqual([
        { ...EXPORTS, limits: [{ limit: 2, windowSeconds: 6 }] },
      ]);

      // A consumer's token from the local broker, as a service would get it.
      const caller = config.callers[0];
      if (!caller) throw new Error('no local caller');
      const signer = new FunctionUrlSigner({ region: config.region, credentials: caller });
      const signed = await signer.sign(
        { method: 'GET', url: `${broker.vendUrl}/v1/credential-sets/uat-advisor/token` },
        new Date(clock.now()),
      );
      const answer = await fetch(signed.url, { headers: signed.headers });
      expect(answer.status).toBe(200);
      const { accessToken, tenant } = (await answer.json()) as { accessToken: string; tenant: string };

      const exportsCall = () => call(sandbox.url, 'GET', '/exports/e-1', { token: accessToken });
      for (const remaining of [1, 0]) {
        const served = await exportsCall();
        expect(served.status).toBe(200);
        expect(served.body).toEqual({ family: 'exports', path: '/exports/e-1', status: 'ready' });
        expect(served.headers.get('x-ratelimit-limit')).toBe('2');
        expect(served.headers.get('x-ratelimit-remaining')).toBe(String(remaining));
      }
      const refused = await exportsCall();
      expect(refused.status).toBe(429);
      expect(refused.headers.get('x-ratelimit-limit')).toBe('2');
      expect(refused.body.error.details.limit).toBe(2);
      // The general limits still have room: a resource request is answered with the general headers.
      const resource = await call(sandbox.url, 'GET', `/users/1/${tenant}/serviceKey/nobody`, {
        token: accessToken,
      });
      expect(resource.status).toBe(404);
      expect(resource.headers.get('x-ratelimit-limit')).toBe('50');
      // The list replaces the default families: /reports/ is no family here (an unknown resource path).
      expect((await call(sandbox.url, 'GET', '/reports/daily', { token: accessToken })).status).toBe(404);
    } finally {
      await broker?.close();
    }
  });

  it('refuses an unknown key in a family, naming it and the key it was probably meant to be', () => {
    const file = configFile({
      families: [{ name: 'exports', pathprefix: '/exports/', limits: [{ limit: 2, windowSeconds: 60 }] }],
    });
    expect(() => loadLocalConfig({ BROKER_CONFIG: file })).toThrow(
      `${file}.sandbox.families[0]: unknown key \`pathprefix\`; did you mean \`pathPrefix\`?`,
    );
  });

  it('refuses overlapping prefixes, and checks each family as the sandbox does', () => {
    const overlapping = configFile({
      families: [
        { name: 'reports', pathPrefix: '/reports/', limits: [{ limit: 10, windowSeconds: 60 }] },
        { name: 'monthly', pathPrefix: '/reports/monthly/', limits: [{ limit: 2, windowSeconds: 60 }] },
      ],
    });
    expect(() => loadLocalConfig({ BROKER_CONFIG: overlapping })).toThrow(
      `invalid configuration: ${overlapping}.sandbox.families[1].pathPrefix: overlaps the prefix of family "reports"`,
    );
    const wrong = configFile({
      families: [
        { name: 'Exports', pathPrefix: '/exports', limits: [{ limit: 0, windowSeconds: 60 }] },
        { name: 'exports', pathPrefix: '/_sandbox/exports/', limits: [] },
      ],
    });
    const message = (() => {
      try {
        loadLocalConfig({ BROKER_CONFIG: wrong });
      } catch (error) {
        return (error as Error).message;
      }
      return 'accepted';
    })();
    expect(message.split('; ')).toEqual([
      `invalid configuration: ${wrong}.sandbox.families[0].name: lowercase letters, digits and dashes, at most 63`,
      `${wrong}.sandbox.families[0].pathPrefix: an absolute path of letters, digits and . _ ~ -, ending in /`,
      `${wrong}.sandbox.families[0].limits[0].limit: Too small: expected number to be >0`,
      `${wrong}.sandbox.families[1].pathPrefix: must not be under /_sandbox/ (the operator API)`,
    ]);
  });
});
