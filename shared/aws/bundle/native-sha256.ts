import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';

/**
 * Stands in for `@smithy/core/checksum` in the functions' bundles (an esbuild alias, set in
 * infra/constructs/broker-function.ts). Of that module the SDK clients and our Lambda invoke take only `Sha256`
 * (SigV4's hash); `@smithy/core`'s own falls back to a hash in JavaScript when Node has no native crypto, which
 * Lambda's Node always has, and the module re-exports MD5, CRC32 and stream hashers nothing of ours calls: about
 * 4 KiB a cold start parses for nothing. This is its native branch: the same hash, through node:crypto. Should a
 * bundled module ever import another name from the module, esbuild refuses to build (no such export).
 */
export class Sha256 {
  readonly digestLength = 32;
  readonly #secret: Uint8Array | string | undefined;
  #hash: Hash | Hmac;
  #finished = false;

  constructor(secret?: Uint8Array | string | ArrayBuffer | ArrayBufferView) {
    this.#secret = secret === undefined ? undefined : asKey(secret);
    this.#hash = this.#create();
  }

  update(data: Uint8Array): void {
    if (this.#finished) throw new Error('Attempted to update an already finished hash.');
    this.#hash.update(data);
  }

  async digest(): Promise<Uint8Array> {
    // An HMAC can be digested once; a plain hash is copied, so that more can be added after (as the SDK's does).
    let digest: Buffer;
    if (this.#secret === undefined) digest = (this.#hash as Hash).copy().digest();
    else {
      this.#finished = true;
      digest = this.#hash.digest();
    }
    return new Uint8Array(digest.buffer, digest.byteOffset, digest.byteLength);
  }

  reset(): void {
    this.#hash = this.#create();
    this.#finished = false;
  }

  #create(): Hash | Hmac {
    return this.#secret === undefined ? createHash('sha256') : createHmac('sha256', this.#secret);
  }
}

function asKey(secret: Uint8Array | string | ArrayBuffer | ArrayBufferView): Uint8Array | string {
  if (typeof secret === 'string') return secret;
  if (ArrayBuffer.isView(secret)) return new Uint8Array(secret.buffer, secret.byteOffset, secret.byteLength);
  return new Uint8Array(secret);
}
