export * from './credentials-source.js';
export { FileCredentialsSource } from './file-credentials-source.js';
export { SecretsManagerCredentialsSource } from './secrets-manager-credentials-source.js';
