import { Type } from '@sinclair/typebox'
import { success } from '../../../kernel/errors.js'
import { defineRoute } from '../../route.js'
import { strictObject } from '../../../kernel/schema.js'

export const createProject = defineRoute({
  method: 'POST',
  path: '/v1/projects/create',
  operationId: 'projects.create',
  summary: 'Create a project and its first API key (root key only)',
  tags: ['admin'],
  access: { kind: 'root' },
  body: strictObject({ name: Type.Optional(Type.String({ maxLength: 128 })) }),
  response: Type.Object({ projectId: Type.String(), apiKey: Type.String({ description: 'Shown once; stored hashed.' }), keyId: Type.String() }),
  handler: async ({ body, services }) => success(await services.keys.createProject(body.name ?? '')),
})
