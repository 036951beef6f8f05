import { readFileSync } from 'node:fs';
import { QueryString } from 'aws-cdk-lib/aws-logs';
import { beforeAll, describe, expect, it } from 'vitest';
import { LOG_QUERIES, RENEWER_LOG_QUERIES } from '../infra/constructs/log-queries.js';
import { RunbookSection } from '../infra/runbook.js';
import { STAGES } from '../infra/stages/index.js';
import { type Deployed, type Json, refOf, synthesizeStages } from './support/infra-template.js';

let deployed: Record<string, Deployed> = {};
beforeAll(() => {
  ({ deployed } = synthesizeStages());
});

const runbook = readFileSync(new URL('../docs/runbook.md', import.meta.url), 'utf8');

/** The text of the runbook section whose heading gives `anchor` (GitHub's anchor rules), up to the next one. */
function section(anchor: string): string {
  const parts = runbook.split(/^## /m).slice(1);
  const found = parts.find(
    (part) =>
      (part.split('\n')[0] ?? '')
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N} -]/gu, '')
        .replace(/ /g, '-') === anchor,
  );
  if (!found) throw new Error(`no runbook section #${anchor}`);
  return found;
}

describe.each(STAGES.map((s) => s.name))('saved Logs Insights queries, stage %s', (name) => {
  const d = () => deployed[name] as Deployed;

  it('saves every runbook query under TokenBroker-<stage>/, over the log groups of the functions it reads', () => {
    const { template, json, ids } = d();
    const logGroupOf = (fn: string) =>
      refOf(((json.Resources[fn]?.Properties.LoggingConfig ?? {}) as Json).LogGroup) ?? 'none';
    const groups = { refresher: logGroupOf(ids.refresher), vend: logGroupOf(ids.vend) };
    expect(Object.keys(template.findResources('AWS::Logs::LogGroup')).sort()).toEqual(
      Object.values(groups).sort(),
    );
    const saved = Object.values(template.findResources('AWS::Logs::QueryDefinition')).map(
      (r) => r.Properties,
    );
    expect(saved).toHaveLength(LOG_QUERIES.length);
    for (const spec of LOG_QUERIES) {
      const query = saved.find((q) => q.Name === `TokenBroker-${name}/${spec.name}`);
      expect(query, spec.name).toBeDefined();
      expect(query?.QueryString).toBe(new QueryString(spec.query).toString());
      expect(((query?.LogGroupNames ?? []) as unknown[]).map(refOf)).toEqual(
        spec.sources.map((s) => groups[s]),
      );
    }
  });
});

describe('queries and runbook', () => {
  it('gives every alarm’s runbook section a saved query, and the section names it', () => {
    for (const anchor of Object.values(RunbookSection)) {
      // The lease renewer's (a two-Region stage's) are saved by its construct: test/infra-regions.test.ts.
      const queries = [...LOG_QUERIES, ...RENEWER_LOG_QUERIES].filter((q) => q.runbook.includes(anchor));
      expect(queries.length, anchor).toBeGreaterThan(0);
      for (const query of queries)
        expect(section(anchor), `#${anchor}`).toContain(`TokenBroker-<stage>/${query.name}`);
    }
  });

  it('points every alarm section at `token-broker status` and the vendor’s diagnostic rules where they apply', () => {
    for (const anchor of [
      RunbookSection.NoUsableToken,
      RunbookSection.TokenValidityLow,
      RunbookSection.CredentialsRejected,
      RunbookSection.VendorUnavailable,
      RunbookSection.EnvMismatch,
      RunbookSection.VendorRateLimited,
      RunbookSection.PermitDenials,
    ]) {
      expect(section(anchor), `#${anchor}`).toContain('token-broker status');
    }
    for (const anchor of [
      RunbookSection.EnvMismatch,
      RunbookSection.VendorRateLimited,
      RunbookSection.VendorUnavailable,
    ]) {
      expect(section(anchor), `#${anchor}`).toContain('vendor-api.md §7');
    }
  });

  it('filters on log messages and decisions the functions really write', () => {
    const sources = [
      'shared/tokens/refresh-attempt.ts',
      'shared/tokens/refresher.ts',
      'shared/vend/vend-handler.ts',
      'shared/vend/routes/permit-routes.ts',
      'shared/vend/router.ts',
    ]
      .map((file) => readFileSync(file, 'utf8'))
      .join('\n');
    const quoted = LOG_QUERIES.flatMap((q) =>
      [...(q.query?.filterStatements ?? []).join(' ').matchAll(/"([^"]+)"/g)].map((m) => m[1] ?? ''),
    ).filter((literal) => !['ERROR', 'REPORT'].includes(literal));
    expect(quoted.length).toBeGreaterThan(5);
    for (const literal of quoted) expect(sources, literal).toContain(`'${literal}'`);
  });
});
