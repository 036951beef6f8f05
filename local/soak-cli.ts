/**
 * `npm run soak`: the end-to-end soak in fixed- and sliding-window mode (in parallel), then the reserved-consumer
 * scenario (with its reservation and first come, first served, in parallel); prints a table each and writes a
 * chart of quota use over time beside it (soak-chart.ts, docs/charts.md), with progress and the time left of the
 * whole run on stderr (soak-progress.ts). `npm run soak -- windows` runs only the first, `npm run soak --
 * reserved` only the second.
 * `npm run soak -- classes [VARIANT...] [--variant VARIANT[,VARIANT]]... [--parallel N]`: the classes soak (issues
 * 24 and 32), `learned` and `configured` side by side unless variants are named (`all`: every one), at most N at a
 * time (default 2: the machine has two cores); not part of the default run. SOAK_CLASSES_SECONDS: seconds per
 * variant (default 300); SOAK_CLASSES_RAW_DIR: a folder for each run's record (the test file's runs too);
 * SOAK_CLASSES_DEBUG=1 with it: the broker's log at debug level beside each record (every permit decision and vendor
 * report, for a class's timeline).
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
  CLASSES_VARIANTS,
  type ClassesSoakResult,
  type ClassesVariant,
  classesSoakFailures,
  classesTableRow,
  classesVariantSettings,
  runClassesSoak,
} from './soak-classes.js';
import { CLASSES_VARIANT_TEXT } from './soak-classes-settings.js';
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

/** The variants named on the command line (positional or `--variant a,b`), and how many run at once. */
function classesArguments(args: readonly string[]): { variants: ClassesVariant[]; parallel: number } {
  const names: string[] = [];
  let parallel = 2;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    const value = (name: string) => {
      const inline = arg.startsWith(`${name}=`) ? arg.slice(name.length + 1) : undefined;
      if (inline !== undefined) return inline;
      i++;
      if (args[i] === undefined) throw new Error(`${name} needs a value`);
      return args[i] as string;
    };
    if (arg === '--variant' || arg.startsWith('--variant=')) names.push(...value('--variant').split(','));
    else if (arg === '--parallel' || arg.startsWith('--parallel=')) {
      parallel = Number(value('--parallel'));
      if (!Number.isInteger(parallel) || parallel < 1)
        throw new Error(`--parallel must be a whole number, at least 1 (got "${args[i]}")`);
    } else names.push(arg);
  }
  const known = (name: string): name is ClassesVariant =>
    (CLASSES_VARIANTS as readonly string[]).includes(name);
  const variants = names.flatMap((name) => {
    if (name === 'all') return [...CLASSES_VARIANTS];
    if (!known(name))
      throw new Error(`unknown classes variant "${name}" (${CLASSES_VARIANTS.join(', ')}, all)`);
    return [name];
  });
  return { variants: variants.length === 0 ? ['learned', 'configured'] : [...new Set(variants)], parallel };
}

/** Runs `tasks` at most `parallel` at a time, in order; settles like Promise.allSettled. */
async function inPool<T>(tasks: (() => Promise<T>)[], parallel: number): Promise<PromiseSettledResult<T>[]> {
  const outcomes: PromiseSettledResult<T>[] = [];
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const index = next++;
      const task = tasks[index] as () => Promise<T>;
      outcomes[index] = await task().then(
        (value) => ({ status: 'fulfilled', value }) as const,
        (reason: unknown) => ({ status: 'rejected', reason }) as const,
      );
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, tasks.length) }, worker));
  return outcomes;
}

