export { InProcessRefreshInvoker } from './refresh-invoker.js';
export * from './vend-errors.js';
export { createVendHandler } from './vend-handler.js';
