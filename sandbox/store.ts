/** A resource body: any JSON object. */
export type ResourceValue = Record<string, unknown>;

type Slot = { state: 'present'; value: ResourceValue } | { state: 'deleted' };

export type ReadOutcome = { kind: 'found'; value: ResourceValue } | { kind: 'absent' } | { kind: 'deleted' };
export type CreateOutcome = { kind: 'created'; value: ResourceValue } | { kind: 'exists' };
export type ReplaceOutcome =
  | { kind: 'replaced'; value: ResourceValue }
  | { kind: 'absent' }
  | { kind: 'deleted' };
export type RemoveOutcome = { kind: 'removed' } | { kind: 'absent' } | { kind: 'deleted' };

/**
 * In-memory resources, one map per tenant, addressed by the rest of the path (`<number>/<key>`).
 * A deleted resource leaves a tombstone, so a later GET answers 410 RESOURCE_DELETED rather than 404.
 * Values are copied in and out so callers can never change what is stored.
 */
export class ResourceStore {
  readonly #tenants = new Map<string, Map<string, Slot>>();

  read(tenant: string, id: string): ReadOutcome {
    const slot = this.#slot(tenant, id);
    if (!slot) return { kind: 'absent' };
    if (slot.state === 'deleted') return { kind: 'deleted' };
    return { kind: 'found', value: structuredClone(slot.value) };
  }

  /** POST: only where nothing lives; a tombstone may be created over (the key is free again). */
  create(tenant: string, id: string, value: ResourceValue): CreateOutcome {
    if (this.#slot(tenant, id)?.state === 'present') return { kind: 'exists' };
    this.#set(tenant, id, { state: 'present', value: structuredClone(value) });
    return { kind: 'created', value: structuredClone(value) };
  }

  /** PUT: replaces the whole body of an existing resource. */
  replace(tenant: string, id: string, value: ResourceValue): ReplaceOutcome {
    const slot = this.#slot(tenant, id);
    if (!slot) return { kind: 'absent' };
    if (slot.state === 'deleted') return { kind: 'deleted' };
    this.#set(tenant, id, { state: 'present', value: structuredClone(value) });
    return { kind: 'replaced', value: structuredClone(value) };
  }

  remove(tenant: string, id: string): RemoveOutcome {
    const slot = this.#slot(tenant, id);
    if (!slot) return { kind: 'absent' };
    if (slot.state === 'deleted') return { kind: 'deleted' };
    this.#set(tenant, id, { state: 'deleted' });
    return { kind: 'removed' };
  }

  #slot(tenant: string, id: string): Slot | undefined {
    return this.#tenants.get(tenant)?.get(id);
  }

  #set(tenant: string, id: string, slot: Slot): void {
    let resources = this.#tenants.get(tenant);
    if (!resources) {
      resources = new Map();
      this.#tenants.set(tenant, resources);
    }
    resources.set(id, slot);
  }
}
