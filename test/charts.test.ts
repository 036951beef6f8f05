import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { reservationsChart } from '../bench/reservations-chart.js';
import type { SoakResult } from '../local/soak.js';
import { soakChart } from '../local/soak-chart.js';
import { SoakProgress } from '../local/soak-progress.js';
import { chartsDirectory, renderSvg, writeChart } from '../local/svg-chart.js';
import { useOverTime } from '../local/use-over-time.js';

describe('quota use over time', () => {
  it('counts each event in the window that ends at a sample, (t - window, t], as a share of the limit', () => {
    const events = [
      { time: 1950, count: 3 },
      { time: 100, count: 2 },
      { time: 900, count: 1 },
    ];
    expect(useOverTime(events, { limit: 4, windowMs: 1000 }, 0, 2000, 500)).toEqual([
      { seconds: 0, usedPct: 0 },
      { seconds: 0.5, usedPct: 50 },
      { seconds: 1, usedPct: 75 },
      { seconds: 1.5, usedPct: 25 },
      { seconds: 2, usedPct: 75 },
    ]);
    expect(() => useOverTime(events, { limit: 4, windowMs: 1000 }, 0, 2000, 0)).toThrow(/stepMs/);
  });
});

describe('charts: vega-lite rendered to SVG without a canvas', () => {
  const directory = mkdtempSync(path.join(tmpdir(), 'charts-test-'));
  afterAll(() => rmSync(directory, { recursive: true, force: true }));

  it("draws the soak's quota use per limit, run and set, and writes it where it says", async () => {
    const result = {
      settings: { limits: [{ limit: 2, windowSeconds: 1 }], lifetimes: 1, tokenLifetimeSeconds: 3 },
      rows: [{ mode: 'sliding' }],
      vendorAnswers: [
        { set: 'uat-advisor', token: 0, atMs: 200, status: 200 },
        { set: 'uat-advisor', token: 0, atMs: 400, status: 429 },
        { set: 'uat-advisor', token: 1, atMs: 700, status: 200 },
        { set: 'prod-advisor', token: 0, atMs: 1200, status: 200 },
      ],
    } as unknown as SoakResult;
    const spec = soakChart('soak under test', [result]);
    const values = (spec as { vconcat: { data: { values: { run: string; usedPct: number }[] } }[] })
      .vconcat[0]?.data.values;
    // Per token, and a 429 is not use: each of uat-advisor's tokens has one accepted request of 2 in any second.
    expect(
      Math.max(...(values ?? []).filter((v) => v.run === 'sliding, uat-advisor').map((v) => v.usedPct)),
    ).toBe(50);
    const file = await writeChart('soak-test', spec, directory);
    expect(file).toBe(path.join(directory, 'soak-test.svg'));
    const svg = readFileSync(file, 'utf8');
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg).toContain('soak under test');
    expect(svg).toContain('2 per 1 s');
    expect(svg).toContain('sliding, prod-advisor');
  });

  it("draws the reservations bench's use and waits per case", async () => {
    const svg = await renderSvg(
      reservationsChart('bench under test', [
        { name: 'reserved', use: [{ seconds: 60, usedPct: 98 }], waits: [{ seconds: 3, waitSeconds: 0.2 }] },
        { name: 'first come', use: [{ seconds: 60, usedPct: 99 }], waits: [{ seconds: 3, waitSeconds: 40 }] },
      ]),
    );
    expect(svg).toContain('bench under test');
    expect(svg).toContain('order-service: wait for each permit it wanted');
    expect(svg).toContain('first come');
  });

  it('goes to CHARTS_DIR when set, else to a folder of the temporary directory', () => {
    expect(chartsDirectory({ CHARTS_DIR: 'docs/charts' })).toBe(path.resolve('docs/charts'));
    expect(chartsDirectory({})).toBe(path.join(tmpdir(), 'token-broker-charts'));
  });
});

describe('soak progress', () => {
  it('says how long the planned parts still take: what is left of this one and the ones not started', () => {
    let now = 1_000_000;
    const lines: string[] = [];
    const progress = new SoakProgress(
      [450, 180],
      (line) => lines.push(line),
      () => now,
    );
    expect(progress.secondsLeft()).toBe(630);
    progress.startPart();
    now += 75_000;
    progress.line('fixed: 75 s of 450 s, 1200 vendor requests');
    // The first part overran its plan (a loaded machine, the report): the second is still all to come.
    now += 420_000;
    expect(progress.secondsLeft()).toBe(180);
    progress.startPart();
    now += 30_000;
    progress.line('sliding: 30 s of 180 s, 100 vendor requests');
    now += 600_000;
    expect(progress.secondsLeft()).toBe(0);
    expect(lines).toEqual([
      '  fixed: 75 s of 450 s, 1200 vendor requests · about 9 min 15 s left of 10 min 30 s\n',
      '  sliding: 30 s of 180 s, 100 vendor requests · about 2 min 30 s left of 10 min 30 s\n',
    ]);
  });
});
