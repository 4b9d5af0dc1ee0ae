import { Type } from '@sinclair/typebox'
import { defineRoute } from '../../route.js'
import { strictObject } from '../../../kernel/schema.js'

export const revokeKey = defineRoute({
  method: 'POST',
  path: '/v1/keys/revoke',
  operationId: 'keys.revoke',
  summary: 'Revoke an API key',
  description:
    "Revokes the key and every key it created, transitively (their children, grandchildren…). Takes effect on every gateway within a second. The root key may revoke any key; a project key with keys:write only its own project's. Revoking again is fine, and finishes a revocation that was cut short.",
  tags: ['admin'],
  access: { kind: 'any', scope: 'keys:write' },
  body: strictObject({ keyId: Type.String({ minLength: 1, maxLength: 64 }) }),
  response: Type.Object({ keyId: Type.String(), revoked: Type.Literal(true) }),
  handler: ({ body, principal, services }) => services.keys.revokeKey(body.keyId, principal.kind === 'project' ? principal.projectId : undefined),
})
