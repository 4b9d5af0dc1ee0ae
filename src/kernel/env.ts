/** Reads an integer setting from the environment: the fallback when unset, else at least `min`. */
export function envInt(env: NodeJS.ProcessEnv, name: string, fallback: number, min = 0): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be an integer of at least ${min}, got ${raw}`)
  return value
}
