/**
 * Removes secrets from text the vendor sent back, before it can reach an error message: a vendor
 * that echoes the password or the token in an error body must not make the broker leak it.
 * Both the raw and the JSON-escaped spelling are removed, since error bodies are JSON.
 */
export function redactSecrets(text: string, secrets: readonly string[]): string {
  let result = text;
  for (const secret of secrets) {
    if (secret === '') continue;
    const escaped = JSON.stringify(secret).slice(1, -1);
    for (const spelling of new Set([secret, escaped])) result = result.split(spelling).join('[REDACTED]');
  }
  return result;
}
