import type { SandboxFamily } from '../sandbox/index.js';
import { SOAK_DEFAULTS, type SoakSettings } from './soak.js';

/**
 * The classes soak (issue 24, "Show"): the local broker, a vendor sandbox with endpoint families whose limits are
 * lower than the general ones, and consumers sending general, report and rebalancing requests through the
 * client's vendor request API, in REAL time over HTTP + SigV4 through the local Function URL.
 *
 * - `learned`: the set's classes are configured with paths only (`{ "paths": ["/reports/**"] }`, contract point
 *   1): the broker was not told the limits and learns them from the vendor's answers; requests name no class (the
 *   client classifies them by path).
 * - `configured`: the same paths with the sandbox's limits (`{ "paths": [...], "limits": [...] }`): no learning.
 *
 * The vendor sandbox is the judge: its log of rate-limited outcomes (served and refused, with the limit that
 * refused) gives the 429s per class and the busiest span of every window.
 */
export type ClassesVariant = 'learned' | 'configured';

export interface ClassesSoakSettings extends Omit<SoakSettings, 'setIds' | 'reserved' | 'lifetimes'> {
  variant: ClassesVariant;
  setId: string;
  /** The vendor's endpoint families: their limits are the sandbox's (hidden from the broker when learned). */
  families: SandboxFamily[];
  /** Real seconds of demand. */
  durationSeconds: number;
  /**
   * The general lanes' requests per second in all, paced; undefined: greedy. Paced below the general limits, the
   * class limits are the binding ones (greedy general lanes keep the general limit full, and a class request
   * needs general room too, so a class could not be measured against its own limits).
   */
  generalPerSecond?: number;
}

/**
 * `npm run soak -- classes`: 20 consumers on uat-advisor for 300 s each case, tokens living 90 s (so the second
 * token must keep what the first one learned), sliding vendor windows (the strictest reading). General limits as
 * the windows soak (50/10 s + 300/60 s, "minute" and "hour" compressed); the families 5-12 times lower, each
 * window binding in turn: reports 10/10 s + 30/60 s, rebalancing 4/10 s + 12/60 s.
 */
export const CLASSES_SOAK_DEFAULTS: Omit<ClassesSoakSettings, 'variant'> = {
  ...SOAK_DEFAULTS,
  windowKind: 'sliding',
  setId: 'uat-advisor',
  // 300 s: a run ends mid-window and a token change restarts the vendor's count; over 150 s those edges moved
  // the quota used by +-8 points from run to run, over 300 s they weigh half as much.
  durationSeconds: 300,
  // Compressed 10 s windows with real HTTP round trips (p99 0.3-0.5 s on 2 busy cores): a 0.15 s permit lapsed
  // before it was sent for about one grant in ten (docs/classes-soak-quota.md); 0.4 s inside a 0.5 s margin.
  marginSeconds: 0.5,
  permitValiditySeconds: 0.4,
  // 3 a second in all: 60 % of the general limits, so the classes' own limits bind (the general limits bind in
  // `npm run soak -- windows`).
  generalPerSecond: 3,
  families: [
    {
      name: 'reports',
      pathPrefix: '/reports/',
      limits: [
        { limit: 10, windowSeconds: 10 },
        { limit: 30, windowSeconds: 60 },
      ],
    },
    {
      name: 'rebalancing',
      pathPrefix: '/rebalancing/',
      limits: [
        { limit: 4, windowSeconds: 10 },
        { limit: 12, windowSeconds: 60 },
      ],
    },
  ],
};
