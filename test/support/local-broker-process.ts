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
