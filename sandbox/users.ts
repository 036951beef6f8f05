import * as z from 'zod';
import type { VendorEnvironment } from '../shared/vendor-client/types.js';

export interface SandboxUser {
  username: string;
  password: string;
  userKey: string;
  tenant: string;
  companyKey: string;
  executionPlatformKey: string;
  groups: number[];
  roles: string[];
  defaultCompanyInventorySource: string;
  /** 'advisor' | 'execution-platform' */
  companyRole: string;
}

/** Tenants travel in URL paths, so only characters that need no escaping. */
export const TENANT_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

const sandboxUserSchema = z.strictObject({
  username: z.string().min(1).max(256),
  password: z.string().min(1).max(256),
  userKey: z.string().min(1),
  tenant: z.string().regex(TENANT_PATTERN, 'letters, digits, dot, underscore and dash; at most 64'),
  companyKey: z.string().min(1),
  executionPlatformKey: z.string(),
  groups: z.array(z.number().int()),
  roles: z.array(z.string()),
  defaultCompanyInventorySource: z.string(),
  companyRole: z.string().min(1),
});

export const sandboxUsersSchema = z
  .array(sandboxUserSchema)
  .min(1)
  .refine((users) => new Set(users.map((u) => u.username)).size === users.length, {
    message: 'usernames must be unique',
  });

/**
 * An advisor and an execution-platform user per environment. The passwords are SANDBOX-ONLY test
 * fixtures, documented in docs/local-mode.md; they open nothing but a sandbox.
 */
export function defaultSandboxUsers(environment: VendorEnvironment): SandboxUser[] {
  const env = environment.toUpperCase();
  return [
    {
      username: `${environment}-advisor`,
      password: `${environment}-advisor-sandbox-pw`,
      userKey: `USR-${env}-ADV-0001`,
      tenant: `${environment}-advisor-tenant`,
      companyKey: `CMP-${env}-ADVISOR`,
      executionPlatformKey: `EXP-${env}-0001`,
      groups: [101, 102],
      roles: ['ADVISOR'],
      defaultCompanyInventorySource: 'MARKET',
      companyRole: 'advisor',
    },
    {
      username: `${environment}-execution`,
      password: `${environment}-execution-sandbox-pw`,
      userKey: `USR-${env}-EXE-0001`,
      tenant: `${environment}-execution-tenant`,
      companyKey: `CMP-${env}-EXECUTION`,
      executionPlatformKey: `EXP-${env}-0001`,
      groups: [201],
      roles: ['EXECUTION_PLATFORM'],
      defaultCompanyInventorySource: 'MARKET',
      companyRole: 'execution-platform',
    },
  ];
}
