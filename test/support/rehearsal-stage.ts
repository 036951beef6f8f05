import { busiestSpans, spanExcesses } from '../../local/soak-report.js';
import type { Sandbox } from '../../sandbox/index.js';
import type { ManualClock } from '../../shared/clock.js';
import { RENEW_MS } from '../../shared/regions/lease.js';
import type { Deployment } from './regions-rehearsal.js';

/** What each Region runs: its vend function's versions (the new one takes `canary` of the asks), its renewers. */
export interface RegionState {
  serving: Deployment[];
  canary: number;
  /** General asks a second (the Region's services). */
  rate: number;
  classAsks: boolean;
  refresher: Deployment | undefined;
  renewer: Deployment | undefined;
}

export interface Figures {
  granted: Map<string, number>;
  denied: Map<string, number>;
  noToken: number;
  vendorStatuses: Map<number, number>;
}

/**
 * A stage's Regions serving consumers on a manual clock, a second at a time (docs/deploying.md, Rolling back a
 * two-Region stage, as test/regions-rollback.test.ts rehearses it): each Region's services ask permits at their
 * rate (general ones, and one of the learned class a second where `classAsks`) and call the vendor with each; the
 * Region's vend versions share the asks as a canary shares them; its renewer runs every RENEW_MS and its refresher
 * every 5 minutes. What a step of the procedure changes is which deployments a Region runs.
 */
export class RehearsalStage {
  readonly regions: Record<string, RegionState>;
  readonly figures: Figures = {
    granted: new Map(),
    denied: new Map(),
    noToken: 0,
    vendorStatuses: new Map(),
  };
  readonly lastShares = new Map<string, Record<string, number>>();
  #asks = 0;
  #carry: Record<string, number> = {};

  constructor(
    readonly clock: ManualClock,
    readonly sandbox: Sandbox,
    readonly limits: {
      start: number;
      regions: readonly string[];
      general: readonly { limit: number; windowSeconds: number }[];
      /** The learned class's family at the vendor. */
      family: { name: string; limits: readonly { limit: number; windowSeconds: number }[] };
      marginMs: number;
    },
  ) {
    this.regions = Object.fromEntries(
      limits.regions.map((name) => [
        name,
        { serving: [], canary: 0, rate: 1.2, classAsks: false, refresher: undefined, renewer: undefined },
      ]),
    );
  }

  /** The vendor's quotas: the general limits, and the class's family. */
  #quotas() {
    return [
      { family: undefined, limits: this.limits.general },
      { family: this.limits.family.name, limits: this.limits.family.limits },
    ];
  }

  /** Runs `ms` of the stage, a second at a time: asks, renewals every RENEW_MS, the refresher every 5 minutes. */
  async run(ms: number): Promise<void> {
    for (let elapsed = 0; elapsed < ms; elapsed += 1000) {
      await this.clock.advance(1000);
      const now = this.clock.now();
      const t = now - this.limits.start;
      if (t % 300_000 === 0)
        for (const region of Object.values(this.regions)) await region.refresher?.refresher.runScheduled();
      if (t % RENEW_MS === 0)
        for (const [name, region] of Object.entries(this.regions)) {
          const renewals = (await region.renewer?.renewer?.renewAll()) ?? [];
          for (const r of renewals) if (r.shares) this.lastShares.set(name, r.shares);
        }
      for (const [name, region] of Object.entries(this.regions)) {
        if (region.serving.length === 0) continue;
        for (const deployment of region.serving) await deployment.readToken(now);
        this.#carry[name] = (this.#carry[name] ?? 0) + region.rate;
        const asks: (string | undefined)[] = [];
        for (; (this.#carry[name] ?? 0) >= 1; this.#carry[name] = (this.#carry[name] ?? 0) - 1)
          asks.push(undefined);
        if (region.classAsks) asks.push(this.limits.family.name);
        for (const cls of asks) {
          const n = this.#asks++;
          const [old, fresh] = region.serving;
          const to = fresh && (n % 10 < region.canary * 10 || !old) ? fresh : (old as Deployment);
          const caller = cls ? (n % 2 === 0 ? 'svc-a' : 'svc-b') : 'svc-c';
          const answer = await to.serve(caller, cls, n);
          this.#count(to.label, answer);
        }
      }
    }
  }

  #count(label: string, answer: number | 'denied' | 'no token'): void {
    const { figures } = this;
    if (answer === 'no token') figures.noToken++;
    else if (answer === 'denied') figures.denied.set(label, (figures.denied.get(label) ?? 0) + 1);
    else {
      figures.granted.set(label, (figures.granted.get(label) ?? 0) + 1);
      figures.vendorStatuses.set(answer, (figures.vendorStatuses.get(answer) ?? 0) + 1);
    }
  }

  /** The figures of the run so far, one line a deployment (REHEARSAL_FIGURES=1 prints them). */
  print(engine: string, logins: number): void {
    const spans = busiestSpans(this.sandbox.requestLog(), this.#quotas());
    const rows = [...new Set([...this.figures.granted.keys(), ...this.figures.denied.keys()])].map(
      (label) =>
        `${label}: ${this.figures.granted.get(label) ?? 0} granted, ${this.figures.denied.get(label) ?? 0} denied`,
    );
    console.log(
      [
        `${engine}: ${logins} logins, ${this.figures.noToken} requests without a token`,
        ...rows,
        `vendor answers: ${JSON.stringify(Object.fromEntries(this.figures.vendorStatuses))}`,
        ...spans.map(
          (f) => `busiest span of ${f.family ?? 'general'} ${f.limit}/${f.windowSeconds} s: ${f.busiest}`,
        ),
      ].join('\n'),
    );
  }

  /** What the vendor served of the user's budget in the span of a window (plus the margin) ending now. */
  servedInSpan(windowSeconds: number): number {
    const from = this.clock.now() - windowSeconds * 1000 - this.limits.marginMs;
    return this.sandbox.requestLog().filter((e) => e.served && e.at >= from).length;
  }

  /** The vendor's own log against its limits: every span over a limit, and every refusal. */
  vendorExcesses(): string[] {
    const log = this.sandbox.requestLog();
    return [
      ...spanExcesses(busiestSpans(log, this.#quotas())),
      ...log.filter((e) => !e.served).map((e) => `refused at +${(e.at - this.limits.start) / 1000} s`),
    ];
  }
}
