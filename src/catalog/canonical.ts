import { createHash } from 'node:crypto'

/** Canonical forms, derived ids and record timestamps: what lets an apply tell "unchanged" from "updated". */

const STAMPS = new Set(['createdAtM', 'updatedAtM'])

/**
 * JSON with object keys sorted at every depth and `createdAtM`/`updatedAtM` left out, so two
 * records with the same content compare equal whatever their key order and history.
 */
export function canonical(value: unknown): string {
  return JSON.stringify(value, (key, v: unknown) => {
    if (STAMPS.has(key)) return undefined
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return v
    const sorted: Record<string, unknown> = {}
    for (const k of Object.keys(v).sort()) sorted[k] = (v as Record<string, unknown>)[k]
    return sorted
  })
}

export function sameContent(a: unknown, b: unknown): boolean {
  return canonical(a) === canonical(b)
}

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}

/**
 * An id derived from what names a record (a project and a slug, a plan version and a feature…):
 * the same names give the same id on every apply, so nothing needs to remember ids by name.
 * `prefix_` and 24 hex digits (96 bits): at most 36 characters, like every identifier of the spec.
 */
export function derivedId(prefix: string, ...names: (string | number)[]): string {
  return `${prefix}_${sha256(names.join('\u0000')).slice(0, 24)}`
}

export interface Stamps {
  createdAtM: number
  updatedAtM: number
}

/**
 * A record with its timestamps: a new one is created now; one whose content is unchanged keeps
 * both; a changed one keeps createdAtM and is updated now.
 */
export function stamp<T extends object>(content: T, previous: Stamps | undefined, now: number): T & Stamps {
  if (!previous) return { ...content, createdAtM: now, updatedAtM: now }
  return { ...content, createdAtM: previous.createdAtM, updatedAtM: sameContent(content, previous) ? previous.updatedAtM : now }
}

export type Change = 'created' | 'updated' | 'unchanged'

export function changeOf(next: unknown, previous: unknown | undefined): Change {
  if (previous === undefined) return 'created'
  return sameContent(next, previous) ? 'unchanged' : 'updated'
}
