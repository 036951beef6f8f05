import { describe, expect, it } from 'vitest';
import { type ConsumerConfig, parseConsumers } from '../shared/config/consumers.js';
import { type CredentialSetConfig, parseCredentialSets } from '../shared/config/credential-sets.js';
import { AccessPolicy } from '../shared/vend/access-policy.js';
import { callerPrincipal, rulePrincipal } from '../shared/vend/principal.js';
import { fixtureConsumers } from './support/fixture-consumers.js';

const set = (id: string) => ({
  id,
  environment: 'uat',
  companyRole: 'advisor',
  vendorBaseUrl: 'https://vendor.example.com',
  secretId: `broker/${id}`,
});
const sets: CredentialSetConfig[] = parseCredentialSets([
  set('uat-advisor'),
  set('uat-execution'),
  set('uat-spare'),
]);
const { portfolio, reporting, batch, gateway } = fixtureConsumers;
const consumers: ConsumerConfig[] = parseConsumers(
  [
    portfolio,
    reporting,
    batch,
    gateway,
    // A second rule for the same role (other path spelling): its sets add up.
    {
      name: 'portfolio-extra',
      principalArn: 'arn:aws:iam::123456789012:role/apps/portfolio-service',
      credentialSets: ['uat-execution'],
    },
  ],
  sets.map((s) => s.id),
);
const policy = new AccessPolicy(sets, consumers);

const allowed = (arn: string, account?: string) => {
  try {
    return [...policy.identify(arn, account).setIds].sort();
  } catch (error) {
    return (error as { code: string }).code;
  }
};

describe('IAM principal matching', () => {
  it('an assumed-role session matches the rule written for its role, whatever the session name', () => {
    expect(allowed('arn:aws:sts::123456789012:assumed-role/portfolio-service/i-0abc')).toEqual([
      'uat-advisor',
      'uat-execution',
    ]);
    expect(allowed('arn:aws:sts::123456789012:assumed-role/portfolio-service/another-session')).toEqual([
      'uat-advisor',
      'uat-execution',
    ]);
  });

  it('a role rule with a path matches the session, whose ARN drops the path', () => {
    expect(allowed('arn:aws:sts::123456789012:assumed-role/reporting-service/nightly')).toEqual([
      'uat-execution',
    ]);
  });

  it('the same role name in another account, or another partition, is somebody else', () => {
    expect(allowed('arn:aws:sts::999988887777:assumed-role/portfolio-service/x')).toBe(
      'INSUFFICIENT_PERMISSIONS',
    );
    expect(allowed('arn:aws-cn:sts::123456789012:assumed-role/portfolio-service/x')).toBe(
      'INSUFFICIENT_PERMISSIONS',
    );
  });

  it('a cross-account consumer is allowed by its own rule', () => {
    expect(allowed('arn:aws:sts::210987654321:assumed-role/execution-gateway/task', '210987654321')).toEqual([
      'uat-execution',
    ]);
  });

  it('users match exactly, path included; a user is never a role of the same name', () => {
    expect(allowed('arn:aws:iam::123456789012:user/ops/batch-runner')).toEqual(['uat-advisor']);
    expect(allowed('arn:aws:iam::123456789012:user/batch-runner')).toBe('INSUFFICIENT_PERMISSIONS');
    expect(allowed('arn:aws:sts::123456789012:assumed-role/batch-runner/s')).toBe('INSUFFICIENT_PERMISSIONS');
    expect(allowed('arn:aws:iam::123456789012:user/portfolio-service')).toBe('INSUFFICIENT_PERMISSIONS');
  });

  it('comparison is case-sensitive: a differently spelled name fails closed', () => {
    expect(allowed('arn:aws:sts::123456789012:assumed-role/Portfolio-Service/s')).toBe(
      'INSUFFICIENT_PERMISSIONS',
    );
  });

  it('root, federated users, malformed and missing ARNs are refused', () => {
    for (const arn of [
      'arn:aws:iam::123456789012:root',
      'arn:aws:sts::123456789012:federated-user/bob',
      'arn:aws:sts::123456789012:assumed-role/portfolio-service',
      'arn:aws:sts::123456789012:assumed-role/portfolio-service/s/extra',
      'arn:aws:sts::12345678901:assumed-role/portfolio-service/s',
      'portfolio-service',
      '',
    ]) {
      expect(allowed(arn), arn).toBe('INSUFFICIENT_PERMISSIONS');
    }
    expect(() => policy.identify(undefined, undefined)).toThrow(/may not use/);
  });

  it('the account Lambda reports must be the account of the ARN', () => {
    expect(allowed('arn:aws:sts::123456789012:assumed-role/portfolio-service/s', '999988887777')).toBe(
      'INSUFFICIENT_PERMISSIONS',
    );
  });

  it('reduces rule and caller ARNs to the same key', () => {
    expect(rulePrincipal('arn:aws:iam::123456789012:role/a/b/c/portfolio-service')?.key).toBe(
      callerPrincipal('arn:aws:sts::123456789012:assumed-role/portfolio-service/x')?.key,
    );
  });
});

describe('set authorization', () => {
  const caller = policy.identify(
    'arn:aws:sts::123456789012:assumed-role/reporting-service/nightly',
    undefined,
  );

  it('a known caller: 404 for an unknown set, 403 for a set of someone else, the set when allowed', () => {
    expect(() => policy.authorize(caller, 'uat-nope')).toThrow(
      expect.objectContaining({ code: 'RESOURCE_NOT_FOUND' }),
    );
    expect(() => policy.authorize(caller, 'uat-advisor')).toThrow(
      expect.objectContaining({ code: 'INSUFFICIENT_PERMISSIONS', status: 403 }),
    );
    expect(policy.authorize(caller, 'uat-execution').id).toBe('uat-execution');
  });

  it('lists only the sets the caller may use, in configuration order', () => {
    expect(policy.setsOf(caller).map((s) => s.id)).toEqual(['uat-execution']);
    const portfolio = policy.identify(
      'arn:aws:sts::123456789012:assumed-role/portfolio-service/s',
      undefined,
    );
    expect(policy.setsOf(portfolio).map((s) => s.id)).toEqual(['uat-advisor', 'uat-execution']);
  });
});
