import { createServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type NpmStart, processGroupMembers, startNpmStart } from './support/local-broker-process.js';

/**
 * `npm start` stopped by a signal to one pid: what `kill <pid>`, a service manager or a parent script sends, and
 * by a terminal's Ctrl-C, which goes to the whole process group. Started through npm, as a user does, in a
 * process group of its own.
 */

/** True when the port can be bound on 127.0.0.1 again, i.e. nothing holds it. */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * A bound on a hang, not a timing: a tree that ignores the signal never exits, and the assertion then lists what
 * is still running. Generous, for a loaded 2-core machine.
 */
function outlived(ms: number): Promise<'still running'> {
  return new Promise((resolve) => setTimeout(() => resolve('still running'), ms).unref());
}

/** The Node process that runs local/start.ts (the one that holds the ports), under npm and its shell. */
function brokerPid(pgid: number): number {
  const line = processGroupMembers(pgid).findLast((l) => /\bnode\b.*local\/start\.ts/.test(l));
  if (!line) throw new Error(`no broker process in group ${pgid}`);
  return Number(line.trim().split(/\s+/)[1]);
}

let started: NpmStart | undefined;
afterEach(() => {
  // Whatever a failing case left running, so that it holds no port and no CPU after the file.
  const pgid = started?.npm.pid;
  started = undefined;
  if (pgid && processGroupMembers(pgid).length > 0) process.kill(-pgid, 'SIGKILL');
});

describe('npm start, stopped by a signal to its pid or its group', () => {
  it.each([
    { signal: 'SIGINT', to: 'npm' },
    { signal: 'SIGTERM', to: 'npm' },
    { signal: 'SIGTERM', to: 'the broker' },
    { signal: 'SIGINT', to: 'the group' },
  ] as const)('$signal to $to: the whole tree exits, 0, and every port is free', async ({ signal, to }) => {
    started = await startNpmStart({ BROKER_PORT: '0', LOG_LEVEL: 'warn' });
    const { npm, ports, closed } = started;
    const pgid = npm.pid ?? 0;
    expect(ports.length).toBeGreaterThanOrEqual(4); // the Function URL, two sandboxes, dynalite

    // The group: a terminal's Ctrl-C, which reaches the broker twice (from the terminal and from npm).
    process.kill(to === 'npm' ? pgid : to === 'the group' ? -pgid : brokerPid(pgid), signal);

    const outcome = await Promise.race([closed.then(() => 'exited' as const), outlived(30_000)]);
    expect(outcome, `after ${signal} to ${to}:\n${processGroupMembers(pgid).join('\n')}`).toBe('exited');
    expect(processGroupMembers(pgid)).toEqual([]);
    expect(npm.exitCode, `npm ended by ${npm.signalCode}`).toBe(0);
    for (const port of ports) expect(await bindable(port), `port ${port}`).toBe(true);
  });
});
