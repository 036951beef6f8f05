import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

/**
 * The reporting rule (what a consumer reports to POST .../rate-limit-reports, when, how often, per what) is
 * stated once, in the same words, in docs/vend-api.md, in the OpenAPI description of that operation and in the
 * client's README: before, each said it its own way, and one said nothing of whether it was per process.
 */
const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');
/** Line breaks, indentation and a README's blockquote marks are layout, not wording. */
const words = (text: string) => text.replaceAll(/\n\s*(> )?/g, ' ').replaceAll(/\s+/g, ' ');

describe('the reporting rule', () => {
  const prose = words(read('docs/vend-api.md'));
  const rule = /\*\*The reporting rule\*\*.*?: (Every vendor 429 .+? and per set\.)/.exec(prose)?.[1];

  it('is stated in docs/vend-api.md, and says per what it is kept', () => {
    expect(rule).toBeDefined();
    expect(rule).toContain('once per (token, class, limit, reset)');
    expect(rule).toContain('per `BrokerClient`');
    expect(rule).toContain('per caller');
  });

  it('is stated in the same words in the OpenAPI description of the rate-limit-reports operation', () => {
    const document = parse(read('docs/vend-api.openapi.yaml')) as {
      paths: Record<string, { post?: { description?: string } }>;
    };
    const description = document.paths['/v1/credential-sets/{id}/rate-limit-reports']?.post?.description;
    expect(words(description ?? '')).toContain(rule);
  });

  it("is stated in the same words in the client's README, where reportRateLimit is", () => {
    const readme = words(read('client/README.md'));
    expect(readme).toContain(rule);
    expect(readme.indexOf(rule ?? '')).toBeGreaterThan(
      readme.indexOf('`reportRateLimit(setId, tokenId, answer'),
    );
  });
});
