import { type ChildProcess, spawn, spawnSync } from 'node:child_process';

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

/** `npm start` as a user runs it, in a process group of its own (as a terminal's job is), with its banner. */
export interface NpmStart {
  /** npm itself: the pid a service manager, `kill <pid>` or a parent script signals. */
  npm: ChildProcess;
  banner: string;
  /** Every 127.0.0.1 port the banner names: the Function URL, the sandboxes, dynalite. */
  ports: number[];
  /**
   * Resolves when npm has exited and every process of the tree has too. Each of them holds npm's stdout and
   * stderr (inherited down the tree), so the pipes close only when the last one is gone: no polling needed.
   */
  closed: Promise<void>;
}

export function startNpmStart(env: NodeJS.ProcessEnv): Promise<NpmStart> {
  const npm = spawn('npm', ['start'], {
    env: { ...process.env, npm_config_update_notifier: 'false', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const closed = new Promise<void>((resolve) => npm.once('close', () => resolve()));
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    npm.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('Ctrl-C stops everything.')) {
        const ports = [
          ...new Set([...out.matchAll(/http:\/\/127\.0\.0\.1:(\d+)/g)].map((m) => Number(m[1]))),
        ];
        resolve({ npm, banner: out, ports, closed });
      }
    });
    npm.stderr?.on('data', (chunk: Buffer) => {
      err += chunk.toString();
    });
    npm.on('exit', (code) => reject(new Error(`npm start exited with ${code}: ${err}`)));
  });
}

/** The processes still in a process group, one `ps` line each (none: an empty list). */
export function processGroupMembers(pgid: number): string[] {
  const ps = spawnSync('ps', ['-e', '-o', 'pgid=,pid=,stat=,args='], { encoding: 'utf8' });
  return (
    ps.stdout
      .split('\n')
      .filter((line) => line.trim().split(/\s+/)[0] === String(pgid))
      // Zombies are gone but for their parent's (or init's) reaping; they hold no port and run nothing.
      .filter((line) => line.trim().split(/\s+/)[2]?.startsWith('Z') !== true)
  );
}
