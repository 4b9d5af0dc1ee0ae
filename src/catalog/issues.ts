import { failure, type Failure } from '../kernel/errors.js'
import { MAX_ISSUES } from './document.js'
import type { ConfigIssue, IssueKind } from './types.js'

/**
 * The problems of one config document. Every check runs and adds what it finds, so a failed
 * apply names every problem at once, each with its JSON path into the submitted document.
 */
export class Issues {
  readonly list: ConfigIssue[] = []
  truncated = false

  add(kind: IssueKind, path: string, message: string): void {
    if (this.list.length < MAX_ISSUES) this.list.push({ kind, path, message })
    else this.truncated = true
  }

  /** A schema or rule is broken. */
  invalid(path: string, message: string): void {
    this.add('invalid_config', path, message)
  }

  /** A name used twice, or a change to a published plan version. */
  conflict(path: string, message: string): void {
    this.add('slug_conflict', path, message)
  }

  /** A reference to something that does not exist. */
  unresolved(path: string, message: string): void {
    this.add('unresolved_reference', path, message)
  }

  get any(): boolean {
    return this.list.length > 0
  }
}

/** Which kind a failure reports when its issues are of several: the first of this list present. */
const PRECEDENCE: IssueKind[] = ['invalid_config', 'slug_conflict', 'unresolved_reference']

/**
 * The 400 of a document with problems: details.kind (the kind by PRECEDENCE) and details.issues
 * (every problem, each with its own kind).
 */
export function configFailure(issues: ConfigIssue[], truncated = false): Failure {
  const kind = PRECEDENCE.find((k) => issues.some((i) => i.kind === k)) ?? 'invalid_config'
  const message = `The config document has ${issues.length}${truncated ? '+' : ''} problem${issues.length === 1 ? '' : 's'} (${kind}); nothing was applied.`
  return failure('invalid', kind, message, truncated ? { kind, issues, truncated } : { kind, issues })
}
