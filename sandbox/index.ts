/**
 * A faithful sandbox of the vendor's Portfolio Management Service API (../shared/vendor-api.md) over real
 * HTTP on 127.0.0.1: login, bearer tokens (HS256 JWTs, one random key per instance = per environment),
 * resource CRUD under `/users/<number>/<tenant>/serviceKey/<key>`, endpoint families (reports, rebalancing) with
 * lower limits of their own, per-token rate limits with X-RateLimit-* headers and the §8 429, and the §7 error
 * bodies. Operators steer it through `update`/`inject` or the
 * `/_sandbox/*` endpoints: outages, failure rates, latency, clock offset and injected faults.
 *
 * The 5xx and 413 errorCodes (SERVICE_UNAVAILABLE, INTERNAL_ERROR, BAD_GATEWAY, GATEWAY_TIMEOUT,
 * PAYLOAD_TOO_LARGE) are the sandbox's own invention: the vendor documents none.
 */
export { type Sandbox, startSandbox } from './server.js';
export {
  DEFAULT_FAMILIES,
  type MutableSandboxSettings,
  type SandboxFamily,
  type SandboxLimit,
  type SandboxSettings,
  type WindowKind,
} from './settings.js';
export { defaultSandboxUsers } from './users.js';
