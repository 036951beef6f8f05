/**
 * `npm run soak`: the end-to-end soak in fixed- and sliding-window mode (in parallel), then the reserved-consumer
 * scenario (with its reservation and first come, first served, in parallel); prints a table each and writes a
 * chart of quota use over time beside it (soak-chart.ts, docs/charts.md), with progress and the time left of the
 * whole run on stderr (soak-progress.ts). `npm run soak -- windows` runs only the first, `npm run soak --
 * reserved` only the second.
 * `npm run soak -- classes [learned|configured]`: the classes soak (issue 24), both variants in parallel unless one
 * is named; not part of the default run.
 */

import { formatTable } from './format-table.js';
import {
  RESERVED_SOAK_CONSUMER,
  RESERVED_SOAK_RATE,
  reservedSoakSettings,
  reservedTableRow,
  runSoak,
  SOAK_DEFAULTS,
  type SoakResult,
  soakFailures,
  soakTableRow,
} from './soak.js';
import { writeSoakChart } from './soak-chart.js';
import {
  CLASSES_SOAK_DEFAULTS,
  type ClassesSoakResult,
  type ClassesVariant,
  classesSoakFailures,
  classesTableRow,
  runClassesSoak,
} from './soak-classes.js';
import { SoakProgress } from './soak-progress.js';
import { percentile } from './soak-report.js';

const MIN_QUOTA_USED_PCT = 95;
/** The issue's goal for the reserved consumer (p99 wait under 1 s of a 60 s window), scaled: see the footnote. */
const GOAL_P99_WINDOW_FRACTION = 0.1;

function printClientLines(results: SoakResult[]): void {
  for (const result of results) {
    process.stdout.write(
      `${result.rows[0]?.mode ?? result.settings.windowKind}: ${result.logLines} log lines, secrets in logs: ` +
        `${result.secretsInLogs}, client errors: ${JSON.stringify(result.clientErrors)}\n`,
    );
  }
}

async function windowsSoak(lifetimes: number, progress: SoakProgress): Promise<string[]> {
  progress.startPart();
  const settings = { ...SOAK_DEFAULTS, lifetimes };
  process.stderr.write(
    `soak: ${settings.consumers} consumers per mode on ${settings.setIds.join(', ')}, tokens living ` +
      `${settings.tokenLifetimeSeconds} s, ${settings.lifetimes} lifetimes, limits ` +
      `${settings.limits.map((l) => `${l.limit}/${l.windowSeconds}s`).join(' + ')}\n`,
  );
  const results = await Promise.all(
    (['fixed', 'sliding'] as const).map((windowKind) => runSoak({ ...settings, windowKind }, progress.line)),
  );
  process.stdout.write(
    `${formatTable({ title: 'soak', rows: results.flatMap((r) => r.rows.map(soakTableRow)) })}\n\n`,
  );
  const chart = await writeSoakChart(
    'soak-windows',
    [
      'soak: fixed and sliding vendor windows (npm run soak -- windows)',
      `${settings.consumers} consumers per mode, ${lifetimes} token lifetimes of ${settings.tokenLifetimeSeconds} s`,
    ],
    results,
  );
  process.stdout.write(`chart (quota use over time): ${chart}\n`);
  printClientLines(results);
  process.stdout.write('\n');
  return results.flatMap((result) => soakFailures(result, MIN_QUOTA_USED_PCT));
}

