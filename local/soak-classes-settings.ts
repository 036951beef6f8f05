import type { SandboxFamily, SandboxLimit } from '../sandbox/index.js';
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
 * - Issue 32's variants, each a `learned` run with one thing of the world changed (CLASSES_VARIANT_TEXT).
 *
 * The vendor sandbox is the judge: its log of rate-limited outcomes (served and refused, with the limit that
 * refused) gives the 429s per class and the busiest span of every window.
 */
export const CLASSES_VARIANTS = [
  'learned',
  'configured',
  'vendor-behind',
  'vendor-ahead',
  'three-windows',
  'limit-change',
  'restart',
  'liar',
] as const;
export type ClassesVariant = (typeof CLASSES_VARIANTS)[number];

/** Every variant but `configured` hides the class limits from the broker: it learns them. */
export const learnsClasses = (variant: ClassesVariant): boolean => variant !== 'configured';

/** The vendor changes a family's limits while the soak runs (the sandbox's runtime update). */
export interface LimitChange {
  /** Of the run's duration, from the consumers' start. */
  atFraction: number;
  family: string;
  limits: SandboxLimit[];
}

/**
 * One extra caller, of its own principal (so its own callerTag on the broker's side), that sends false class
 * reports to the broker's rate-limit-reports endpoint and no vendor request (soak-liar.ts).
 */
export interface LiarPlan {
  /** "limit 1, remaining 0, reset +resetSeconds" for one class, every `everySeconds` from one fraction of the run to another. */
  tight?: {
    class: string;
    resetSeconds: number;
    everySeconds: number;
    fromFraction: number;
    untilFraction: number;
  };
  /** "limit L, remaining L - 1, reset +resetSeconds" for one class, once, before any consumer starts (its probe). */
  loose?: { class: string; limit: number; resetSeconds: number };
}

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
  /** The vendor's clock minus the broker's, in seconds (the sandbox's clockOffsetSeconds); default 0. */
  vendorClockOffsetSeconds?: number;
  /** Family limits the vendor changes mid-run. */
  limitChanges?: LimitChange[];
  /**
   * The broker's functions (vend API, refresher) stopped and started again at this fraction of the run, on the same
   * dynalite data and sandbox: tokens and learned limits persist, every process's memory does not.
   */
  restartAtFraction?: number;
  liar?: LiarPlan;
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

/** What each variant changes of the world, for its table's title. */
export const CLASSES_VARIANT_TEXT: Record<ClassesVariant, string> = {
  learned: 'class limits LEARNED: the broker was told paths only',
  configured: 'class limits CONFIGURED',
  'vendor-behind': "LEARNED, the vendor's clock 30 s BEHIND the broker's",
  'vendor-ahead': "LEARNED, the vendor's clock 120 s AHEAD of the broker's",
  'three-windows': 'LEARNED, reports with THREE windows (10/10 s + 20/30 s + 30/60 s)',
  'limit-change':
    'LEARNED, one window a family, the vendor CHANGES them mid-run: rebalancing 4/60 s -> 8/60 s at 1/3, ' +
    'reports 10/60 s -> 6/60 s at 2/3',
  restart:
    "LEARNED, the broker's functions RESTARTED at 1/2 on the same dynalite data (tokens, learned limits)",
  liar:
    'LEARNED, plus a LIAR (its own caller): "1, 0 left, reset +60 s" for reports every 30 s from 1/6 to 2/3, and ' +
    '"49, 48 left, reset +60 s" for rebalancing on its probe before any honest answer',
};

/**
 * A variant's settings on a base (CLASSES_SOAK_DEFAULTS with the run's duration). The values of issue 32, point 8,
 * for a 300 s run with 90 s tokens counted per token by the vendor: a window longer than a token's life never
 * fills, so the three windows are 10 s, 30 s and 60 s (each binds in turn: 10/10 s allows 30 per 30 s, 20/30 s 40
 * per 60 s); an hour's window would only be a limit no run of this soak reaches.
 */
export function classesVariantSettings(
  variant: ClassesVariant,
  base: Omit<ClassesSoakSettings, 'variant'>,
): ClassesSoakSettings {
  const settings: ClassesSoakSettings = { ...base, variant };
  const family = (name: string, limits: SandboxLimit[]): SandboxFamily => ({
    name,
    pathPrefix: `/${name}/`,
    limits,
  });
  switch (variant) {
    case 'vendor-behind':
      return { ...settings, vendorClockOffsetSeconds: -30 };
    case 'vendor-ahead':
      return { ...settings, vendorClockOffsetSeconds: 120 };
    case 'three-windows':
      return {
        ...settings,
        families: base.families.map((f) =>
          f.name === 'reports'
            ? family('reports', [
                { limit: 10, windowSeconds: 10 },
                { limit: 20, windowSeconds: 30 },
                { limit: 30, windowSeconds: 60 },
              ])
            : f,
        ),
      };
    case 'limit-change':
      return {
        ...settings,
        families: [
          family('reports', [{ limit: 10, windowSeconds: 60 }]),
          family('rebalancing', [{ limit: 4, windowSeconds: 60 }]),
        ],
        limitChanges: [
          { atFraction: 1 / 3, family: 'rebalancing', limits: [{ limit: 8, windowSeconds: 60 }] },
          { atFraction: 2 / 3, family: 'reports', limits: [{ limit: 6, windowSeconds: 60 }] },
        ],
      };
    case 'restart':
      return { ...settings, restartAtFraction: 1 / 2 };
    case 'liar':
      return {
        ...settings,
        liar: {
          tight: {
            class: 'reports',
            resetSeconds: 60,
            everySeconds: 30,
            fromFraction: 1 / 6,
            untilFraction: 2 / 3,
          },
          loose: { class: 'rebalancing', limit: 49, resetSeconds: 60 },
        },
      };
    default:
      return settings;
  }
}
