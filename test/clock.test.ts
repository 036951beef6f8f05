import { describe, expect, it } from 'vitest';
import { ManualClock } from '../shared/clock.js';

describe('ManualClock', () => {
  it('wakes sleepers in time order only when advanced past their time', async () => {
    const clock = new ManualClock(1_000);
    const woke: string[] = [];
    void clock.sleep(300).then(() => woke.push(`b@${clock.now()}`));
    void clock.sleep(100).then(() => woke.push(`a@${clock.now()}`));
    await clock.advance(50);
    expect(woke).toEqual([]);
    await clock.advance(300);
    expect(woke).toEqual(['a@1100', 'b@1300']);
    expect(clock.now()).toBe(1_350);
  });

  it('rejects an aborted sleep and forgets it', async () => {
    const clock = new ManualClock(0);
    const controller = new AbortController();
    const sleeping = clock.sleep(1_000, controller.signal);
    controller.abort(new Error('stop'));
    await expect(sleeping).rejects.toThrow('stop');
    expect(clock.pendingSleepers).toBe(0);
  });

  it('moves itself on sleep when auto-advancing', async () => {
    const clock = new ManualClock(0, { autoAdvance: true });
    await clock.sleep(2_500);
    expect(clock.now()).toBe(2_500);
  });
});
