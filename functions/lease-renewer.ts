/**
 * Placeholder: replaced by the lead's renewer (issue 27). It exists so that a two-Region stage synthesizes and
 * bundles (infra/constructs/lease-renewer.ts); its environment: LEDGER_TABLE_NAME, LEASE_TABLE_NAME,
 * OWN_REGION, OTHER_REGION. It renews nothing: every run does nothing, so a Region's leases lapse and it stays
 * fenced at its floor until the real renewer is deployed.
 */
export const handler = async (): Promise<void> => {};
