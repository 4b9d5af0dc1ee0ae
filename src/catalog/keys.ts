/**
 * Every Redis key of a project's catalog, built in one place. All carry the hash tag
 * `{cat:<projectId>}`, so the keys of one project sit in one Cluster slot and one script can
 * apply a whole document atomically, unchanged on a Cluster.
 */
const PREFIX = 'mg:'

export function catalogTag(projectId: string): string {
  return `{cat:${projectId}}`
}

/** The catalog hash: `version`, `catalog` (features, plans, plan versions) and `index` (JSON). */
export function catalogKey(projectId: string): string {
  return `${PREFIX}${catalogTag(projectId)}:catalog`
}

/** One customer's hash: `src` and `doc` (JSON) and the access flags. */
export function customerKey(projectId: string, customerId: string): string {
  return `${PREFIX}${catalogTag(projectId)}:c:${customerId}`
}
