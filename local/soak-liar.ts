import { FunctionUrlSigner } from '../client/sigv4.js';

/**
 * The classes soak's liar (issue 32, point 8): a caller of its own principal, so of its own callerTag on the
 * broker's side, that sends false class reports to `POST /v1/credential-sets/{id}/rate-limit-reports` with a live
 * token id, as a consumer that read an answer's X-RateLimit-* would, and sends no vendor request. It reports
 * through the vend API directly, not the client library: the client reports only what an answer said.
 */

/** The soak-only caller (SigV4 keys for the local Function URL only, like local/broker.config.json's). */
export const LIAR_CALLER = {
  name: 'soak-liar',
  accessKeyId: 'AKIASOAKLIAR00000001',
  secretAccessKey: 'local-only-soak-liar-consumer-secret',
  principalArn: 'arn:aws:iam::000000000000:role/soak-liar',
};

/** One false report and the broker's answer to it. */
export interface LiarReport {
  /** Epoch ms it was sent. */
  at: number;
  class: string;
  limit: number;
  remaining: number;
  /** Unix seconds. */
  reset: number;
  /** The broker's HTTP status (204: taken). */
  status: number;
}

export interface LiarAccess {
  vendUrl: string;
  region: string;
  setId: string;
  /** The set's current token id (the report must name a live token of the set). */
  tokenId: () => Promise<string>;
}

export class SoakLiar {
  readonly reports: LiarReport[] = [];
  readonly #access: LiarAccess;
  readonly #signer: FunctionUrlSigner;

  constructor(access: LiarAccess) {
    this.#access = access;
    this.#signer = new FunctionUrlSigner({
      region: access.region,
      credentials: { accessKeyId: LIAR_CALLER.accessKeyId, secretAccessKey: LIAR_CALLER.secretAccessKey },
    });
  }

  /** "`limit`, `remaining` left, reset in `resetSeconds`" for `reportClass`, reset on this process's clock. */
  async report(
    reportClass: string,
    limit: number,
    remaining: number,
    resetSeconds: number,
  ): Promise<LiarReport> {
    const at = Date.now();
    const reset = Math.ceil(at / 1000) + resetSeconds;
    let status: number;
    try {
      const body = JSON.stringify({
        tokenId: await this.#access.tokenId(),
        class: reportClass,
        limit,
        remaining,
        reset,
      });
      const signed = await this.#signer.sign({
        url: `${this.#access.vendUrl}/v1/credential-sets/${encodeURIComponent(this.#access.setId)}/rate-limit-reports`,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      const response = await fetch(signed.url, { method: signed.method, headers: signed.headers, body });
      await response.arrayBuffer();
      status = response.status;
    } catch {
      // The broker did not answer (a restart, a closed run): counted as status 0.
      status = 0;
    }
    const report = { at, class: reportClass, limit, remaining, reset, status };
    this.reports.push(report);
    return report;
  }
}
