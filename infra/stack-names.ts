/**
 * The serving stacks' names and Regions, computed from the stage alone (no CDK: the operator CLI loads this, as it
 * does role-names.ts). A one-Region stage is one stack, `TokenBroker-<stage>`; a two-Region stage keeps that name
 * for its home Region's serving stack and names the peer's after its Region (infra/regions-app.ts). Each serving
 * stack's `VendUrl` output is the broker URL of its Region.
 */

/** A serving stack of a stage: where it runs, and which of the stage's Regions it serves. */
export interface ServingStack {
  stackName: string;
  region: string;
  /** `home` and `peer` in a two-Region stage; `only` in a one-Region one. */
  role: 'only' | 'home' | 'peer';
}

/** The one serving stack of a one-Region stage, and the home one of a two-Region stage. */
export const brokerStackName = (stageName: string): string => `TokenBroker-${stageName}`;

/** The peer's serving stack of a two-Region stage: its own name, as dashboards are global to the account. */
export const peerBrokerStackName = (stageName: string, peerRegion: string): string =>
  `${brokerStackName(stageName)}-${peerRegion}`;

/** Every serving stack of the stage: home first. */
export function servingStacks(stage: {
  name: string;
  region: string;
  regions?: { home: string; peer: string } | undefined;
}): ServingStack[] {
  if (!stage.regions) return [{ stackName: brokerStackName(stage.name), region: stage.region, role: 'only' }];
  return [
    { stackName: brokerStackName(stage.name), region: stage.regions.home, role: 'home' },
    {
      stackName: peerBrokerStackName(stage.name, stage.regions.peer),
      region: stage.regions.peer,
      role: 'peer',
    },
  ];
}
