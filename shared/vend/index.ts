export { AccessPolicy, type Caller } from './access-policy.js';
export { LambdaRefreshInvoker } from './lambda-refresh-invoker.js';
export { callerPrincipal, rulePrincipal } from './principal.js';
export {
  InProcessRefreshInvoker,
  type RefreshInvoker,
  type RefreshOutcome,
  type RefreshRequest,
} from './refresh-invoker.js';
export type { ErrorBody, VendResult } from './responses.js';
export { ROUTES, type RouteName } from './router.js';
export { loadVendConfig, type VendConfig } from './vend-config.js';
export * from './vend-errors.js';
export { createVendHandler, type VendEvent, type VendHandlerDeps } from './vend-handler.js';
