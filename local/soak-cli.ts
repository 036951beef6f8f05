/** `npm run soak`: the end-to-end soak in fixed- and sliding-window mode (in parallel); prints a table. */

import { formatTable } from '../bench/format-table.js';
import { runSoak, SOAK_DEFAULTS, soakFailures } from './soak.js';

const MIN_QUOTA_USED_PCT = 95;

async function main(): Promise<void> {
  const lifetimes = Number(process.env.SOAK_LIFETIMES ?? SOAK_DEFAULTS.lifetimes);
  const settings = { ...SOAK_DEFAULTS, lifetimes };
  process.stderr.write(
    `soak: ${settings.consumers} consumers per mode on ${settings.setIds.join(', ')}, tokens living ` +
      `${settings.tokenLifetimeSeconds} s, ${settings.lifetimes} lifetimes, limits ` +
      `${settings.limits.map((l) => `${l.limit}/${l.windowSeconds}s`).join(' + ')}\n`,
  );
  const progress = (line: string) => process.stderr.write(`  ${line}\n`);
  const results = await Promise.all(
    (['fixed', 'sliding'] as const).map((windowKind) => runSoak({ ...settings, windowKind }, progress)),
  );
  process.stdout.write(`${formatTable({ title: 'soak', rows: results.flatMap((r) => r.rows) })}\n\n`);
  for (const result of results) {
    process.stdout.write(
      `${result.settings.windowKind}: ${result.logLines} log lines, secrets in logs: ${result.secretsInLogs}, ` +
        `client errors: ${JSON.stringify(result.clientErrors)}\n`,
    );
  }
  const failures = results.flatMap((result) => soakFailures(result, MIN_QUOTA_USED_PCT));
  if (failures.length > 0) {
    process.stdout.write(`\nFAILED:\n${failures.map((f) => `  ${f}`).join('\n')}\n`);
    process.exit(1);
  }
  process.stdout.write('\nall soak promises kept\n');
}

main().catch((error: unknown) => {
  process.stderr.write(`soak: ${String(error)}\n`);
  process.exit(2);
});
