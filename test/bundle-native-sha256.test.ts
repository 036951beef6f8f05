import { Sha256 as SmithySha256 } from '@smithy/core/checksum';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Sha256 } from '../shared/aws/bundle/native-sha256.js';

/**
 * The functions' bundles take `Sha256` from shared/aws/bundle/native-sha256.ts instead of `@smithy/core/checksum`
 * (infra/constructs/broker-function.ts): SigV4 signs every AWS call with it, so its digests must be the SDK's own,
 * byte for byte, for hashes and HMACs alike.
 */
const utf8 = (text: string) => new TextEncoder().encode(text);

describe('the bundles’ SHA-256 stand-in', () => {
  it('digests as @smithy/core’s Sha256 does: plain and HMAC, string or bytes, in several updates', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof(fc.string(), fc.uint8Array({ maxLength: 200 })), { maxLength: 5 }),
        fc.option(fc.oneof(fc.string({ minLength: 1 }), fc.uint8Array({ minLength: 1, maxLength: 64 })), {
          nil: undefined,
        }),
        async (chunks, secret) => {
          const ours = new Sha256(secret);
          const theirs = new SmithySha256(secret);
          for (const chunk of chunks) {
            const bytes = typeof chunk === 'string' ? utf8(chunk) : chunk;
            ours.update(bytes);
            theirs.update(bytes);
          }
          expect(Buffer.from(await ours.digest()).toString('hex')).toBe(
            Buffer.from(await theirs.digest()).toString('hex'),
          );
        },
      ),
      { numRuns: 200 },
    );
  });

  it('a plain hash digests again after more updates; an HMAC is finished once digested; reset starts over', async () => {
    const hash = new Sha256();
    hash.update(utf8('a'));
    const first = Buffer.from(await hash.digest()).toString('hex');
    hash.update(utf8('b'));
    const reference = new SmithySha256();
    reference.update(utf8('ab'));
    expect(Buffer.from(await hash.digest()).toString('hex')).toBe(
      Buffer.from(await reference.digest()).toString('hex'),
    );
    expect(first).not.toBe(Buffer.from(await hash.digest()).toString('hex'));
    const hmac = new Sha256('key');
    hmac.update(utf8('x'));
    await hmac.digest();
    expect(() => hmac.update(utf8('y'))).toThrow('Attempted to update an already finished hash.');
    hmac.reset();
    hmac.update(utf8('x'));
    const again = new SmithySha256('key');
    again.update(utf8('x'));
    expect(Buffer.from(await hmac.digest()).toString('hex')).toBe(
      Buffer.from(await again.digest()).toString('hex'),
    );
  });
});