function printClassesResult(result: ClassesSoakResult): void {
  const { settings } = result;
  const variant = settings.variant;
  const limits = (l: readonly { limit: number; windowSeconds: number }[]) =>
    l.map((x) => `${x.limit}/${x.windowSeconds} s`).join(' + ');
  process.stdout.write(
    `${formatTable({
      title:
        `soak, classes (${variant}: ${CLASSES_VARIANT_TEXT[variant]}): ` +
        `${settings.consumers} consumers on ${settings.setId}, REAL time over HTTP + SigV4 through the local Function URL ` +
        `(dynalite, ${settings.windowKind}-window vendor sandbox: general ${limits(settings.limits)}, ` +
        `${settings.families.map((f) => `${f.name} ${limits(f.limits)}`).join(', ')}; ledger margin ${settings.marginSeconds} s, ` +
        `permits valid ${settings.permitValiditySeconds} s), each consumer a greedy class lane and a general lane ` +
        `${settings.generalPerSecond === undefined ? '(greedy)' : `(${settings.generalPerSecond}/s in all, paced)`}, ` +
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
        'found the class back at the probe (1 per 10 s).' +
        (variant === 'learned' || variant === 'configured'
          ? ''
          : ' View changes: polls after the first learning whose listed limits (limit and window) differed from ' +
            "the poll before's (of them, returns to the probe). Parts: the run cut at its events (a limit change " +
            "of the class, the restart, the liar coming and going), each from the class's first answer on, against " +
            "the limits of that part (the vendor's sliding window still holds the part before at a cut). Adopted: " +
            "from the vendor's change to the first poll listing the new limit as learned. Liar: how long the polls " +
            'listed the limit it reported (1 s resolution).'),
    })}\n`,
  );
  if (result.status !== undefined)
    process.stdout.write(
      `token-broker status ${settings.setId}, as the operator ran it two thirds into the run:\n${result.status}\n`,
    );
  process.stdout.write(
    `classes (${variant}): vendor 401s ${result.vendor401}, logins ${result.logins}, tokens used ${result.tokens}, ` +
      `secrets in logs ${result.secretsInLogs}, client errors ${JSON.stringify(result.clientErrors)}\n`,
  );
  if (result.events.length > 0)
    process.stdout.write(
      `classes (${variant}) events: ${result.events
        .map(
          (e) =>
            `${e.label}${e.family ? ` ${e.family}` : ''}${e.limits ? ` ${limits(e.limits)}` : ''} at ${e.at.toFixed(1)} s` +
            `${e.downMs === undefined ? '' : ` (vend API down ${(e.downMs / 1000).toFixed(2)} s)`}`,
        )
        .join('; ')}\n`,
    );
  if (result.liarReports)
    process.stdout.write(
      `classes (${variant}) liar's reports: ${result.liarReports
        .map((r) => `${r.class} ${r.limit}/${r.remaining} left at ${r.at.toFixed(1)} s: HTTP ${r.status}`)
        .join('; ')}\n`,
    );
  const goals = result.rows.map((row) => {
    // Paced general lanes leave the general limits unbound: only the 429s count for that row.
    const binding = row.quota !== 'general' || settings.generalPerSecond === undefined;
    const met =
      row.vendor429After === 0 &&
      row.vendor429Learning <= 1 &&
      (!binding || row.quotaUsedPct >= GOAL_CLASSES_QUOTA_USED_PCT);
    const use = binding
      ? `${row.quotaUsedPct} %`
      : `${row.quotaUsedPct} %, not binding: general demand paced at ${settings.generalPerSecond}/s`;
    const unnamed =
      row.vendor429AfterUnnamed > 0 ? `, ${row.vendor429AfterUnnamed} of them by a limit not yet named` : '';
    return `${row.quota} ${met ? 'met' : 'not met'} (${row.vendor429Learning}/${row.vendor429After} 429s${unnamed}, ${use})`;
  });
  process.stdout.write(
    `issue 24's goal (0 429 after learning, at most 1 before, >= ${GOAL_CLASSES_QUOTA_USED_PCT} % used), reported: ${goals.join('; ')}\n`,
  );
  if (variant !== 'learned' && variant !== 'configured') {
    // Issue 32's promises per class: what classesSoakFailures gates, and the use of the run (reported, not gated).
    const promises = result.rows
      .filter((row) => row.quota !== 'general')
      .map((row) => {
        const named = row.vendor429After - row.vendor429AfterUnnamed;
        const parts = [
          `learned ${row.learnMs === undefined ? 'never' : `in ${(row.learnMs / 1000).toFixed(2)} s`}`,
          `429 after learning by a named limit ${named}, most by one limit not yet named ${row.vendor429PerUnnamedLimit}`,
          `used of the run ${row.quotaUsedRunPct} % (>= ${GOAL_CLASSES_QUOTA_USED_PCT} %: ${row.quotaUsedRunPct >= GOAL_CLASSES_QUOTA_USED_PCT ? 'met' : 'not met'})`,
          ...(row.adoptions ?? [])
            .filter((a) => a.raised)
            .map((a) => `raised limit listed ${a.seconds === undefined ? 'never' : `after ${a.seconds} s`}`),
          ...(row.liar ? [`held by the liar ${row.liar.longestHoldSeconds.toFixed(0)} s at most`] : []),
        ];
        return `${row.quota}: ${parts.join(', ')}`;
      });
    process.stdout.write(`issue 32's promises, reported: ${promises.join('; ')}\n`);
  }
  process.stdout.write('\n');
}

async function classesSoak(args: readonly string[]): Promise<string[]> {
  const { variants, parallel } = classesArguments(args);
  const seconds = Number(process.env.SOAK_CLASSES_SECONDS ?? CLASSES_SOAK_DEFAULTS.durationSeconds);
  if (!Number.isFinite(seconds) || seconds < 10)
    throw new Error(
      `SOAK_CLASSES_SECONDS must be a number of seconds, at least 10 (got "${process.env.SOAK_CLASSES_SECONDS}")`,
    );
  const base = { ...CLASSES_SOAK_DEFAULTS, durationSeconds: seconds };
  // Each run's record, for its figures again without running it again (runClassesSoak).
  const rawDir = process.env.SOAK_CLASSES_RAW_DIR || undefined;
  const rounds = Math.ceil(variants.length / parallel);
  process.stderr.write(
    `soak (classes): ${base.consumers} consumers on ${base.setId}, each a general lane and a class lane, ` +
      `${base.durationSeconds} s per variant (${variants.join(', ')}; at most ${parallel} at a time, ${rounds} ` +
      `after another), tokens living ${base.tokenLifetimeSeconds} s\n`,
  );
  const failures: string[] = [];
  // One part per round: the time left is the rounds not yet run (a round's start is its first variant's).
  const progress = new SoakProgress(
    Array.from({ length: rounds }, () => base.durationSeconds),
    (line) => process.stderr.write(line),
  );
  let started = 0;
  const settled = await inPool(
    variants.map((variant) => () => {
      if (started++ % parallel === 0) progress.startPart();
      return runClassesSoak(classesVariantSettings(variant, base), progress.line, rawDir).then((result) => {
        printClassesResult(result);
        return result;
      });
    }),
    parallel,
  );
  settled.forEach((outcome, index) => {
    const variant = variants[index];
    if (outcome.status === 'rejected') {
      failures.push(`classes (${variant}) could not run: ${String(outcome.reason).slice(0, 400)}`);
      return;
    }
    failures.push(...classesSoakFailures(outcome.value));
  });
  return failures;
}

async function main(): Promise<void> {
  const which = process.argv[2] ?? 'all';
  if (!['all', 'windows', 'reserved', 'classes'].includes(which))
    throw new Error(`unknown soak "${which}" (windows, reserved, classes)`);
  if (which === 'classes') {
    const failures = await classesSoak(process.argv.slice(3));
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
