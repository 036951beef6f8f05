#!/usr/bin/env node
// `npx token-broker …` in this repository: the operator CLI (cli/main.ts) from source, compiled on the fly by
// tsx's loader, as the CLI tests run it. Outside the repository, operators install the built package
// @token-broker/cli (packaging/build.ts: plain JavaScript, no tsx, Node 20 and newer).
// First: from source the CLI needs the project's Node (tools/require-node.mjs says so in one line, and stops).
import '../tools/require-node.mjs';
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../cli/main.ts');
process.exitCode = await main(process.argv.slice(2));
