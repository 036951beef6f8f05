#!/usr/bin/env node
// `npx token-broker …`: the operator CLI (cli/main.ts). The package ships its TypeScript as tested, so the
// launcher compiles it on the fly with tsx's loader instead of a separate build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../cli/main.ts');
process.exitCode = await main(process.argv.slice(2));
