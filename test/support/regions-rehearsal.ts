import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Sandbox } from '../../sandbox/index.js';
import type { ManualClock } from '../../shared/clock.js';
import type { CredentialSetConfig } from '../../shared/config/credential-sets.js';
import * as currentSets from '../../shared/config/credential-sets.js';
import * as currentLedger from '../../shared/ledger/index.js';
import { MemoryTelemetry } from '../../shared/observability.js';
import * as currentLeaseStore from '../../shared/regions/lease-store.js';
import * as currentRenewer from '../../shared/regions/renewer.js';
import * as currentTokens from '../../shared/tokens/index.js';
import type { TokenView } from '../../shared/tokens/token-state.js';
import { ledgerKeyFor } from '../../shared/vend/ledger-key.js';
import * as currentVendor from '../../shared/vendor-client/client.js';
import { previousReleaseModule } from './previous-release.js';
import { instantSleeps, VENDOR_CLIENT_ATTEMPTS } from './refresher-harness.js';
import { call } from './sandbox-http.js';

/**
 * A release as a rollback rehearsal deploys it: every part of a serving stack that touches DynamoDB or the vendor
 * (docs/deploying.md, Rolling back a two-Region stage), each from that release's own `shared/` tree. The types are
 * the current release's: N-1's modules are claimed to fit them, and the rehearsal is what checks it.
 */
export interface Release {
  name: string;
  RegionalRateLedger: typeof currentLedger.RegionalRateLedger;
  LeaseRenewer: typeof currentRenewer.LeaseRenewer;
  LeaseStore: typeof currentLeaseStore.LeaseStore;
  DynamoTokenStore: typeof currentTokens.DynamoTokenStore;
  Refresher: typeof currentTokens.Refresher;
  VendorClient: typeof currentVendor.VendorClient;
  /** The credential set as this release's own schema parses it. */
  parseSet(input: unknown): CredentialSetConfig;
}

export const currentRelease: Release = {
  name: 'current',
  RegionalRateLedger: currentLedger.RegionalRateLedger,
  LeaseRenewer: currentRenewer.LeaseRenewer,
  LeaseStore: currentLeaseStore.LeaseStore,
  DynamoTokenStore: currentTokens.DynamoTokenStore,
  Refresher: currentTokens.Refresher,
  VendorClient: currentVendor.VendorClient,
  parseSet: (input) => currentSets.credentialSetSchema.parse(input),
};

/** The release at `commit`, every part from its tree (test/support/previous-release.ts). */
export async function releaseAt(commit: string): Promise<Release> {
  const load = <T>(file: string) => previousReleaseModule<T>(file, commit);
  const sets = await load<typeof currentSets>('shared/config/credential-sets.ts');
  return {
    name: `N-1 (${commit.slice(0, 7)})`,
    // Releases before issue 34 have adoptShare and regionView on their DynamoRateLedger.
    RegionalRateLedger: (
      await load<{ DynamoRateLedger: typeof currentLedger.RegionalRateLedger }>('shared/ledger/index.ts')
    ).DynamoRateLedger,
    LeaseRenewer: (await load<typeof currentRenewer>('shared/regions/renewer.ts')).LeaseRenewer,
    LeaseStore: (await load<typeof currentLeaseStore>('shared/regions/lease-store.ts')).LeaseStore,
    DynamoTokenStore: (await load<typeof currentTokens>('shared/tokens/index.ts')).DynamoTokenStore,
    Refresher: (await load<typeof currentTokens>('shared/tokens/index.ts')).Refresher,
    VendorClient: (await load<typeof currentVendor>('shared/vendor-client/client.ts')).VendorClient,
    parseSet: (input) => sets.credentialSetSchema.parse(input),
  };
}

/** What a deployment's functions are given: the stage's tables and one login's secrets. */
export interface StageParts {
  client: DynamoDBClient;
  clock: ManualClock;
  sandbox: Sandbox;
  /** The set as written in the stage file (each release parses it). */
  setInput: unknown;
  credentials: currentTokens.RefresherOptions['credentials'];
}

/**
 * One release of one serving stack in one Region, as CloudFormation leaves it: its refresher and vend function
 * on `tokensTable`, its vend ledger on `ledgerTable` (held to the Region's share when `regional`), and in a
 * two-Region stage its lease renewer (tokens read from the MRSC table, leases in it).
 */
