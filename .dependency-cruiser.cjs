/**
 * The project's layers and what each may import (docs/structure.md says why), checked by `npm run lint:deps`
 * (tools/check-dependencies.ts), which `npm run lint` runs. Paths are the sources' (the tool cruises a
 * transpiled mirror of them, where `.ts` is `.js`).
 *
 * A layer may import itself and the layers listed for it, never a layer above it nor a sibling it does not list;
 * packages (node_modules, node:*) are not a layer and are not checked here.
 */
const MAY_IMPORT = {
  // The bottom: the domain and its adapters, what the Lambda functions and the client are made of.
  shared: [],
  // The vendor's double, the Lambda entry points, the TypeScript client: each on shared/ alone.
  sandbox: ['shared'],
  functions: ['shared'],
  client: ['shared'],
  // The CDK app (it points at functions/ by path, for bundling, and imports none of it).
  infra: ['shared'],
  // The operator's CLI: the client's SigV4 and the stage configuration and secret policy of infra/.
  cli: ['shared', 'client', 'infra'],
  // The local broker, the soaks and what the soak and the bench both print with (tables, charts).
  local: ['shared', 'sandbox', 'client', 'functions'],
  // Builds the published packages (the client, the CLI).
  packaging: ['shared', 'client', 'cli'],
  // The tests and their harnesses (test/support/): everything but the tools; the bench's own modules are tested
  // too, but a harness never imports the bench (rule support-not-bench), which imports the harnesses.
  test: ['shared', 'sandbox', 'functions', 'client', 'infra', 'cli', 'local', 'packaging', 'bench'],
  // The bench: everything below it, and the tests' harnesses (never a test file: rule not-to-a-test-file).
  bench: ['shared', 'sandbox', 'functions', 'client', 'infra', 'cli', 'local', 'packaging', 'test'],
  // Repository tooling (this check): nothing of the project.
  tools: [],
};

const LAYERS = Object.keys(MAY_IMPORT);

const layerRules = LAYERS.map((layer) => {
  const refused = LAYERS.filter((other) => other !== layer && !MAY_IMPORT[layer].includes(other));
  return {
    name: `layer-${layer}`,
    comment: `${layer}/ may import only ${[layer, ...MAY_IMPORT[layer]].join(', ')} (.dependency-cruiser.cjs)`,
    severity: 'error',
    from: { path: `^${layer}/` },
    to: { path: `^(${refused.join('|')})/` },
  };
}).filter((rule) => !rule.to.path.startsWith('^()'));

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment:
        'An import circle (type-only imports count): move what both sides need into a module both may import.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'not-to-a-test-file',
      comment: 'A test file is run, not imported: share a harness through test/support/.',
      severity: 'error',
      from: {},
      to: { path: '\\.test\\.[cm]?js$' },
    },
    {
      name: 'support-not-bench',
      comment: 'test/support/ is what the bench builds on: it never imports the bench.',
      severity: 'error',
      from: { path: '^test/support/' },
      to: { path: '^bench/' },
    },
    {
      name: 'ledger-item-closed',
      comment:
        'shared/ledger/item/ is closed (issue 34): outside it, import only its index.ts (its invariants are listed there), or bound.ts (the size bound, pure, for the configuration path).',
      severity: 'error',
      from: { pathNot: '^shared/ledger/item/' },
      to: { path: '^shared/ledger/item/', pathNot: '^shared/ledger/item/(index|bound)\\.[cm]?[jt]s$' },
    },
    ...layerRules,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    moduleSystems: ['es6', 'cjs'],
  },
};
