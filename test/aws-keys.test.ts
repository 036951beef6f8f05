import { describe, expect, it } from 'vitest';
import {
  KEY_PREFIX,
  learnedKey,
  leaseKey,
  reloginKey,
  reportCountKey,
  setKey,
  tokenKey,
} from '../shared/aws/keys.js';

/**
 * Every partition key as the releases before this one wrote it (shared/aws/keys.ts): a canary and a rollback run two
 * releases on the same items, so a key that changed would split one item's count in two. The strings are the ones
 * those stores built inline: `token#`, `set#` and `report#` as release N-1 (668d70e) did, `learned#` and `lease#`
 * as a6dc151 (the two-Region rollback's N-1) did.
 */
describe('the DynamoDB keys', () => {
  const pk = (key: Record<string, { S?: string }>) => key.pk?.S;

  it('builds each kind of item under its own prefix, as the releases before did', () => {
    expect(pk(tokenKey('0a1b2c3d4e5f6071'))).toBe('token#0a1b2c3d4e5f6071');
    expect(pk(tokenKey('set-acme'))).toBe('token#set-acme');
    expect(pk(learnedKey('acme-prod'))).toBe('learned#acme-prod');
    expect(pk(setKey('acme-prod'))).toBe('set#acme-prod');
    expect(pk(leaseKey('acme-prod', '0a1b2c3d4e5f6071'))).toBe('lease#acme-prod#0a1b2c3d4e5f6071');
    expect(pk(reportCountKey('rate', 'acme-prod', 29_000_000, 'c0ffee'))).toBe(
      'report#rate#acme-prod#caller#c0ffee#29000000',
    );
    expect(pk(reportCountKey('return', 'acme-prod', 29_000_000))).toBe(
      'report#return#acme-prod#set#29000000',
    );
    expect(pk(reloginKey('acme-prod'))).toBe('report#relogin#acme-prod');
  });

  it('gives no two kinds a prefix that begins another (IAM grants by prefix)', () => {
    const prefixes = Object.values(KEY_PREFIX);
    for (const a of prefixes)
      for (const b of prefixes) if (a !== b) expect(b.startsWith(a), `${a} begins ${b}`).toBe(false);
  });
});