export class Deployment {
  readonly set: CredentialSetConfig;
  readonly store: currentTokens.DynamoTokenStore;
  readonly refresher: currentTokens.Refresher;
  readonly ledger: currentLedger.RegionalRateLedger;
  readonly renewer: currentRenewer.LeaseRenewer | undefined;
  /** The token this deployment's vend serves now (read once per tick, as its cache would). */
  #token: TokenView | undefined;
  /** Each process reports each (limit, reset) of a class once (the client's rule), every 429 always. */
  readonly #reported = new Set<string>();

  constructor(
    readonly label: string,
    readonly release: Release,
    parts: StageParts,
    tables: { tokens: string; ledger: string; global?: string; region?: string },
  ) {
    const { client, clock, sandbox } = parts;
    const telemetry = new MemoryTelemetry();
    this.set = release.parseSet(parts.setInput);
    this.store = new release.DynamoTokenStore({ client, tableName: tables.tokens });
    const vendor = new release.VendorClient({
      baseUrl: sandbox.url,
      clock: instantSleeps(clock),
      retry: { maxAttempts: VENDOR_CLIENT_ATTEMPTS },
    });
    this.refresher = new release.Refresher({
      sets: [this.set],
      store: this.store,
      credentials: parts.credentials,
      clock,
      telemetry,
      holderId: label,
      vendorFor: () => vendor,
    });
    this.ledger = new release.RegionalRateLedger({
      client,
      tableName: tables.ledger,
      clock,
      telemetry,
      conflictJitterMs: 1,
      ...(tables.global ? { regional: true } : {}),
    });
    this.renewer =
      tables.global && tables.region
        ? new release.LeaseRenewer({
            region: tables.region,
            sets: [this.set],
            tokens: new release.DynamoTokenStore({ client, tableName: tables.global }),
            ledger: this.ledger,
            leases: new release.LeaseStore({ client, tableName: tables.global }),
            clock,
            telemetry,
          })
        : undefined;
  }

  /** Reads the token this deployment serves (its vend's answer to a token request), at the start of a tick. */
  async readToken(now: number): Promise<TokenView | undefined> {
    const state = await this.store.read(this.set.id, now);
    this.#token = state?.current?.usable ? state.current : undefined;
    return this.#token;
  }

  get token(): TokenView | undefined {
    return this.#token;
  }

  /** The ledger key its permits count in (the user's budget with quotaScope user). */
  ledgerKey(): string {
    return ledgerKeyFor(this.set, this.#token?.tokenId ?? '');
  }

  /**
   * One consumer request, as a consumer with the broker's client makes it: a permit (of `cls`, if given) from this
   * deployment's ledger, then the vendor call with the served token, then the report of a class's answer. Returns
   * the vendor's status, or 'denied' (no permit) or 'no token'.
   */
  async serve(caller: string, cls: string | undefined, n: number): Promise<number | 'denied' | 'no token'> {
    const token = this.#token;
    if (!token) return 'no token';
    const limits = this.set.rateLimits;
    const tokenId = this.ledgerKey();
    const decision = await this.ledger.acquire({
      tokenId,
      count: 1,
      limits,
      setId: this.set.id,
      caller,
      ...(cls ? { class: cls } : {}),
    });
    if (!decision.granted) return 'denied';
    const reply = await call(this.set.vendorBaseUrl, 'GET', cls ? `/${cls}/r-${n}` : `/portfolios/p-${n}`, {
      token: token.accessToken,
    });
    if (cls) {
      const limit = Number(reply.headers.get('x-ratelimit-limit'));
      const reset = Number(reply.headers.get('x-ratelimit-reset'));
      const key = `${caller}:${limit}/${reset}`;
      if (reply.status === 429 || !this.#reported.has(key)) {
        this.#reported.add(key);
        await this.ledger.reportVendorFeedback({
          tokenId,
          limits,
          setId: this.set.id,
          caller,
          class: cls,
          limit,
          remaining: Number(reply.headers.get('x-ratelimit-remaining')),
          reset,
          ...(reply.status === 429 ? { retryAfterSeconds: Number(reply.headers.get('retry-after')) } : {}),
        });
      }
    }
    return reply.status;
  }
}
