import { Type } from '@sinclair/typebox'
import { failure } from '../../../kernel/errors.js'
import { SCOPES } from '../../../keys/service.js'
import { defineRoute } from '../../route.js'
import { EpochMs, strictObject } from '../../../kernel/schema.js'

const Scope = Type.Union([Type.Literal('*'), ...SCOPES.map((s) => Type.Literal(s))])

export const createKey = defineRoute({
  method: 'POST',
  path: '/v1/keys/create',
  operationId: 'keys.create',
  summary: 'Create an API key for a project',
  description:
    'The root key may create keys for any project; a project key with keys:write only for its own, with at most the scopes it holds (its own scopes by default), and expiring no later than itself: a key created by an expiring key takes its expiry when none is asked for, and a later expiresAt is refused (400, expires_after_creator). Revoking a key revokes the keys it created.',
  tags: ['admin'],
  access: { kind: 'any', scope: 'keys:write' },
  body: strictObject({
    projectId: Type.String({ minLength: 1, maxLength: 36 }),
    name: Type.Optional(Type.String({ maxLength: 128 })),
    scopes: Type.Optional(Type.Array(Scope, { minItems: 1, uniqueItems: true, description: 'Default ["*"].' })),
    expiresAt: Type.Optional(Type.Union([EpochMs, Type.Null()])),
  }),
  response: Type.Object({
    keyId: Type.String(),
    apiKey: Type.String(),
    projectId: Type.String(),
    scopes: Type.Array(Type.String()),
    expiresAt: Type.Union([Type.Integer(), Type.Null()]),
  }),
  handler: ({ body, principal, services }) => {
    if (principal.kind === 'root') return services.keys.createKey(body.projectId, body)
    if (principal.kind !== 'project' || principal.projectId !== body.projectId)
      return failure('forbidden', 'other_project', 'This key belongs to another project.')
    // A project key grants at most what it holds: by default exactly its own scopes.
    const held = principal.scopes
    const scopes = body.scopes ?? [...held]
    if (!held.includes('*') && !scopes.every((scope) => held.includes(scope))) {
      return failure('forbidden', 'scope_not_held', `A key can only grant scopes it holds (${held.join(', ')}).`)
    }
    // The creating key bounds the new key's expiry and, revoked, takes the new key with it.
    return services.keys.createKey(body.projectId, { ...body, scopes, createdBy: principal.keyId })
  },
})