async function reservedSoak(lifetimes: number, progress: SoakProgress): Promise<string[]> {
  progress.startPart();
  const base = { ...SOAK_DEFAULTS, lifetimes };
  const cases = [reservedSoakSettings(base, false), reservedSoakSettings(base, true)];
  const seconds = base.lifetimes * base.tokenLifetimeSeconds;
  const shortest = Math.min(...base.limits.map((l) => l.windowSeconds));
  process.stderr.write(
    `soak (reserved consumer): ${base.consumers} consumers on ${cases[0]?.setIds.join(', ')}, ` +
      `${RESERVED_SOAK_CONSUMER} at ${RESERVED_SOAK_RATE} per ${shortest} s, the others greedy, ${seconds} s, ` +
      'first come, first served and reserved side by side\n',
  );
  const results = await Promise.all(cases.map((settings) => runSoak(settings, progress.line)));
  const limits = base.limits.map((l) => `${l.limit}/${l.windowSeconds} s`).join(' + ');
  process.stdout.write(
    `${formatTable({
      title:
        `soak, reserved consumer: 1 of ${base.consumers} consumers (${RESERVED_SOAK_CONSUMER}, steady at ` +
        `${RESERVED_SOAK_RATE} per ${shortest} s = ${(100 * RESERVED_SOAK_RATE) / (base.limits[0]?.limit ?? 1)} % ` +
        `of the short limit) among ${base.consumers - 1} greedy ones, one token at a time of prod-execution; ` +
        `REAL time over HTTP + SigV4 through the local Function URL (dynalite, sliding-window vendor sandbox ` +
        `${limits}, ledger margin ${base.marginSeconds} s, permit validity ${base.permitValiditySeconds} s), ` +
        `${seconds} s per case, both cases at once`,
      rows: results.map(reservedTableRow),
      footnote:
        `Wait: from the moment ${RESERVED_SOAK_CONSUMER} wanted its permit (every ${shortest / RESERVED_SOAK_RATE} s; it ` +
        'asks for the next one only once the last was sent) to the moment its vendor request left with the permit ' +
        '(the client sends it with nothing awaited in between), in real seconds and as a fraction of the 10 s window. ' +
        'Served: had its permit before the end. Permits granted: by the broker on the set, all consumers (its own). ' +
        'Vendor 429/401: as the vendor sandbox answered them. Quota used: accepted requests over the most the ' +
        "vendor's limits allow in each token's span of use (sliding reading); the ledger counts each window over " +
        `window + ${base.marginSeconds} s, so at most ${((100 * shortest) / (shortest + base.marginSeconds)).toFixed(1)} % ` +
        'when the short limit binds, and a reservation is not lent, so its unused part (the +1 of the sizing, and ' +
        'the rate over the margin) is lost. Within reservation: QUOTA denials of asks its own grants left room for ' +
        '(the ledger promises none). Goal scaling: the issue asks for a p99 wait under 1 s with 60 s windows; ' +
        `latency does not compress, so here under ${GOAL_P99_WINDOW_FRACTION} of the 10 s window (1 s real; ` +
        'strictly proportional would be 1/60 of it, 0.17 s).',
    })}\n\n`,
  );
  const chart = await writeSoakChart(
    'soak-reserved',
    [
      'soak, reserved consumer (npm run soak -- reserved)',
      `first come, first served and reserved side by side, ${seconds} s, ${limits}`,
    ],
    results,
  );
  process.stdout.write(`chart (quota use over time): ${chart}\n`);
  printClientLines(results);
  const reservedRow = results[1]?.rows.find((row) => row.reserved);
  const figures = reservedRow?.reserved;
  if (reservedRow && figures) {
    const p99 = percentile(figures.waitsMs, 99) / 1000;
    const servedPct = (100 * figures.served) / Math.max(1, figures.wanted);
    const goals = [
      `served 100 %: ${servedPct === 100 ? 'met' : `not met (${servedPct.toFixed(1)} %)`}`,
      `p99 wait under ${GOAL_P99_WINDOW_FRACTION * shortest} s: ${p99 < GOAL_P99_WINDOW_FRACTION * shortest ? 'met' : 'not met'} (${p99.toFixed(3)} s)`,
      `total use >= 95 %: ${reservedRow.quotaUsedPct >= 95 ? 'met' : 'not met'} (${reservedRow.quotaUsedPct} %)`,
      `0 vendor 429: ${reservedRow.vendor429 === 0 && reservedRow.sandbox429 === 0 ? 'met' : 'not met'}`,
    ];
    process.stdout.write(`issue 17's goal, reported (not gated): ${goals.join('; ')}\n`);
  }
  process.stdout.write('\n');
  // Gated: what load cannot excuse (429s, 401s the broker could have avoided, logins, secrets, and a QUOTA
  // denial of the reserved consumer within its reservation); served %, waits and quota use are reported only.
  return results.flatMap((result) => soakFailures(result));
}

/** The issue's goal for quota use after learning, per binding limit; reported, not gated (load moves it). */
const GOAL_CLASSES_QUOTA_USED_PCT = 90;

async function classesSoak(only: string | undefined): Promise<string[]> {
  const variants: ClassesVariant[] =
    only === undefined ? ['learned', 'configured'] : [only as ClassesVariant];
  if (!variants.every((v) => v === 'learned' || v === 'configured'))
    throw new Error(`unknown classes variant "${only}" (learned, configured)`);
  const seconds = Number(process.env.SOAK_CLASSES_SECONDS ?? CLASSES_SOAK_DEFAULTS.durationSeconds);
  if (!Number.isFinite(seconds) || seconds < 10)
    throw new Error(
      `SOAK_CLASSES_SECONDS must be a number of seconds, at least 10 (got "${process.env.SOAK_CLASSES_SECONDS}")`,
    );
  const base = { ...CLASSES_SOAK_DEFAULTS, durationSeconds: seconds };
  const limits = (l: { limit: number; windowSeconds: number }[]) =>
    l.map((x) => `${x.limit}/${x.windowSeconds} s`).join(' + ');
  process.stderr.write(
    `soak (classes): ${base.consumers} consumers on ${base.setId}, each a general lane and a class lane, ` +
      `${base.durationSeconds} s per variant (${variants.join(' and ')} side by side), tokens living ` +
      `${base.tokenLifetimeSeconds} s\n`,
  );
  const failures: string[] = [];
  const progress = new SoakProgress([base.durationSeconds], (line) => process.stderr.write(line));
  progress.startPart();
  const settled = await Promise.allSettled(
    variants.map((variant) => runClassesSoak({ ...base, variant }, progress.line)),
  );
  settled.forEach((outcome, index) => {
    const variant = variants[index];
    if (outcome.status === 'rejected') {
      failures.push(`classes (${variant}) could not run: ${String(outcome.reason).slice(0, 400)}`);
      return;
    }
    const result: ClassesSoakResult = outcome.value;
    process.stdout.write(
      `${formatTable({
        title:
          `soak, classes (${variant === 'learned' ? 'class limits LEARNED: the broker was told paths only' : 'class limits CONFIGURED'}): ` +
          `${base.consumers} consumers on ${base.setId}, REAL time over HTTP + SigV4 through the local Function URL ` +
          `(dynalite, ${base.windowKind}-window vendor sandbox: general ${limits(base.limits)}, ` +
          `${base.families.map((f) => `${f.name} ${limits(f.limits)}`).join(', ')}; ledger margin ${base.marginSeconds} s, ` +
          `permits valid ${base.permitValiditySeconds} s), each consumer a greedy class lane and a general lane ` +
          `${base.generalPerSecond === undefined ? '(greedy)' : `(${base.generalPerSecond}/s in all, paced)`}, ` +
          `${result.elapsedSeconds.toFixed(0)} s`,
        rows: result.rows.map(classesTableRow),
        footnote:
          'Requests and served: vendor requests of the class (general: all of them, as the general limits count ' +
          "every request) and those the vendor served (its own log). 429: the vendor's refusals that this row's " +
          'limits caused (its log names the refusing limit), on requests sent before the first answer of the class ' +
          "arrived (learning) and after. Quota used: served after learning over the most the vendor's limits allow " +
          "in each token's span of use after learning (sliding reading). Busiest: the most served to one token in " +
          "any span of each window, from the vendor's log. Learn s: from the first request of the class to the " +
          'learnedAt of the first learned limit the broker showed the operator (GET /v1/credential-sets, polled ' +
          'every second). Learned at the end: what the broker showed then, and how many polls after learning ' +
          'found the class back at the probe (1 per 10 s).',
      })}\n`,
    );
    if (result.status !== undefined)
      process.stdout.write(
        `token-broker status ${base.setId}, as the operator ran it two thirds into the run:\n${result.status}\n`,
      );
    process.stdout.write(
      `classes (${variant}): vendor 401s ${result.vendor401}, secrets in logs ${result.secretsInLogs}, client errors ${JSON.stringify(result.clientErrors)}\n`,
    );
    const goals = result.rows.map((row) => {
      // Paced general lanes leave the general limits unbound: only the 429s count for that row.
      const binding = row.quota !== 'general' || base.generalPerSecond === undefined;
      const met =
        row.vendor429After === 0 &&
        row.vendor429Learning <= 1 &&
        (!binding || row.quotaUsedPct >= GOAL_CLASSES_QUOTA_USED_PCT);
      const use = binding
        ? `${row.quotaUsedPct} %`
        : `${row.quotaUsedPct} %, not binding: general demand paced at ${base.generalPerSecond}/s`;
      const unnamed =
        row.vendor429AfterUnnamed > 0
          ? `, ${row.vendor429AfterUnnamed} of them by a limit not yet named`
          : '';
      return `${row.quota} ${met ? 'met' : 'not met'} (${row.vendor429Learning}/${row.vendor429After} 429s${unnamed}, ${use})`;
    });
    process.stdout.write(
      `issue 24's goal (0 429 after learning, at most 1 before, >= ${GOAL_CLASSES_QUOTA_USED_PCT} % used), reported: ${goals.join('; ')}\n\n`,
    );
    failures.push(...classesSoakFailures(result));
  });
  return failures;
}

async function main(): Promise<void> {
  const which = process.argv[2] ?? 'all';
  if (!['all', 'windows', 'reserved', 'classes'].includes(which))
    throw new Error(`unknown soak "${which}" (windows, reserved, classes)`);
  if (which === 'classes') {
    const failures = await classesSoak(process.argv[3]);
    if (failures.length > 0) {
      process.stdout.write(`FAILED:\n${failures.map((f) => `  ${f}`).join('\n')}\n`);
      process.exit(1);
    }
    process.stdout.write('all classes soak promises kept\n');
    return;
  }
  const lifetimes = Number(process.env.SOAK_LIFETIMES ?? SOAK_DEFAULTS.lifetimes);
  const reservedLifetimes = Number(process.env.SOAK_RESERVED_LIFETIMES ?? 2);
  // The planned seconds of each part that runs (its consumers run for its lifetimes), for the time left.
  const parts = [
    ...(which === 'reserved' ? [] : [lifetimes]),
    ...(which === 'windows' ? [] : [reservedLifetimes]),
  ].map((partLifetimes) => partLifetimes * SOAK_DEFAULTS.tokenLifetimeSeconds);
  const progress = new SoakProgress(parts, (line) => process.stderr.write(line));
  const failures = [
    ...(which === 'reserved' ? [] : await windowsSoak(lifetimes, progress)),
    ...(which === 'windows' ? [] : await reservedSoak(reservedLifetimes, progress)),
  ];
  if (failures.length > 0) {
    process.stdout.write(`FAILED:\n${failures.map((f) => `  ${f}`).join('\n')}\n`);
    process.exit(1);
  }
  process.stdout.write('all soak promises kept\n');
}

main().catch((error: unknown) => {
  process.stderr.write(`soak: ${String(error)}\n`);
  process.exit(2);
});
