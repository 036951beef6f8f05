import { type ChildProcess, spawn } from 'node:child_process';

/** The TypeScript runner `npm start` uses (local/start.ts is run, not built). */
export const TSX = 'node_modules/.bin/tsx';

/** Starts `local/start.ts` as `npm start` does and waits for its banner (everything up to "Ctrl-C"). */
export function startBrokerProcess(env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; banner: string }> {
  const child = spawn(TSX, ['local/start.ts'], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('Ctrl-C stops everything.')) resolve({ child, banner: out });
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      err += chunk.toString();
    });
    child.on('exit', (code) => reject(new Error(`broker exited with ${code}: ${err}`)));
  });
}

/**
 * Stops a broker started by startBrokerProcess the way Ctrl-C does, and waits for it to exit. SIGKILL would
 * end only tsx and leave the broker's node process (its child) running.
 */
export async function stopBrokerProcess(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGINT');
  await exited;
}
