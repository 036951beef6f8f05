import * as z from 'zod';
import { lazy } from '../lazy.js';
import { UnexpectedVendorResponseError } from './errors.js';
import {
  describeShapeIssues,
  headerRequestId,
  parseJson,
  parseVendorDate,
  type RawVendorResponse,
} from './parse-response.js';
import { readTokenTimes } from './token-expiry.js';
import type { LoginResult } from './types.js';

/** The login result of vendor-api.md §2. `exp` is checked by readTokenTimes, with the JWT's. Built by the first
 *  login, not at cold start. */
const loginBodySchema = lazy(() =>
  z.object({
    userDetails: z.object({
      username: z.string(),
      userKey: z.string(),
      groups: z.array(z.number().int()),
    }),
    roles: z.array(z.string()),
    accessToken: z.string().min(1),
    refreshToken: z.string().optional(),
    executionPlatformKey: z.string(),
    tenant: z.string(),
    defaultCompanyInventorySource: z.string(),
    status: z.string(),
    companyKey: z.string(),
    exp: z.unknown().optional(),
    requestId: z.string().optional(),
  }),
);

/** A 2xx login answer as the typed LoginResult, or a typed error; the token never enters a message. */
export function toLoginResult(response: RawVendorResponse, nowMs: number): LoginResult {
  const json = parseJson(response.text);
  if (!json.ok) throw new UnexpectedVendorResponseError(response.status, 'the login body is not JSON');
  const parsed = loginBodySchema().safeParse(json.value);
  if (!parsed.success) {
    throw new UnexpectedVendorResponseError(
      response.status,
      `the login body is not the documented login result (${describeShapeIssues(parsed.error)})`,
    );
  }
  const body = parsed.data;
  const times = readTokenTimes(body.accessToken, body.exp, nowMs);
  // Fields picked one by one: nothing undocumented the vendor adds is carried along unnoticed.
  const result: LoginResult = {
    userDetails: {
      username: body.userDetails.username,
      userKey: body.userDetails.userKey,
      groups: body.userDetails.groups,
    },
    roles: body.roles,
    accessToken: body.accessToken,
    executionPlatformKey: body.executionPlatformKey,
    tenant: body.tenant,
    defaultCompanyInventorySource: body.defaultCompanyInventorySource,
    status: body.status,
    companyKey: body.companyKey,
    exp: times.exp,
  };
  if (body.refreshToken !== undefined) result.refreshToken = body.refreshToken;
  if (times.env !== undefined) result.env = times.env;
  if (times.issuedAt !== undefined) result.issuedAt = times.issuedAt;
  const vendorDate = parseVendorDate(response.headers);
  if (vendorDate !== undefined) result.vendorDate = vendorDate;
  const requestId = headerRequestId(response.headers) ?? body.requestId;
  if (requestId !== undefined) result.requestId = requestId;
  return result;
}
