import { EndpointCache as RealEndpointCache } from '@aws-sdk/endpoint-cache';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EndpointCache } from '../shared/aws/bundle/endpoint-cache.js';

/**
 * The bundles' stand-in for @aws-sdk/endpoint-cache (shared/aws/bundle/endpoint-cache.ts) against the real one:
 * the same random operations on both, on the same clock, give the same answers (what the DynamoDB client's
 * endpoint discovery would see), evictions included.
 */
const key = fc.constantFrom('a', 'b', 'c', 'd');
const endpoints = fc.array(
  fc.record({
    Address: fc.constantFrom('x', 'y', 'z'),
    CachePeriodInMinutes: fc.integer({ min: 0, max: 3 }),
  }),
  { minLength: 1, maxLength: 3 },
);
const operation = fc.oneof(
  { weight: 4, arbitrary: fc.record({ op: fc.constant('set' as const), key, endpoints }) },
  {
    weight: 5,
    arbitrary: fc.record({
      op: fc.constantFrom('get' as const, 'has' as const, 'delete' as const, 'getEndpoint' as const),
      key,
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('clear' as const) }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('wait' as const), minutes: fc.integer({ min: 0, max: 2 }) }),
  },
);

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe('the bundles’ endpoint cache', () => {
  it('answers as @aws-sdk/endpoint-cache does, operation by operation', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4 }),
        fc.array(operation, { minLength: 5, maxLength: 40, size: 'max' }),
        (capacity, ops) => {
          vi.useFakeTimers({ now: 1_800_000_000_000, toFake: ['Date'] });
          // getEndpoint draws one of the live endpoints: both draw with the same number.
          vi.spyOn(Math, 'random').mockReturnValue(0.5);
          const real = new RealEndpointCache(capacity);
          const ours = new EndpointCache(capacity);
          for (const step of ops) {
            if (step.op === 'wait') {
              vi.advanceTimersByTime(step.minutes * 60_000);
              continue;
            }
            if (step.op === 'clear') {
              real.clear();
              ours.clear();
              continue;
            }
            if (step.op === 'set') {
              real.set(step.key, step.endpoints);
              ours.set(step.key, step.endpoints);
              continue;
            }
            expect(ours[step.op](step.key), `${step.op}(${step.key})`).toEqual(real[step.op](step.key));
          }
          for (const k of ['a', 'b', 'c', 'd']) expect(ours.has(k), k).toBe(real.has(k));
          vi.useRealTimers();
          vi.restoreAllMocks();
        },
      ),
      { numRuns: 500, seed: 20_261_129 },
    );
  });
});
