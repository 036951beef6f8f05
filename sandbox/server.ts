import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { VendorEnvironment } from '../shared/vendor-client/types.js';
import { type Answer, errorAnswer, newRequestId, type RequestContext, writeAnswer } from './answers.js';
import { FaultQueue, type InjectedFault, parseInjectedFault } from './faults.js';
import { LOGIN_PATHS, loginUsername } from './login.js';
import { handleOperator, OPERATOR_PREFIX, type OperatorControls } from './operator.js';
import { answerVendorRequest, type PipelineParts } from './pipeline.js';
import { RateLimiter } from './rate-limiter.js';
import { readBody } from './request-body.js';
import { type LoggedRequest, RequestLog } from './request-log.js';
import {
  type MutableSandboxSettings,
  mutableView,
  parseMutableSettings,
  resolveSettings,
  type SandboxSettings,
  vendorNow,
} from './settings.js';
import { type SandboxStats, StatsRecorder } from './stats.js';
import { ResourceStore } from './store.js';
import { TokenAuthority } from './tokens.js';

export interface Sandbox {
  /** http://127.0.0.1:PORT (no trailing slash). */
  readonly url: string;
  readonly environment: VendorEnvironment;
  /** Validated like POST /_sandbox/settings; throws ConfigurationError naming the bad field. */
  update(settings: Partial<MutableSandboxSettings>): void;
  inject(fault: InjectedFault): void;
  stats(): SandboxStats;
  /** Resets the counters and empties the request log. */
  resetStats(): void;
  /** Every rate-limited outcome since the last reset, while `recordRequests` was on (oldest first). */
  requestLog(): LoggedRequest[];
  close(): Promise<void>;
}

/** The path without query or fragment; absolute-form targets keep only their path. */
function pathOf(target: string | undefined): string {
  const path = (target ?? '/').replace(/^[a-z]+:\/\/[^/]*/i, '').split(/[?#]/)[0] ?? '';
  return path === '' ? '/' : path;
}

/** Printable and short: a path is attacker-chosen text. */
const loggable = (path: string): string => path.replace(/[^\x21-\x7e]/g, '?').slice(0, 200);

/** Starts one vendor environment on 127.0.0.1 (see sandbox/index.ts for the behaviour). */
export async function startSandbox(input: SandboxSettings): Promise<Sandbox> {
  const settings = resolveSettings(input);
  const stats = new StatsRecorder(settings.environment);
  const faults = new FaultQueue();
  const requestLog = new RequestLog();
  const waits = new Set<() => void>();
  const parts: PipelineParts = {
    settings,
    tokens: new TokenAuthority(settings.environment),
    limiter: new RateLimiter(),
    store: new ResourceStore(),
    stats,
    faults,
    requestLog,
    delay: (ms) =>
      new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          waits.delete(done);
          resolve();
        };
        const timer = setTimeout(done, ms);
        waits.add(done);
      }),
  };
  const controls: OperatorControls = {
    stats: () => stats.snapshot(),
    resetStats: () => {
      stats.reset();
      requestLog.clear();
    },
    update: (partial) => {
      Object.assign(settings, parseMutableSettings(partial));
    },
    settings: () => mutableView(settings),
    inject: (fault) => faults.add(parseInjectedFault(fault)),
    pendingFaults: () => faults.size,
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const ctx: RequestContext = { requestId: newRequestId(), now: () => vendorNow(settings) };
    const method = req.method ?? 'GET';
    const pathname = pathOf(req.url);
    const operator = pathname.startsWith(OPERATOR_PREFIX);
    const route = method === 'POST' && LOGIN_PATHS.has(pathname) ? 'login' : 'resources';
    if (!operator && route === 'login') stats.loginRequest();
    if (!operator && route === 'resources') stats.resourceRequest(method);

    const body = await readBody(req);
    if (body.kind === 'failed') {
      res.destroy();
      return;
    }
    let answer: Answer;
    let jti: string | undefined;
    if (body.kind === 'too-large') {
      answer = errorAnswer(ctx, 413, 'PAYLOAD_TOO_LARGE', 'Request body is larger than 64 KiB', {
        headers: { Connection: 'close' },
      });
    } else if (operator) {
      answer = handleOperator(method, pathname, body.text, ctx, controls);
    } else {
      ({ answer, jti } = await answerVendorRequest(
        { route, method, pathname, headers: req.headers, body: body.text },
        ctx,
        parts,
      ));
    }
    writeAnswer(res, answer, ctx);
    if (!operator) {
      stats.response(answer.status, answer.errorCode);
      const username = route === 'login' && body.kind === 'ok' ? loginUsername(body.text) : undefined;
      if (username !== undefined) stats.loginOutcome(username, answer.status === 200);
    }
    if (!settings.quiet) {
      process.stderr.write(
        `sandbox ${settings.environment} ${ctx.requestId} ${method} ${loggable(pathname)} ${answer.status} jti=${jti ?? 'none'}\n`,
      );
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch(() => {
      // Never crash on any input: whatever went wrong becomes a plain 500.
      const ctx: RequestContext = { requestId: newRequestId(), now: () => vendorNow(settings) };
      writeAnswer(res, errorAnswer(ctx, 500, 'INTERNAL_ERROR', 'Internal sandbox error'), ctx);
    });
  });
  server.on('clientError', (_error, socket) => {
    if (socket.writable)
      socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    else socket.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(settings.port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;

  let closing: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    environment: settings.environment,
    update: controls.update,
    inject: controls.inject,
    stats: controls.stats,
    resetStats: controls.resetStats,
    requestLog: () => requestLog.entries(),
    close() {
      closing ??= new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        for (const wake of [...waits]) wake();
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
