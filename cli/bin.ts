#!/usr/bin/env node
/**
 * The CLI package's entry point (packaging/build.ts bundles it into token-broker.mjs). In the repository,
 * bin/token-broker.mjs runs cli/main.ts from source instead.
 */
import { main } from './main.js';

process.exitCode = await main(process.argv.slice(2));
